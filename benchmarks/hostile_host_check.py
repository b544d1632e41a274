"""Hostile candidates against the GPU worker's own path: the host's memory stays bounded, the
worker stays up, the next job is scored.

Each hostile candidate of tests/adversarial/candidates/ named in --cases runs as a job
through `evaluation.worker.jobs.run_job_spec` (what the Celery task runs, with the worker's
children started ahead), and after each one the honest candidate runs as the next job in
the same process. Per job it records:
- the trusted parent's peak resident memory during the job (VmHWM, reset before each job
  through /proc/self/clear_refs), against the honest job's;
- the host's shared memory (Shmem in /proc/meminfo, which tmpfs pages count in), sampled
  every 50 ms: the rise during the job over its value before;
- each shape's status and error, and the sandbox's limits as the result reports them.

Usage (from the repository root; on the GPU host as root, sandbox required):

    python benchmarks/hostile_host_check.py [--release DIR] [--operator rms_norm] \
        [--shapes a,b] [--cases output_bomb,tmpfs_fill,fork_bomb,denied_syscall] [--json OUT]

Without --shapes it takes the operator's first two scored shapes on a GPU, the dev shapes
on a CPU. Prints a table last; exits 1 when a hostile job passed, the parent's peak rose above the
honest job's by more than --slack-mib, shared memory rose past the tmpfs caps, or an honest
job after it was not scored.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

from _path import REPO

from evaluation.harness.isolation.sandbox import SandboxSettings
from evaluation.harness.release import load_release
from evaluation.harness.results import shown_verdict
from evaluation.protocol import job_spec
from evaluation.worker.jobs import run_job_spec, warm_children, worker_device

# Cases whose outputs are right and whose trick is in what ran: caught when no shape is
# judged native (on a GPU "mixed", on a CPU "unverified-cpu")
VERDICT_CASES = frozenset({"cpu_mode_switch"})

CANDIDATES = REPO / "tests" / "adversarial" / "candidates"
HONEST = REPO / "evaluation" / "sample_candidates" / "rms_norm" / "triton_native.py"
FIXTURE = REPO / "evaluation" / "releases" / "atrex-fixture"


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _shmem_kib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Shmem:"):
            return int(line.split()[1])
    return 0


class ShmemPeak:
    """The highest Shmem seen while the job ran, sampled on a thread."""

    def __init__(self) -> None:
        self.before = _shmem_kib()
        self.peak = self.before
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.wait(0.05):
            self.peak = max(self.peak, _shmem_kib())

    def __enter__(self) -> ShmemPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()


def run_job(number: int, source: str, spec_args: dict[str, Any], warm: Any) -> dict[str, Any]:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    rss_before = _status_kib("VmRSS")
    events: list[tuple[str, dict[str, Any]]] = []
    started = time.perf_counter()
    with ShmemPeak() as shmem:
        run_job_spec(job_spec(job_id=number, attempt=1, seed=1000 + number,
                              candidate_source=source, **spec_args),
                     lambda kind, payload: events.append((kind, payload)), warm=warm)
    seconds = time.perf_counter() - started
    results = [p["result"] for k, p in events if k == "result"]
    failed = [p for k, p in events if k == "failed"]
    result = results[0] if results else {}
    return {
        "seconds": round(seconds, 2),
        "parent_rss_before_mib": round(rss_before / 1024, 1),
        "parent_peak_mib": round(_status_kib("VmHWM") / 1024, 1),
        "shmem_rise_mib": round((shmem.peak - shmem.before) / 1024, 1),
        "reported": "result" if results else ("failed: " + str(failed[0].get("reason"))
                                              if failed else "nothing"),
        "shapes": [{"shape_id": s["shape_id"], "status": s["status"],
                    "verdict": shown_verdict((s.get("adoption") or {}).get("verdict"),
                                             str(result.get("mode", ""))) or None,
                    "error": (s.get("error") or "")[:400]} for s in result.get("shapes", [])],
        "isolation": result.get("isolation", {}),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--release", type=Path, default=FIXTURE)
    parser.add_argument("--operator", default="rms_norm")
    parser.add_argument("--shapes", default="")
    parser.add_argument("--cases", default="output_bomb,tmpfs_fill,fork_bomb,denied_syscall")
    parser.add_argument("--slack-mib", type=float, default=256.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    device = worker_device()
    op = load_release(args.release).operator(args.operator)
    if args.shapes:
        shapes = args.shapes.split(",")
    else:
        dev = [s.id for s in op.public.shapes if s.id.startswith("dev-")]
        scored = [s.id for s in op.public.shapes if not s.id.startswith("dev-")]
        shapes = (scored[:2] if device == "cuda" else dev[:2]) or scored[:2]
    directory = op.public.directory
    everything = json.loads((directory / "shapes.json").read_text())
    spec_args = {
        "operator": args.operator, "reference_py": (directory / "reference.py").read_text(),
        "input_py": (directory / "input.py").read_text(),
        "shapes_json": json.dumps({k: everything[k] for k in shapes}),
        "atol": op.tolerance.atol, "rtol": op.tolerance.rtol, "dsl": "triton",
        "dsl_ratio_threshold": 0.95, "hardware": "H200"}
    settings = SandboxSettings()
    warm = warm_children(device, "triton", settings)
    warm.prepare()
    honest = HONEST.read_text()
    # Everything a child can write is on tmpfs mounts of these sizes: the designed bound.
    shmem_bound = (settings.scratch_bytes + settings.output_bytes
                   + 2 * settings.private_tmpfs_bytes) / 2**20
    report: dict[str, Any] = {"device": device, "operator": args.operator, "shapes": shapes,
                              "release": str(args.release), "shmem_bound_mib": shmem_bound,
                              "jobs": []}
    number = 0
    try:
        report["honest_first"] = run_job(number, honest, spec_args, warm)
        for case in args.cases.split(","):
            number += 1
            hostile = run_job(number, (CANDIDATES / f"{case}.py").read_text(), spec_args, warm)
            number += 1
            after = run_job(number, honest, spec_args, warm)
            report["jobs"].append({"case": case, "hostile": hostile, "honest_after": after})
            print(f"{case}: {hostile['reported']}, parent peak {hostile['parent_peak_mib']} MiB,"
                  f" shmem +{hostile['shmem_rise_mib']} MiB; honest after: "
                  f"{[s['status'] for s in after['shapes']]}", flush=True)
    finally:
        warm.close()
    base = report["honest_first"]["parent_peak_mib"]
    problems = []
    for row in report["jobs"]:
        hostile, after = row["hostile"], row["honest_after"]
        if row["case"] in VERDICT_CASES:  # correct outputs; caught by the verdict
            if any(s["verdict"] in ("native", None) for s in hostile["shapes"]):
                problems.append(f"{row['case']}: a shape was judged native")
        elif any(s["status"] == "passed" for s in hostile["shapes"]):
            problems.append(f"{row['case']}: a shape passed")
        if hostile["parent_peak_mib"] > base + args.slack_mib:
            problems.append(f"{row['case']}: parent peak {hostile['parent_peak_mib']} MiB, honest "
                            f"{base} MiB")
        if hostile["shmem_rise_mib"] > shmem_bound + args.slack_mib:
            problems.append(f"{row['case']}: shared memory rose {hostile['shmem_rise_mib']} MiB, "
                            f"the tmpfs caps allow {shmem_bound:.0f}")
        if not after["shapes"] or any(s["status"] != "passed" for s in after["shapes"]):
            problems.append(f"{row['case']}: the honest job after it was not scored")
    report["problems"] = problems
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\n{'case':16} {'parent peak MiB':>16} {'shmem rise MiB':>15}  hostile / honest after")
    print(f"{'(honest)':16} {base:16.1f} {report['honest_first']['shmem_rise_mib']:15.1f}")
    for row in report["jobs"]:
        hostile, after = row["hostile"], row["honest_after"]
        print(f"{row['case']:16} {hostile['parent_peak_mib']:16.1f} "
              f"{hostile['shmem_rise_mib']:15.1f}  "
              f"{'/'.join(s['status'] for s in hostile['shapes'])} / "
              f"{'/'.join(s['status'] for s in after['shapes'])}")
    limits = report["honest_first"]["isolation"].get("limits")
    print(f"limits: {json.dumps(limits)}; tmpfs caps together {shmem_bound:.0f} MiB")
    print("problems: " + ("; ".join(problems) if problems else "none"))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
