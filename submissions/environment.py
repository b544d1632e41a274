"""What a result was measured with, as text: one shape's environment, a submission's."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from django.db.models import F

from submissions.models import ShapeResult, Submission

STATIC_KEYS = ("gpu", "host_cpu", "driver", "cuda", "torch", "dsl", "dsl_version")
NOT_RECORDED = "environment not recorded"
MAX_CHARS = 500


def environment_text(environment: dict[str, Any] | None, clocks: bool = True) -> str:
    """"NVIDIA H200 · host Intel(R) Xeon(R) … · driver 580.159.04 · CUDA 13.0 · torch 2.11.0 ·
    triton 3.6.0 · SM 1980→1980 MHz, memory 3201→3201 MHz" (clocks before and after the
    timing stage)."""
    if not environment:
        return NOT_RECORDED
    parts = [str(environment.get("gpu") or "CPU")]
    if environment.get("host_cpu"):
        parts.append(f"host {environment['host_cpu']}")
    for label, key in (("driver", "driver"), ("CUDA", "cuda"), ("torch", "torch")):
        if environment.get(key):
            parts.append(f"{label} {environment[key]}")
    if environment.get("dsl"):
        parts.append(f"{environment['dsl']} {environment.get('dsl_version') or ''}".strip())
    before, after = environment.get("clocks_before") or {}, environment.get("clocks_after") or {}
    measured = [f"{label} {before.get(key)}→{after.get(key)} MHz"
                for label, key in (("SM", "sm_mhz"), ("memory", "memory_mhz"))
                if before.get(key) is not None or after.get(key) is not None]
    if clocks and measured:
        parts.append(", ".join(measured))
    return " · ".join(parts)


def environments_summary(environments: Iterable[dict[str, Any] | None]) -> str:
    """The distinct environments (without clocks) of a set of results, most shapes first,
    with how many shapes each measured when there is more than one."""
    counts = Counter(environment_text({k: e.get(k) for k in STATIC_KEYS}, clocks=False)
                     if isinstance(e, dict) and e else NOT_RECORDED for e in environments)
    if not counts:
        return ""
    if len(counts) == 1:
        return next(iter(counts))
    text = " | ".join(f"{text} ({n} shapes)" for text, n in counts.most_common())
    return text if len(text) <= MAX_CHARS else text[:MAX_CHARS - 1] + "…"


def submission_environment_update(submission_id: int) -> str:
    """Rewrite the submission's environment from its jobs' latest attempts: when one of its
    jobs ends or goes back to the queue (submissions/jobs.py), or after results are stored
    outside a job's life cycle (recorded results, leaderboard/demo.py and ladder.py)."""
    environments = (ShapeResult.objects
                    .filter(job__candidate__submission_id=submission_id,
                            attempt=F("job__attempts"))
                    .values_list("raw__environment", flat=True))
    text = environments_summary(environments)
    Submission.objects.filter(pk=submission_id).update(environment=text)
    return text
