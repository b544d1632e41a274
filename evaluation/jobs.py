"""Job specs: what the web tier sends a GPU host, and how the host runs one.

A spec holds public data only (the operator's public files, its shapes, the candidate's
source, tolerances, the DSL and a secret seed). The host needs the broker and nothing
else: no database, no hidden files. It reports through `publish`: progress after every
shape, then the raw result, or a failure (the Celery task adds a heartbeat every
`heartbeat_s` seconds).

Imports no Django: it runs on a bare GPU host.
"""

from __future__ import annotations

import socket
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evaluation.harness.evaluate import EvaluationJob, EvaluationSettings, evaluate
from evaluation.harness.release import ReleaseError, Tolerance, load_public_operator
from evaluation.harness.results import ShapeResult, json_safe
from evaluation.harness.sandbox import HarnessError

SPEC_VERSION = 1
Publish = Callable[[str, dict[str, Any]], None]  # (event kind, payload)
CheckStop = Callable[[], None]  # raises to abandon the run


def new_run_id() -> str:
    """One execution of a spec: a redelivered message runs the same attempt again."""
    return uuid.uuid4().hex


def job_spec(*, job_id: int, attempt: int, operator: str, reference_py: str, input_py: str,
             shapes_json: str, candidate_source: str, atol: float, rtol: float, dsl: str,
             dsl_ratio_threshold: float, hardware: str, seed: int,
             heartbeat_s: float = 0) -> dict[str, Any]:
    return {
        "version": SPEC_VERSION, "job_id": job_id, "attempt": attempt, "hardware": hardware,
        "operator": {"name": operator, "reference_py": reference_py, "input_py": input_py,
                     "shapes_json": shapes_json},
        "candidate_source": candidate_source, "tolerance": {"atol": atol, "rtol": rtol},
        "dsl": dsl, "dsl_ratio_threshold": dsl_ratio_threshold, "seed": seed,
        "heartbeat_s": heartbeat_s,
    }


def run_job_spec(spec: dict[str, Any], publish: Publish,
                 settings: EvaluationSettings | None = None, *, run: str | None = None,
                 worker: str | None = None, check_stop: CheckStop | None = None) -> None:
    """Evaluate `spec`, reporting through `publish`.

    `check_stop` is called before the first shape and after each one; whatever it raises
    ends the run there, without a report (the portal asked for it and ignores this run).
    """
    ids = {"job_id": spec["job_id"], "attempt": spec["attempt"],
           "worker": worker or socket.gethostname(), "run": run or new_run_id()}
    try:
        with tempfile.TemporaryDirectory(prefix="atrex-job-") as folder:
            operator_dir = Path(folder) / spec["operator"]["name"]
            operator_dir.mkdir()
            for name, key in (("reference.py", "reference_py"), ("input.py", "input_py"),
                              ("shapes.json", "shapes_json")):
                (operator_dir / name).write_text(spec["operator"][key], encoding="utf-8")
            public = load_public_operator(operator_dir, Path(folder))
            job = EvaluationJob(
                operator=public, candidate_source=spec["candidate_source"],
                tolerance=Tolerance(**spec["tolerance"]), dsl=spec["dsl"],
                dsl_ratio_threshold=spec["dsl_ratio_threshold"], seed=spec["seed"])
            publish("started", {**ids, "shapes_total": len(public.shapes)})
            if check_stop is not None:
                check_stop()

            def progress(shape: ShapeResult, done: int, total: int) -> None:
                if check_stop is not None:
                    check_stop()  # a stopped run's last shape was cut short: not reported
                publish("progress", {**ids, "done": done, "total": total, "shape": json_safe(asdict(shape))})

            result = evaluate(job, settings or EvaluationSettings(), progress)
    except (HarnessError, ReleaseError, OSError) as exc:
        publish("failed", {**ids, "reason": f"{type(exc).__name__}: {exc}",
                           "infrastructure": True})
        return
    publish("result", {**ids, "result": result.to_dict()})
