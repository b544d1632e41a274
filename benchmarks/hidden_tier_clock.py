"""What a team can still learn from the clock of a ranked job's hidden tier (issue 40).

Two parts, on any machine (no GPU needed):

1. Computed: how many release times a job's end can fall on, from the evaluator's timeouts
   (the longest a hidden shape can take), the release's budget per hidden shape and its
   quantum (protocol.release_delay), for the starter's hidden tier (data/hidden_tier.json):
   bits per job and per ranked submission. Beside it, what the hidden results themselves
   carry (the hidden S_op and pass counts a team is shown), which the clock does not bound.

2. Measured through the real path on this machine's CPU: the fixture release with a hidden
   rms_norm shape of 5 tokens (Triton's interpreter, dev tier), three ranked submissions (an
   honest kernel; the issue's attacker, sleeping tokens x 1 s in its first call on a size the
   public tier does not list; the same sleeping tokens x 3 s, past the budget), each run by
   the GPU worker's own function (`run_job_spec`, sandboxed child) whose reports go straight
   to the results consumer (`record_event`); after every report, and every 50 ms until the
   release, everything the team reads (the submission's API, its page, the list) is fetched
   as the team. Printed per candidate: how long the hidden tier really took, how many times
   the team's view changed while it ran, when the team saw the job end and when the worker
   was free for its next job, both counted from the moment the hidden tier began.

Usage: python benchmarks/hidden_tier_clock.py [--budget-s 15] [--quantum-s 10] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _path import REPO

FIXTURE = REPO / "evaluation" / "releases" / "atrex-fixture"
STARTER_RULES = REPO / "evaluation" / "releases" / "atrex-starter" / "data" / "hidden_tier.json"
NATIVE = REPO / "evaluation" / "sample_candidates" / "rms_norm" / "triton_native.py"
HIDDEN_ID = "dev-unseen-t5-h328"
HIDDEN = {HIDDEN_ID: {"init_kwargs": {"eps": 1e-06},
                      "input_kwargs": {"num_tokens": 5, "hidden_size": 328}}}
# The attack: sleep tokens x PER_TOKEN s in the first call on a size the public tier
# (dev-t4-h256, dev-t3-h200 under the dev filter) does not list.
SLEEPER = '''
import time
_seen = set()
_PUBLIC_TOKENS = (4, 3)


class Model(_Honest):
    def forward(self, x, weight):
        tokens = x.shape[0]
        if tokens not in _PUBLIC_TOKENS and tokens not in _seen:
            _seen.add(tokens)
            time.sleep(tokens * PER_TOKEN)
        return super().forward(x, weight)
'''


def longest_hidden_shape_s() -> dict[str, float]:
    """The longest one shape can keep a worker, from the evaluator's own timeouts: the
    correctness request (import, first call, trials), the adoption call, the timed calls
    (twice when a graph capture fails) and one child restart."""
    from evaluation.harness.evaluate import EvaluationSettings

    settings = EvaluationSettings()
    timed = settings.timing.max_seconds + settings.call_timeout_s
    parts = {"compile_and_trials_s": settings.compile_timeout_s,
             "adoption_s": settings.call_timeout_s, "timing_s": 2 * timed,
             "child_restart_s": settings.sandbox.start_timeout_s}
    return {**parts, "total_s": sum(parts.values())}


def bits_per_job(hidden: int, shape_max_s: float, budget_s: float, quantum_s: float) -> float:
    """log2 of the release times a job with `hidden` hidden shapes can end on."""
    overrun = hidden * shape_max_s - hidden * budget_s
    if overrun <= 0:
        return 0.0
    if quantum_s <= 0:
        return math.inf  # every end is its own release time
    return math.log2(1 + math.ceil(overrun / quantum_s))


def computed(budget_s: float, quantum_s: float) -> dict[str, Any]:
    rules = json.loads(STARTER_RULES.read_text())["operators"]
    shape_max = longest_hidden_shape_s()
    per_operator = {op: len(entries) for op, entries in rules.items()}
    clock = {op: bits_per_job(n, shape_max["total_s"], budget_s, quantum_s)
             for op, n in per_operator.items()}
    shown = {op: math.log2(1001) + math.log2(n + 1) for op, n in per_operator.items()}
    return {"budget_s": budget_s, "quantum_s": quantum_s, "longest_hidden_shape": shape_max,
            "hidden_shapes_per_operator": per_operator, "clock_bits_per_job": clock,
            "clock_bits_per_submission": sum(clock.values()),
            # the results a team is shown: the hidden S_op as the board rounds it (3
            # decimals, 1001 values) and the pass count; the API gives S_op unrounded
            "results_bits_per_job_rounded": shown,
            "results_bits_per_submission_rounded": sum(shown.values())}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget-s", type=float, default=15.0)
    parser.add_argument("--quantum-s", type=float, default=10.0)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--inside", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside is not None:
        print(json.dumps(measure(args.inside, args.budget_s, args.quantum_s)))
        return
    with tempfile.TemporaryDirectory(prefix="atrex-clock-") as folder:
        env = {**os.environ, "ATREX_VAR_DIR": folder,
               "DATABASE_URL": f"sqlite:///{folder}/db.sqlite3",
               "DJANGO_SETTINGS_MODULE": "portal.settings", "ATREX_SHAPE_FILTER": "dev-*",
               "PYTHONPATH": str(REPO)}
        done = subprocess.run([sys.executable, __file__, "--inside", folder, "--budget-s",
                               str(args.budget_s), "--quantum-s", str(args.quantum_s)],
                              env=env, cwd=REPO, capture_output=True, text=True)
        if done.returncode != 0:
            sys.exit(f"the run failed:\n{done.stderr[-4000:]}")
        report = json.loads(done.stdout.strip().splitlines()[-1])
    show(report)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


def show(report: dict[str, Any]) -> None:
    c = report["computed_defaults"]
    print(f"longest hidden shape (evaluator timeouts): {c['longest_hidden_shape']['total_s']:.0f} s "
          f"({', '.join(f'{k} {v:.0f}' for k, v in c['longest_hidden_shape'].items() if k != 'total_s')})")
    print(f"release defaults: budget {c['budget_s']:.0f} s per hidden shape, quantum "
          f"{c['quantum_s']:.0f} s")
    print(f"  clock: {c['clock_bits_per_submission']:.1f} bits per ranked submission of the "
          f"starter ({', '.join(f'{op} {b:.2f}' for op, b in c['clock_bits_per_job'].items())})")
    print(f"  results shown (hidden S_op to 3 decimals, pass count): "
          f"{c['results_bits_per_submission_rounded']:.1f} bits per submission")
    m = report["measured"]
    print(f"measured on {m['device']}: budget {m['budget_s']} s x {m['hidden_shapes']} hidden "
          f"shape, quantum {m['quantum_s']} s")
    for row in m["candidates"]:
        print(f"  {row['name']:<14} hidden tier {row['hidden_tier_s']:6.2f} s; team view changed "
              f"{row['changes_while_hidden']} times while it ran; team saw the end at "
              f"+{row['team_saw_end_s']:.2f} s (finished_at +{row['finished_at_s']:.2f} s); "
              f"worker free at +{row['worker_free_s']:.2f} s")


def measure(folder: Path, budget_s: float, quantum_s: float) -> dict[str, Any]:
    """Inside a fresh process whose environment names this run's database and broker."""
    import django

    django.setup()
    from unittest import mock

    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.test import Client

    from evaluation.catalog.importing import release_import
    from evaluation.catalog.models import HardwareProfile, Release
    from evaluation.harness.evaluate import EvaluationSettings
    from evaluation.release_tools.make_fixture_roofline import write_release_rooflines
    from evaluation.worker.jobs import run_job_spec
    from leaderboard.services import weight_set_from_release
    from portal.accounts.models import Membership, Team
    from submissions.jobs import dispatch_job, jobs_release_due, record_event
    from submissions.models import EvaluationJob
    from submissions.services import submission_create

    call_command("migrate", verbosity=0)
    copy = folder / "atrex-fixture"
    shutil.copytree(FIXTURE, copy)
    (copy / "data" / "rms_norm" / "hidden_shapes.json").write_text(json.dumps(HIDDEN))
    write_release_rooflines(copy)
    release = release_import(path=copy).release
    release.hidden_shape_budget_s, release.hidden_release_quantum_s = budget_s, quantum_s
    release.save(update_fields=["hidden_shape_budget_s", "hidden_release_quantum_s"])
    weight_set_from_release(release)
    honest = NATIVE.read_text()
    honest_base = honest.replace("class Model(torch.nn.Module):", "class _Honest(torch.nn.Module):")
    candidates = [("control", honest), ("sleeper x1 s", honest_base + SLEEPER.replace(
        "PER_TOKEN", "1.0")), ("sleeper x3 s", honest_base + SLEEPER.replace("PER_TOKEN", "3.0"))]
    rows = []
    for name, source in candidates:
        team = Team.objects.create(name=name, slug=name.replace(" ", "-").replace(".", ""))
        user = get_user_model().objects.create(username=f"u-{team.slug}")
        Membership.objects.create(team=team, user=user)
        submission = submission_create(team=team, user=user, release=release,
                                       hardware=HardwareProfile.objects.get(name="H200"),
                                       filename="rms_norm.py", data=source.encode())
        job = submission.candidates.get().job
        client = Client()
        client.force_login(user)

        def view(job: EvaluationJob = job, client: Client = client) -> bytes:
            urls = (f"/api/submissions/{job.candidate.submission_id}/", "/api/submissions/",
                    f"/submissions/{job.candidate.submission_id}/")
            return b"".join(_no_csrf(client.get(url).content) for url in urls)

        with mock.patch("submissions.jobs.current_app.send_task") as send:
            dispatch_job(job.pk)
        spec = send.call_args.kwargs["args"][0]
        seen: list[tuple[float, bytes]] = []

        def publish(kind: Any, payload: dict[str, Any], view: Any = view,
                    seen: list[tuple[float, bytes]] = seen) -> None:
            with mock.patch("submissions.jobs.current_app.send_task"):
                record_event(str(kind), json.loads(json.dumps(payload)))
            seen.append((time.time(), view()))

        run_job_spec(spec, publish, EvaluationSettings(device="cpu"))
        worker_free = time.time()
        job.refresh_from_db()
        while job.status in EvaluationJob.Status.active():
            with mock.patch("submissions.jobs.current_app.send_task"):
                jobs_release_due()
            seen.append((time.time(), view()))
            job.refresh_from_db()
            time.sleep(0.05)
        assert job.hidden_started_at is not None and job.worker_ended_at is not None
        began = job.hidden_started_at.timestamp()
        during = [content for at, content in seen if began <= at]
        first = during[0]
        changes = [at for at, content in seen if at >= began and content != first]
        rows.append({
            "name": name, "status": job.status,
            "hidden_tier_s": job.worker_ended_at.timestamp() - began,
            "changes_while_hidden": sum(1 for at in changes if at < job.finished_at.timestamp()),
            "team_saw_end_s": changes[0] - began if changes else None,
            "finished_at_s": job.finished_at.timestamp() - began,
            "worker_free_s": worker_free - began})
    fields = {f.name: f for f in Release._meta.concrete_fields}
    defaults = computed(float(fields["hidden_shape_budget_s"].default),
                        float(fields["hidden_release_quantum_s"].default))
    return {"computed_defaults": defaults, "measured": {
        "device": "cpu (Triton interpreter, sandboxed child)", "budget_s": budget_s,
        "quantum_s": quantum_s, "hidden_shapes": 1, "candidates": rows}}


def _no_csrf(body: bytes) -> bytes:
    import re

    return re.sub(rb'(csrfmiddlewaretoken" value="|csrf_token": "|"X-CSRFToken": ")[^"]+', b"",
                  body)


if __name__ == "__main__":
    main()
