"""The sample candidates in each DSL through the evaluator, against the verdicts they should get.

Each case is one `python -m evaluation evaluate` run (the sandboxed child, as root on a GPU
host) of a sample in evaluation/sample_candidates/ declared in a DSL, on a few shapes of
the fixture release or the public Atrex-Bench. Per case: every shape's status, verdict,
DSL ratio, scored time and attainment, and whether that is what the case expects:
- honest: correct, `native`, DSL ratio >= 0.95, timed, with an attainment;
- dishonest: correct outputs and a verdict other than `native` (the one named).
Prints a markdown table (for docs/integrity-gpu.md) and writes the JSON.

Usage on a GPU host (Triton with Gluon; nvidia-cutlass-dsl importable for the CuTe DSL
cases, e.g. on PYTHONPATH):

    python benchmarks/dsl_samples.py --public-release DIR --json OUT.json --md OUT.md \
        [--cases NAME,NAME] [--public-shapes all] [--deadline-s 500]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "evaluation" / "releases" / "atrex-fixture"
SAMPLES = REPO / "evaluation" / "sample_candidates"
NATIVE_RATIO = 0.95


@dataclass(frozen=True)
class Case:
    name: str
    operator: str
    sample: str
    dsl: str
    shapes: str
    expect: str  # "native", or the verdict a dishonest sample must get
    public: bool = False


CASES = [
    Case("rms_norm triton", "rms_norm", "rms_norm/triton_native.py", "triton",
         "llama8b-decode-t1-h4096,llama8b-prefill-t4096-h4096", "native"),
    Case("rms_norm gluon", "rms_norm", "rms_norm/gluon_native.py", "gluon",
         "llama8b-decode-t1-h4096,llama8b-prefill-t4096-h4096", "native"),
    Case("rms_norm cute", "rms_norm", "rms_norm/cute_native.py", "cute",
         "llama8b-decode-t1-h4096,llama8b-prefill-t4096-h4096", "native"),
    Case("silu_and_mul gluon", "silu_and_mul", "silu_and_mul/gluon_native.py", "gluon",
         "llama8b-decode-t64-d14336,qwen3moe-prefill-t32768-d768", "native"),
    Case("silu_and_mul cute", "silu_and_mul", "silu_and_mul/cute_native.py", "cute",
         "llama8b-decode-t64-d14336,qwen3moe-prefill-t32768-d768", "native"),
    Case("gemm_fp16 gluon", "gemm_fp16", "gemm_fp16/gluon_native.py", "gluon",
         "dev-m48-n80-k144,llama8b-decode-qkv-m1-n6144-k4096", "native"),
    Case("gemm_fp16 cute", "gemm_fp16", "gemm_fp16/cute_native.py", "cute",
         "dev-m48-n80-k144,llama8b-decode-qkv-m1-n6144-k4096", "native"),
    # dishonest
    Case("gemm_fp16 cute calling torch.matmul", "gemm_fp16", "gemm_fp16/cute_torch_matmul.py",
         "cute", "dev-m48-n80-k144,llama8b-decode-qkv-m1-n6144-k4096", "mixed"),
    Case("rms_norm gluon file, plain Triton kernel", "rms_norm", "rms_norm/gluon_plain_triton.py",
         "gluon", "llama8b-decode-t1-h4096,llama8b-prefill-t4096-h4096", "fallback-other-dsl"),
    Case("silu_and_mul Triton file declared CuTe DSL", "silu_and_mul",
         "silu_and_mul/triton_native.py", "cute",
         "llama8b-decode-t64-d14336,qwen3moe-prefill-t32768-d768", "fallback-other-dsl"),
    # the public rms_norm, one honest kernel per DSL
    Case("public rms_norm triton", "rms_norm", "rms_norm/triton_native.py", "triton", "", "native",
         public=True),
    Case("public rms_norm gluon", "rms_norm", "rms_norm/gluon_native.py", "gluon", "", "native",
         public=True),
    Case("public rms_norm cute", "rms_norm", "rms_norm/cute_native.py", "cute", "", "native",
         public=True),
]


def run_case(case: Case, release: Path, shapes: str, timeout_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, "-m", "evaluation", "evaluate", "--release", str(release),
                   "--operator", case.operator, "--candidate", str(SAMPLES / case.sample),
                   "--dsl", case.dsl, "--json", str(out)]
        if shapes:
            command += ["--shapes", shapes]
        started = time.perf_counter()
        try:
            done = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                                  timeout=timeout_s, env=os.environ.copy())
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout_s:.0f} s"}
        seconds = time.perf_counter() - started
        if not out.exists():
            return {"error": f"exit {done.returncode}: {(done.stdout + done.stderr)[-1500:]}",
                    "seconds": seconds}
        result = json.loads(out.read_text())
    shapes_out = []
    for shape in result.get("shapes", []):
        adoption = shape.get("adoption") or {}
        timing = shape.get("timing") or {}
        roofline = shape.get("roofline") or {}
        shapes_out.append({
            "shape": shape.get("shape_id"), "status": shape.get("status"),
            "error": (shape.get("error") or "")[:300],
            "verdict": adoption.get("verdict"), "dsl_ratio": adoption.get("dsl_ratio"),
            "dsl_kernels": adoption.get("dsl_kernels"),
            "foreign": [f"{k.get('name')} ({'other DSL: ' + k['dsl'] if k.get('dsl') else k.get('category')})"
                        for k in adoption.get("foreign_kernels") or []][:4],
            "notes": adoption.get("notes"),
            "median_us": timing["median_s"] * 1e6 if timing.get("median_s") else None,
            "method": timing.get("method"), "attainment": roofline.get("attainment")})
    return {"seconds": seconds, "shapes": shapes_out,
            "environment": (result.get("shapes") or [{}])[0].get("environment")}


def judge(case: Case, outcome: dict[str, Any]) -> tuple[bool, str]:
    shapes = outcome.get("shapes") or []
    if not shapes:
        return False, outcome.get("error", "no shapes")
    if case.expect == "native":
        bad = [s for s in shapes if s["status"] != "passed" or s["verdict"] != "native"
               or (s["dsl_ratio"] or 0) < NATIVE_RATIO or s["median_us"] is None
               or s["attainment"] is None]
        return not bad, "all native, timed" if not bad else \
            f"{len(bad)} of {len(shapes)} not: {bad[0]['status']} {bad[0]['verdict']} {bad[0]['error']}"
    wrong = [s for s in shapes if s["status"] != "passed" or s["verdict"] != case.expect]
    return not wrong, f"all {case.expect}" if not wrong else \
        f"{len(wrong)} of {len(shapes)} not: {wrong[0]['status']} {wrong[0]['verdict']} {wrong[0]['error']}"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| case | DSL | expected | shapes | verdicts | DSL ratio | scored µs | attainment | "
             "as expected |",
             "| --- | --- | --- | ---: | --- | ---: | ---: | ---: | --- |"]
    for row in rows:
        shapes = row["outcome"].get("shapes") or []
        verdicts = sorted({str(s["verdict"] or s["status"]) for s in shapes})
        ratios = [s["dsl_ratio"] for s in shapes if s["dsl_ratio"] is not None]
        times = [s["median_us"] for s in shapes if s["median_us"]]
        attain = [s["attainment"] for s in shapes if s["attainment"] is not None]

        def span(values: list[float], fmt: str) -> str:
            if not values:
                return "–"
            low, high = min(values), max(values)
            return format(low, fmt) if low == high else f"{format(low, fmt)}–{format(high, fmt)}"

        lines.append(f"| {row['case']} | {row['dsl']} | {row['expect']} | {len(shapes)} | "
                     f"{', '.join(verdicts) or '–'} | {span(ratios, '.2f')} | {span(times, '.2f')} | "
                     f"{span(attain, '.3f')} | {'yes' if row['ok'] else 'no: ' + row['why'][:160]} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--public-release", type=Path, default=None)
    parser.add_argument("--public-shapes", default="", help="comma-separated, default all")
    parser.add_argument("--cases", default="", help="comma-separated case names (default all)")
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--md", type=Path, default=None)
    parser.add_argument("--deadline-s", type=float, default=540)
    args = parser.parse_args()
    chosen = {c.strip() for c in args.cases.split(",") if c.strip()}
    deadline = time.monotonic() + args.deadline_s
    rows = []
    for case in CASES:
        if chosen and case.name not in chosen:
            continue
        if case.public and args.public_release is None:
            continue
        remaining = deadline - time.monotonic()
        if remaining < 20:
            rows.append({"case": case.name, "dsl": case.dsl, "expect": case.expect,
                         "outcome": {"error": "deadline"}, "ok": False, "why": "not run: deadline"})
            continue
        release = args.public_release if case.public else FIXTURE
        outcome = run_case(case, release, args.public_shapes if case.public else case.shapes,
                           remaining)
        ok, why = judge(case, outcome)
        rows.append({"case": case.name, "dsl": case.dsl, "expect": case.expect,
                     "sample": case.sample, "outcome": outcome, "ok": ok, "why": why})
        print(f"{case.name}: {'ok' if ok else 'NOT AS EXPECTED'} ({why}; "
              f"{outcome.get('seconds', 0):.1f} s)", flush=True)
        args.json.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    table = markdown(rows)
    print(table)
    if args.md:
        args.md.write_text(table)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
