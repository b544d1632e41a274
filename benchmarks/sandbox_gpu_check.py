"""The sandbox on a real GPU host: private root, per-worker uids, attacks from outside.

Run as root on the GPU host (the lent H200 runs commands as root):

    python benchmarks/sandbox_gpu_check.py [--json OUT]

1. Whether this host can build the child's private root (and, if not, which step fails).
2. The fixture's rms_norm, every shape, Triton and PyTorch candidates, under uid 65534
   (has a passwd entry) and 60001 (has none, as per-worker uids): the verdicts must agree,
   and the child's start-up time (imports, CUDA context, the private root) is printed.
3. On the GPU (CUDA mode, /dev/nvidia* and /sys in the root): the candidates that attack the
   host (tests/adversarial/candidates: read_checkout, unix_sockets) report what they reached,
   and a worker killed during `outlive_worker` takes every process of its candidate along.

Prints a table last; `--json` keeps every number.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _path import REPO

from evaluation.harness.evaluate import EvaluationRequest, EvaluationSettings, evaluate
from evaluation.harness.isolation import jail
from evaluation.harness.isolation.sandbox import (
    SAFE_PATH,
    SandboxSettings,
    jail_problem,
    planned_isolation,
)
from evaluation.harness.isolation.workarea import AREA_PREFIX, WorkArea
from evaluation.harness.release import load_release

FIXTURE = REPO / "evaluation" / "releases" / "atrex-fixture"
SAMPLES = REPO / "evaluation" / "sample_candidates" / "rms_norm"
ATTACKS = REPO / "tests" / "adversarial" / "candidates"


def diagnose() -> list[str]:
    """Each step of the private root in turn, to name the one this host refuses."""
    lines = []
    plan = jail.mount_plan(readonly=jail.python_install(), masks=(), gpu=True,
                           devices=jail.gpu_devices())
    with tempfile.TemporaryDirectory() as folder:
        paths = jail.JailPaths(*(Path(folder) / n for n in ("root", "work", "cache")))
        for path in (paths.mountpoint, paths.workdir, paths.cache_dir):
            path.mkdir()
        full = jail.script(paths, plan, ["true"]).splitlines()
        head = full[:3]  # set -eu, R=..., the root's tmpfs
        for index, step in enumerate([*plan, None]):
            body = [jail.mount_step(op) for op in plan[:index + 1]] if step else full[3:]
            done = subprocess.run(["unshare", "--mount", "--net", "--pid", "--fork", "--",
                                   "/bin/sh", "-c", "\n".join([*head, *body, "exit 0"])],
                                  capture_output=True, text=True, env={"PATH": SAFE_PATH})
            name = f"{step.kind} {step.target}" if step else "pivot_root, /proc, drop to uid"
            lines.append(f"{'ok ' if done.returncode == 0 else 'FAIL'} {name}"
                         + ("" if done.returncode == 0 else f": {done.stderr.strip()[-300:]}"))
            if done.returncode != 0:
                break
    return lines


def evaluate_under(uid: int, candidate: Path, shapes: list[str] | None) -> dict[str, Any]:
    release = load_release(FIXTURE)
    op = release.operator("rms_norm")
    sandbox = dataclasses.replace(SandboxSettings(), child_uid=uid, child_gid=uid,
                                  require_isolation=True)
    settings = EvaluationSettings(sandbox=sandbox)
    job = EvaluationRequest(operator=op.public, candidate_source=candidate.read_text(),
                        tolerance=op.tolerance, shape_ids=shapes, masked_paths=(release.root,))
    result = evaluate(job, settings)
    return {
        "uid": uid, "candidate": candidate.stem, "isolation": result.isolation,
        "child_start_s": result.child_start_seconds, "seconds": result.seconds,
        "shapes": [{"id": s.shape_id, "status": s.status, "verdict": s.verdict,
                    "median_us": (s.timing or {}).get("median_s") and s.timing["median_s"] * 1e6,
                    "error": s.error} for s in result.shapes],
    }


def attack(case: str, **fill: str) -> str:
    source = (ATTACKS / f"{case}.py").read_text()
    for name, value in fill.items():
        source = source.replace(f"__{name}__", value)
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as handle:
        handle.write(source)
    outcome = evaluate_under(60001, Path(handle.name), ["dev-t4-h256"])
    os.unlink(handle.name)
    return str(outcome["shapes"][0]["error"])


WORKER = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from evaluation.harness.evaluate import EvaluationRequest, EvaluationSettings, evaluate
from evaluation.harness.release import load_release
from evaluation.harness.isolation.sandbox import SandboxSettings
op = load_release(Path(sys.argv[1])).operator("rms_norm")
settings = EvaluationSettings(compile_timeout_s=600, call_timeout_s=600,
                              sandbox=SandboxSettings(workdir_base=sys.argv[3], child_uid=60001,
                                                      child_gid=60001))
evaluate(EvaluationRequest(operator=op.public, candidate_source=Path(sys.argv[2]).read_text(),
                       tolerance=op.tolerance, shape_ids=["dev-t3-h200"]), settings)
"""


def descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if fields[0] != "Z":
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_worker_mid_job() -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix="atrex-kill-"))
    source = base / "candidate.py"
    source.write_text((ATTACKS / "outlive_worker.py").read_text())
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(FIXTURE), str(source),
                               str(base), str(REPO)])
    deadline = time.monotonic() + 300
    while len(descendants(worker.pid)) < 4 and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(3)
    processes = descendants(worker.pid)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    killed_at = time.monotonic()
    while any(Path(f"/proc/{p}").exists() for p in processes) and time.monotonic() - killed_at < 30:
        time.sleep(0.1)
    alive = [p for p in processes if Path(f"/proc/{p}").exists()]
    left = [p.name for p in base.glob(AREA_PREFIX + "*")]
    WorkArea(base).remove()  # the next worker's start sweeps the dead one's area
    return {"processes": len(processes), "alive_after_kill": alive,
            "seconds_to_gone": round(time.monotonic() - killed_at, 2),
            "areas_left_by_killed_worker": len(left),
            "areas_after_next_start": len(list(base.glob(AREA_PREFIX + "*")))}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    import torch

    report: dict[str, Any] = {"uname": os.uname().release, "euid": os.geteuid(),
                              "torch": torch.__version__, "gpus": torch.cuda.device_count(),
                              "jail_problem": jail_problem()}
    print(json.dumps(report), flush=True)
    if report["jail_problem"] is not None:
        for line in diagnose():
            print(line, flush=True)
        return 1
    print("isolation:", planned_isolation(SandboxSettings(), ()), flush=True)
    runs = [evaluate_under(uid, SAMPLES / name, None if name == "triton_native.py" else
                           ["dev-t4-h256", "dev-t3-h200", "llama8b-decode-t1-h4096"])
            for name in ("triton_native.py", "torch_fallback.py") for uid in (65534, 60001)]
    report["runs"] = runs
    checkout_canary = REPO / ".atrex-canary-gpu"
    checkout_canary.write_text("CANARY")
    server_dir = Path(tempfile.mkdtemp())
    server_dir.chmod(0o755)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(server_dir / "s.sock"))
    os.chmod(server_dir / "s.sock", 0o777)
    server.listen(4)
    try:
        report["read_checkout"] = attack("read_checkout", REPO=str(REPO),
                                         CANARY=str(checkout_canary))
        report["unix_sockets"] = attack("unix_sockets", SOCKET=str(server_dir / "s.sock"),
                                        ABSTRACT="atrex-gpu-check")
    finally:
        checkout_canary.unlink()
        server.close()
    report["kill_worker_mid_job"] = kill_worker_mid_job()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(f"\n{'candidate':<16} {'uid':>6} {'shapes':>6} {'passed':>6} {'verdicts':<28} "
          f"{'child start s':>13} {'total s':>8}")
    for run in runs:
        verdicts = sorted({str(s["verdict"]) for s in run["shapes"]})
        print(f"{run['candidate']:<16} {run['uid']:>6} {len(run['shapes']):>6} "
              f"{sum(s['status'] == 'passed' for s in run['shapes']):>6} {','.join(verdicts):<28} "
              f"{','.join(f'{t:.2f}' for t in run['child_start_s']):>13} {run['seconds']:>8.1f}")
    same = all([(s["status"], s["verdict"]) for s in a["shapes"]] ==
               [(s["status"], s["verdict"]) for s in b["shapes"]]
               for a, b in zip(runs[::2], runs[1::2], strict=True))
    print(f"verdicts under 65534 and 60001 agree: {same}")
    print(f"read_checkout: {report['read_checkout'][:600]}")
    print(f"unix_sockets: {report['unix_sockets'][:400]}")
    print(f"kill mid-job: {report['kill_worker_mid_job']}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
