"""Record ncu profiles of one shape for the profile mode's parser (issue: hardware counters).

For each case, one forward of a candidate on one shape runs inside the NVTX range
`ncu_profile.NVTX_RANGE` under Nsight Compute with the clocks left alone
(`ncu_profile.command`), after two warm-up calls outside it (Triton compiles then). Not
sandboxed: this records what the parser reads, from the project's own sample candidates;
how a team's candidate is profiled in its sandbox is the profile mode's part.

Usage (on a GPU host, from the repository root; writes into OUT):

    python benchmarks/ncu_profile_record.py --out OUT [--public-release .atrex-bench]

Writes per case the raw ncu CSV (`ncu-<case>.csv`), all parsed cases in `ncu-profiles.json`
(with the clocks nvidia-smi reported before and after) and the metric names this ncu knows
(`ncu-metrics.txt`); prints a table per case.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _path import REPO

from benchmarks.ncu import find_ncu
from evaluation.harness.ncu import profile as ncu_profile

FIXTURE = REPO / "evaluation" / "releases" / "atrex-fixture"
SAMPLES = REPO / "evaluation" / "sample_candidates"
H200_HBM_PEAK = 4.8e12  # evaluation/hardware/H200.yaml, b_peak.hbm


def cases(public: Path | None) -> list[tuple[str, Path, str, Path, str]]:
    """(case, release, operator, candidate, shape): an honest Triton memory-bound kernel, the
    same operator as a PyTorch fallback, and a tensor-core Triton GEMM."""
    rms_release, rms_shape = (public, "40") if public else (FIXTURE, "llama8b-prefill-t4096-h4096")
    return [
        ("rms_norm-triton", rms_release, "rms_norm", SAMPLES / "rms_norm/triton_native.py",
         rms_shape),
        ("rms_norm-torch-fallback", rms_release, "rms_norm",
         SAMPLES / "rms_norm/torch_fallback.py", rms_shape),
        ("gemm_fp16-triton", FIXTURE, "gemm_fp16", SAMPLES / "gemm_fp16/triton_native.py",
         "llama8b-prefill-o-m4096-n4096-k4096"),
    ]


def run_inner(release: Path, operator: str, candidate: Path, shape: str) -> None:
    """The profiled process: two warm-up forwards, then one inside the NVTX range."""
    import torch

    from evaluation.harness.operator_files import (
        candidate_model_class,
        import_file,
        make_inputs,
        make_model,
    )
    from evaluation.harness.release import load_release

    op = load_release(release).operator(operator).public
    spec = op.shape(shape)
    device = torch.device("cuda")
    inputs_module = import_file(op.directory / "input.py", "atrex_profile_input")
    model = make_model(candidate_model_class(import_file(candidate, "atrex_profile_candidate")),
                       spec.init_kwargs, 1, device)
    inputs = make_inputs(inputs_module, spec.input_kwargs, 2, device)
    with torch.no_grad():
        for _ in range(2):
            model(**inputs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(ncu_profile.NVTX_RANGE)
        model(**inputs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def smi_clocks() -> str:
    out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.mem,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True)
    return out.stdout.strip()


def parsed_entry(entry: dict[str, object], csv_text: str) -> None:
    """Fill a case's entry from its ncu CSV (kernels, clocks) or say why it could not be read."""
    try:
        kernels = ncu_profile.parse_report(csv_text, H200_HBM_PEAK)
    except ncu_profile.ReportUnreadable as exc:
        entry["error"] = str(exc)
        return
    entry.pop("error", None)
    entry["kernels"] = [k.to_dict() for k in kernels]
    entry["clocks"] = ncu_profile.clocks_seen(kernels)


def reparse(folder: Path) -> None:
    path = folder / "ncu-profiles.json"
    report = json.loads(path.read_text())
    for case, entry in report["cases"].items():
        parsed_entry(entry, (folder / f"ncu-{case}.csv").read_text())
    path.write_text(json.dumps(report, indent=2) + "\n")
    print_cases(report["cases"])


def print_cases(entries: dict[str, dict[str, object]]) -> None:
    for case, entry in entries.items():
        print(f"\n{case} ({entry['operator']} shape {entry['shape']}), clocks "
              f"{entry.get('clocks')} {entry.get('error', '')}")
        for k in entry.get("kernels", []):  # type: ignore[attr-defined]
            print(f"  {k['name'][:48]:48} {1e6 * (k['duration_s'] or 0):9.2f} us  "
                  f"DRAM {100 * (k['dram_of_peak'] or 0):5.1f}% of peak  occ "
                  f"{k['achieved_occupancy_pct'] or 0:5.1f}%  SM {k['sm_throughput_pct'] or 0:5.1f}%"
                  f"  tensor {k['tensor_pipe_pct'] or 0:5.1f}%  L2 hit "
                  f"{k['l2_hit_rate_pct'] or 0:5.1f}%  {k['limited_by']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--public-release", type=Path)
    parser.add_argument("--inner", nargs=4, metavar=("RELEASE", "OPERATOR", "CANDIDATE", "SHAPE"))
    parser.add_argument("--reparse", type=Path, metavar="DIR",
                        help="no GPU: parse the saved ncu-<case>.csv of DIR again into its "
                             "ncu-profiles.json (the run's clocks and metric list kept)")
    args = parser.parse_args()
    if args.reparse:
        reparse(args.reparse)
        return
    if args.inner:
        release, operator, candidate, shape = args.inner
        run_inner(Path(release), operator, Path(candidate), shape)
        return
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    ncu = find_ncu()
    query = subprocess.run([ncu, "--query-metrics"], capture_output=True, text=True).stdout
    (out / "ncu-metrics.txt").write_text(query)
    metrics = ncu_profile.known_metrics(query)
    missing = sorted(set(ncu_profile.METRICS.values()) - set(metrics))
    print(f"ncu {ncu}: {len(metrics)} of {len(ncu_profile.METRICS)} metrics known; "
          f"missing {missing}", flush=True)
    report: dict[str, object] = {"metrics": metrics, "missing_metrics": missing, "cases": {}}
    for case, release, operator, candidate, shape in cases(args.public_release):
        before = smi_clocks()
        program = [sys.executable, str(Path(__file__).resolve()), "--inner", str(release),
                   operator, str(candidate), shape]
        done = subprocess.run(ncu_profile.command(ncu, program, metrics), capture_output=True,
                              text=True, timeout=600)
        (out / f"ncu-{case}.csv").write_text(done.stdout)
        entry: dict[str, object] = {"operator": operator, "shape": shape,
                                    "candidate": str(candidate.relative_to(REPO)),
                                    "smi_clocks_before": before, "smi_clocks_after": smi_clocks()}
        parsed_entry(entry, done.stdout)
        if "error" in entry:
            entry["error"] = f"{entry['error']}; stderr: {done.stderr[-2000:]}"
        report["cases"][case] = entry  # type: ignore[index]
    (out / "ncu-profiles.json").write_text(json.dumps(report, indent=2) + "\n")
    print_cases(report["cases"])  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
