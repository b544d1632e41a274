"""Forwards that launch outside the capturing stream, through the evaluator (issue 43; GPU).

Each candidate is evaluated on two real fixture shapes: a Triton rms_norm launching on a
side stream it never joins (benchmarks/candidates/rms_norm_unjoined_stream.py), the honest
rms_norm beside it, and where nvidia-cutlass-dsl is installed, the CuTe DSL rms_norm with
its launch's `stream=` taken out (the default stream). Expected: the side-stream and
default-stream candidates correct and timed eagerly with the note on how to fix the
launch; the honest one replayed from a graph.

Usage: python benchmarks/capture_check.py [--json OUT]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

from _path import REPO

from evaluation.harness.evaluate import EvaluationRequest, EvaluationSettings, evaluate
from evaluation.harness.release import load_release

RELEASE = REPO / "evaluation" / "releases" / "atrex-fixture"
SHAPES = ["llama8b-decode-t32-h4096", "llama8b-prefill-t4096-h4096"]


def cute_without_stream() -> str:
    source = (REPO / "evaluation/sample_candidates/rms_norm/cute_native.py").read_text()
    return source.replace(", cuda.CUstream(torch.cuda.current_stream().cuda_stream))", ")") \
        .replace(", stream: cuda.CUstream):", "):").replace("stream=stream)", ")")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    release = load_release(RELEASE)
    op = release.operator("rms_norm")
    cases = {
        "triton_unjoined_side_stream": ("triton", (REPO / "benchmarks/candidates/"
                                                   "rms_norm_unjoined_stream.py").read_text()),
        "triton_honest": ("triton", (REPO / "evaluation/sample_candidates/rms_norm/"
                                     "triton_native.py").read_text()),
    }
    if importlib.util.find_spec("cutlass") is not None:
        cases["cute_default_stream"] = ("cute", cute_without_stream())
    rows = {}
    for name, (dsl, source) in cases.items():
        job = EvaluationRequest(operator=op.public, candidate_source=source, dsl=dsl,
                                tolerance=op.tolerance, shape_ids=SHAPES,
                                masked_paths=(release.root,))
        result = evaluate(job, EvaluationSettings(device="cuda"))
        rows[name] = [{"shape": s.shape_id, "status": s.status, "verdict": s.verdict,
                       "error": s.error, "method": (s.timing or {}).get("method"),
                       "median_us": ((s.timing or {}).get("median_s") or 0) * 1e6,
                       "graph_error": (s.timing or {}).get("graph_error")}
                      for s in result.shapes]
        for row in rows[name]:
            print(f"{name} {row['shape']}: {row['status']} {row['verdict']} {row['method']} "
                  f"{row['median_us']:.2f} us; {(row['graph_error'] or row['error'] or '')[:300]}",
                  flush=True)
    if "cute_default_stream" not in cases:
        print("cute_default_stream: not run (nvidia-cutlass-dsl is not installed here)")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
