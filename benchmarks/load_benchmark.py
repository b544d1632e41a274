"""Load benchmark: gunicorn on loopback, board readers and API uploaders for a fixed time.

On a scratch PostgreSQL database (never the configured one) it imports the starter release
(15 operators, 214 shapes), adds TEAMS x N scored submissions with one shape result per shape
(100k shape results by default) and their scores, then starts gunicorn on 127.0.0.1 with the
production settings (DEBUG off, Redis broker and cache) and drives it with

- READERS concurrent readers (default 50), each signed in as a member of a team: the aggregate
  board page, a later page over htmx, regime and phase boards, the board JSON, operator boards
  (page and JSON) and their own team's submission pages;
- UPLOADERS concurrent uploaders (default 10), each with its team's API token, uploading a
  Triton candidate to POST /api/submissions/ (quotas and the upload rate limit raised);

for DURATION seconds (after a short warm-up that is not counted). Each virtual user waits a
think time (uniform in 0.5-1.5 x --think seconds) between its requests, as people and agents
do; --think 0 is a saturation test instead. It prints p50/p95/p99 per endpoint kind, error
counts, and checks that no upload was lost: every 201 has its Submission, a queued job in the
database and a message on the broker's eval.<hardware> queue (no worker runs).

The load generator is this script's own asyncio client on httpx: one process, no extra
framework (locust brings gevent, which would monkey-patch the Django code this script also
runs to build the data), and latency is measured around each request as the client sees it.

Targets (issue 7): board p95 < 200 ms, upload p95 < 300 ms, zero errors, zero lost uploads.

Usage: python benchmarks/load_benchmark.py [--duration 60] [--readers 50] [--uploaders 10]
           [--results 100000] [--teams 100] [--think 1.0] [--workers 5]
           [--server postgres://postgres@127.0.0.1:5432] [--database atrex_load_benchmark]
           [--redis redis://127.0.0.1:6379/6] [--keep] [--reuse]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import math
import os
import random
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
from _path import REPO

STARTER = REPO / "evaluation" / "releases" / "atrex-starter"
CANDIDATE = REPO / "evaluation" / "sample_candidates" / "rms_norm" / "triton_native.py"
HARDWARE = "H200"
BOARD_KINDS = ("board page", "board page (htmx)", "regime/phase board", "board JSON",
               "operator board", "operator board JSON", "submission page")
WARM_UP_S = 5.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=60.0)
    parser.add_argument("--readers", type=int, default=50)
    parser.add_argument("--uploaders", type=int, default=10)
    parser.add_argument("--results", type=int, default=100_000, help="shape results to create")
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--think", type=float, default=1.0, help="mean seconds between requests")
    parser.add_argument("--workers", type=int, default=2 * (os.cpu_count() or 1) + 1)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="atrex_load_benchmark")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/6",
                        help="broker and cache of the server under test (eval.* keys are reset)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument("--reuse", action="store_true", help="use the kept database as it is")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    random.seed(args.seed)

    if not args.reuse:
        with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{args.database}"')
            admin.execute(f'CREATE DATABASE "{args.database}"')
    # The server and this script share the secret key: the readers' sessions are made here.
    env = {"DATABASE_URL": f"{args.server}/{args.database}", "CELERY_BROKER_URL": args.redis,
           "CACHE_URL": args.redis, "DJANGO_DEBUG": "0",
           "DJANGO_SECRET_KEY": "load-benchmark-" + secrets.token_urlsafe(40),
           "DJANGO_SECURE_SSL_REDIRECT": "0", "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
           "ATREX_UPLOAD_LIMIT": "1000000"}
    var_dir = tempfile.TemporaryDirectory(prefix="atrex-load-")
    env["ATREX_VAR_DIR"] = var_dir.name
    os.environ.update(env)
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    import django

    django.setup()
    from django.core.management import call_command

    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"machine: {os.cpu_count()} cores, load average {' '.join(load)} before the run "
          f"(other processes share it); {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
          flush=True)
    try:
        if not args.reuse:
            call_command("migrate", verbosity=0)
            build(args)
        world = cast_of_users(args)
        reset_broker_queues(args.redis)
        with gunicorn(env, args.workers) as server:
            report = asyncio.run(drive(server.url, world, args, server.process.pid))
        print_report(report, args)
        lost = check_uploads(report.accepted, args.redis)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{args.database}"')
        var_dir.cleanup()
    return 1 if lost or report.errors() else 0


# --- data -------------------------------------------------------------------------------------

def build(args: argparse.Namespace) -> None:
    from django.core.management import call_command

    from evaluation.catalog.models import Release, Shape
    from leaderboard.models import WeightSet
    from leaderboard.services import summaries_rebuild, weight_set_activate

    started = time.perf_counter()
    call_command("import_release", str(STARTER), stdout=io.StringIO())
    release = Release.objects.get(name="atrex-starter")
    shapes = Shape.objects.filter(operator__release=release).count()
    per_team = max(1, math.ceil(args.results / (args.teams * shapes)))
    created = build_submissions(release, args.teams, per_team)
    print(f"data: starter release ({release.operators.count()} operators, {shapes} shapes), "
          f"{args.teams} teams x {per_team} scored submissions = {created} shape results, "
          f"built in {time.perf_counter() - started:.1f} s", flush=True)
    t0 = time.perf_counter()
    summaries_rebuild(release)
    weight_set_activate(weight_set=WeightSet.objects.get(release=release, active=True),
                        actor=None)
    print(f"summaries and scores: {time.perf_counter() - t0:.1f} s", flush=True)


def build_submissions(release: Any, teams: int, per_team: int) -> int:
    from evaluation.catalog.models import HardwareProfile, Shape
    from portal.accounts.models import Team
    from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission

    hardware = HardwareProfile.objects.get(name=HARDWARE)
    shapes_by_op: dict[int, list[int]] = defaultdict(list)
    for shape_id, operator_id in Shape.objects.filter(operator__release=release).values_list(
            "pk", "operator_id"):
        shapes_by_op[operator_id].append(shape_id)
    Team.objects.bulk_create(Team(name=f"load team {t}", slug=f"load-team-{t}",
                                  daily_submission_quota=10**6, concurrent_job_quota=10**6)
                             for t in range(teams))
    created = 0
    for team in Team.objects.filter(slug__startswith="load-team-"):
        submissions = Submission.objects.bulk_create(
            Submission(team=team, release=release, hardware=hardware, agent="bench",
                       model_name="m", output_tokens=random.randint(10**4, 10**6))
            for _ in range(per_team))
        candidates = Candidate.objects.bulk_create(
            Candidate(submission=s, operator_id=op, source="class Model: pass\n", sha256="0" * 64)
            for s in submissions for op in shapes_by_op)
        jobs = EvaluationJob.objects.bulk_create(
            EvaluationJob(candidate=c, status="scored", attempts=1,
                          shapes_total=len(shapes_by_op[c.operator_id]),
                          shapes_done=len(shapes_by_op[c.operator_id])) for c in candidates)
        results = []
        for job in jobs:
            skill = random.random()
            for shape_id in shapes_by_op[job.candidate.operator_id]:
                correct = random.random() < 0.9
                median = random.uniform(5e-6, 5e-3)
                results.append(ShapeResult(
                    job=job, attempt=1, shape_id=shape_id, status="passed" if correct else "failed",
                    stage_reached="timing" if correct else "correctness",
                    verdict=random.choice(["native"] * 9 + ["fallback-torch"]) if correct else "",
                    dsl_ratio=1.0 if correct else None, median_s=median if correct else None,
                    sol_s=median * skill, max_abs_error=1e-3 if correct else None,
                    attainment=min(1.0, skill * random.random()) if correct else 0.0, raw={}))
        ShapeResult.objects.bulk_create(results, batch_size=5000)
        created += len(results)
    return created


@dataclass
class World:
    release: int
    operators: list[str]
    pages: int  # board pages of 50 rows
    readers: list[tuple[str, list[int]]]  # (session cookie, their team's submission ids)
    tokens: list[str]  # uploaders' team tokens


def cast_of_users(args: argparse.Namespace) -> World:
    """Readers signed in as team members (sessions in the database), uploaders' tokens."""
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    from evaluation.catalog.models import Release
    from portal.accounts.models import Membership, Team, token_create
    from submissions.models import Submission

    release = Release.objects.get(name="atrex-starter")
    teams = list(Team.objects.filter(slug__startswith="load-team-").order_by("pk"))
    users = get_user_model().objects
    readers = []
    for index in range(args.readers):
        team = teams[index % len(teams)]
        user, created = users.get_or_create(username=f"reader{index}")
        if created:
            Membership.objects.create(team=team, user=user)
        team = user.teams.get()
        client = Client()
        client.force_login(user)
        own = list(Submission.objects.filter(team=team, agent="bench").values_list("pk", flat=True))
        readers.append((client.cookies[settings.SESSION_COOKIE_NAME].value, own))
    tokens = [token_create(team=teams[i % len(teams)], name=f"load {time.time()}")[1]
              for i in range(args.uploaders)]
    ranked = Submission.objects.filter(release=release).values("team").distinct().count()
    return World(release=release.pk, operators=sorted(release.operators.values_list("name",
                                                                                    flat=True)),
                 pages=max(1, math.ceil(ranked / 50)), readers=readers, tokens=tokens)


# --- broker -----------------------------------------------------------------------------------

def _eval_queue_keys(client: Any) -> list[Any]:
    return [k for k in client.scan_iter(match="eval.*") if client.type(k) == b"list"]


def reset_broker_queues(url: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    for key in _eval_queue_keys(client):
        client.delete(key)


def broker_messages(url: str) -> int:
    import redis

    client = redis.Redis.from_url(url)
    return sum(int(client.llen(k)) for k in _eval_queue_keys(client))


# --- server -----------------------------------------------------------------------------------

class gunicorn:  # noqa: N801 - used as a context manager, like open()
    def __init__(self, env: dict[str, str], workers: int) -> None:
        self.env, self.workers = env, workers
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        # Open for the server's whole life; closed (and removed) in __exit__.
        self.log = tempfile.NamedTemporaryFile(prefix="atrex-gunicorn-", suffix=".log")  # noqa: SIM115

    def __enter__(self) -> gunicorn:
        command = [sys.executable, "-m", "gunicorn", "portal.wsgi:application",
                   "--bind", f"127.0.0.1:{self.port}", "--workers", str(self.workers),
                   "--backlog", "2048", "--timeout", "60"]
        self.process = subprocess.Popen(command, cwd=REPO, env={**os.environ, **self.env},
                                        stdout=self.log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/api/releases/", timeout=5).status_code == 200:
                    print(f"gunicorn: {self.workers} sync workers on {url}", flush=True)
                    self.url = url
                    return self
            except httpx.TransportError:
                pass
            if self.process.poll() is not None:
                break
            time.sleep(0.5)
        raise RuntimeError(f"gunicorn did not start:\n{Path(self.log.name).read_text()[-3000:]}")

    def __exit__(self, *exc: object) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        text = Path(self.log.name).read_text(errors="replace")
        tracebacks = text.count("Traceback (most recent call last)")
        print(f"gunicorn log: {len(text.splitlines())} lines, {tracebacks} tracebacks", flush=True)
        if tracebacks:
            print(text[-3000:])
        self.log.close()


# --- load -------------------------------------------------------------------------------------

@dataclass
class Report:
    times: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    failures: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(
        lambda: defaultdict(int)))
    accepted: list[int] = field(default_factory=list)
    measured_s: float = 0.0
    cpu: dict[str, float] = field(default_factory=dict)

    def errors(self) -> int:
        return sum(sum(kinds.values()) for kinds in self.failures.values())


async def drive(url: str, world: World, args: argparse.Namespace, server_pid: int) -> Report:
    limits = httpx.Limits(max_connections=args.readers + args.uploaders + 10)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as client:
        warm = Report()
        await run_users(client, world, args, warm, WARM_UP_S, seed=args.seed)
        report = Report()
        report.accepted = warm.accepted  # warm-up uploads must not be lost either
        before = cpu_snapshot(server_pid, args)
        started = time.perf_counter()
        await run_users(client, world, args, report, args.duration, seed=args.seed + 1)
        report.measured_s = time.perf_counter() - started
        report.cpu = cpu_used(before, cpu_snapshot(server_pid, args))
    return report


async def run_users(client: httpx.AsyncClient, world: World, args: argparse.Namespace,
                    report: Report, seconds: float, seed: int) -> None:
    deadline = time.perf_counter() + seconds
    users = [reader(client, world, index, args.think, report, deadline, random.Random(seed + index))
             for index in range(args.readers)]
    users += [uploader(client, world.tokens[index], world.release, args.think, report, deadline,
                       random.Random(seed * 1000 + index)) for index in range(args.uploaders)]
    await asyncio.gather(*users)


def reader_request(world: World, index: int, rng: random.Random) -> tuple[str, str, dict[str, str]]:
    cookie, own = world.readers[index]
    base = f"/boards/{world.release}/{HARDWARE}/"
    kind = rng.choices(BOARD_KINDS, weights=(25, 10, 10, 15, 10, 10, 20))[0]
    headers: dict[str, str] = {"Cookie": f"sessionid={cookie}"}
    if kind == "board page":
        path = base
    elif kind == "board page (htmx)":
        path = f"{base}?page={rng.randint(1, world.pages)}"
        headers["HX-Request"] = "true"
    elif kind == "regime/phase board":
        path = f"{base}{rng.choice(['memory', 'compute', 'prefill', 'decode'])}/"
    elif kind == "board JSON":
        path = f"/api/boards/{world.release}/{HARDWARE}/"
    elif kind == "operator board":
        path = f"{base}operators/{rng.choice(world.operators)}/"
    elif kind == "operator board JSON":
        path = f"/api/boards/{world.release}/{HARDWARE}/operators/{rng.choice(world.operators)}/"
    else:
        path = f"/submissions/{rng.choice(own)}/"
    return kind, path, headers


async def reader(client: httpx.AsyncClient, world: World, index: int, think: float,
                 report: Report, deadline: float, rng: random.Random) -> None:
    await asyncio.sleep(rng.uniform(0, think))  # users arrive spread out, not in one burst
    while time.perf_counter() < deadline:
        kind, path, headers = reader_request(world, index, rng)
        await timed(report, kind, client.get(path, headers=headers), expect=200)
        await think_time(rng, think, deadline)


async def uploader(client: httpx.AsyncClient, token: str, release: int, think: float,
                   report: Report, deadline: float, rng: random.Random) -> None:
    source = CANDIDATE.read_bytes()
    await asyncio.sleep(rng.uniform(0, think))
    while time.perf_counter() < deadline:
        request = client.post("/api/submissions/", headers={"Authorization": f"Bearer {token}"},
                              data={"release": str(release), "hardware": HARDWARE,
                                    "agent": "load"},
                              files={"file": ("rms_norm.py", source)})
        response = await timed(report, "upload", request, expect=201)
        if response is not None and response.status_code == 201:
            report.accepted.append(int(response.json()["id"]))
        await think_time(rng, think, deadline)


async def think_time(rng: random.Random, think: float, deadline: float) -> None:
    """A user's pause between requests; none past the end of the run."""
    await asyncio.sleep(max(0.0, min(rng.uniform(0.5, 1.5) * think,
                                     deadline - time.perf_counter())))


async def timed(report: Report, kind: str, request: Any, expect: int) -> httpx.Response | None:
    started = time.perf_counter()
    try:
        response: httpx.Response = await request
    except httpx.HTTPError as exc:
        report.failures[kind][type(exc).__name__] += 1
        return None
    report.times[kind].append(time.perf_counter() - started)
    if response.status_code != expect:
        report.failures[kind][f"HTTP {response.status_code}"] += 1
    return response


# --- where the CPU went -------------------------------------------------------------------------

def _ticks(pid: int) -> int:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime + stime


def cpu_snapshot(server_pid: int, args: argparse.Namespace) -> dict[str, dict[int, int]]:
    """CPU ticks so far, per process: the gunicorn workers, this database's PostgreSQL
    backends, this script (the load generator); and the whole machine (pid 0: all cores)."""
    children = Path(f"/proc/{server_pid}/task/{server_pid}/children")
    workers = [int(p) for p in children.read_text().split()] if children.exists() else []
    with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
        backends = [row[0] for row in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s", (args.database,))]
    machine = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
    return {"gunicorn": {pid: _ticks(pid) for pid in [server_pid, *workers]},
            "postgres": {pid: _ticks(pid) for pid in backends},
            "load generator": {0: _ticks(os.getpid())},
            "machine busy": {0: sum(machine) - machine[3] - machine[4]},
            "machine": {0: sum(machine)}}


def cpu_used(before: dict[str, dict[int, int]],
             after: dict[str, dict[int, int]]) -> dict[str, float]:
    """Seconds of CPU per group between the snapshots (processes gone by the end not counted:
    a PostgreSQL backend whose connection was recycled takes its ticks with it)."""
    hz = os.sysconf("SC_CLK_TCK")
    return {group: sum(t - before[group].get(pid, 0) for pid, t in ticks.items()) / hz
            for group, ticks in after.items()}


# --- results ----------------------------------------------------------------------------------

def percentile(sorted_times: list[float], q: float) -> float:
    return sorted_times[min(len(sorted_times) - 1, int(q * len(sorted_times)))]


def print_report(report: Report, args: argparse.Namespace) -> None:
    print(f"\nload: {args.readers} readers + {args.uploaders} uploaders, think time "
          f"{args.think:g} s (uniform 0.5-1.5x), {report.measured_s:.0f} s measured after a "
          f"{WARM_UP_S:g} s warm-up")
    print(f"{'endpoint kind':<22}{'requests':>9}{'req/s':>7}{'p50 ms':>8}{'p95 ms':>8}"
          f"{'p99 ms':>8}{'max ms':>8}{'errors':>7}")
    rows = [*BOARD_KINDS, "upload"]
    every_board: list[float] = []
    for kind in rows:
        times = sorted(report.times.get(kind, []))
        errors = sum(report.failures.get(kind, {}).values())
        if kind != "upload":
            every_board += times
        if not times:
            print(f"{kind:<22}{0:>9}{'':>7}{'':>8}{'':>8}{'':>8}{'':>8}{errors:>7}")
            continue
        print(f"{kind:<22}{len(times):>9}{len(times) / report.measured_s:>7.1f}"
              f"{statistics.median(times) * 1e3:>8.0f}{percentile(times, 0.95) * 1e3:>8.0f}"
              f"{percentile(times, 0.99) * 1e3:>8.0f}{times[-1] * 1e3:>8.0f}{errors:>7}")
    every_board.sort()
    uploads = sorted(report.times.get("upload", []))
    if every_board:
        print(f"{'all board reads':<22}{len(every_board):>9}"
              f"{len(every_board) / report.measured_s:>7.1f}"
              f"{statistics.median(every_board) * 1e3:>8.0f}"
              f"{percentile(every_board, 0.95) * 1e3:>8.0f}"
              f"{percentile(every_board, 0.99) * 1e3:>8.0f}{every_board[-1] * 1e3:>8.0f}")
    for kind, failures in sorted(report.failures.items()):
        print(f"errors of {kind}: " + ", ".join(f"{n} x {what}" for what, n in failures.items()))
    board_p95 = max((percentile(sorted(report.times[k]), 0.95) for k in BOARD_KINDS
                     if report.times.get(k)), default=math.inf)
    upload_p95 = percentile(uploads, 0.95) if uploads else math.inf
    cpu = report.cpu
    if cpu:
        cores = os.cpu_count() or 1
        # Busy ticks over all cores; the machine's share is what every process used, ours or not.
        seconds = cpu["machine"] / cores
        print(f"CPU over the measured {report.measured_s:.0f} s ({cores} cores): machine busy "
              f"{cpu['machine busy'] / seconds:.2f} cores, of which gunicorn "
              f"{cpu['gunicorn'] / seconds:.2f}, PostgreSQL backends of this database "
              f"{cpu['postgres'] / seconds:.2f}, load generator "
              f"{cpu['load generator'] / seconds:.2f}; requests served "
              f"{sum(len(t) for t in report.times.values())}, gunicorn CPU per request "
              f"{cpu['gunicorn'] / max(1, sum(len(t) for t in report.times.values())) * 1e3:.1f} ms")
    print(f"targets: board p95 < 200 ms (worst kind {board_p95 * 1e3:.0f} ms): "
          f"{'met' if board_p95 < 0.2 else 'NOT met'}; upload p95 < 300 ms "
          f"({upload_p95 * 1e3:.0f} ms): {'met' if upload_p95 < 0.3 else 'NOT met'}; "
          f"errors {report.errors()}: {'met' if not report.errors() else 'NOT met'}")


def check_uploads(accepted: list[int], redis_url: str) -> int:
    """Every 201: its Submission, one queued job per candidate, one broker message per job."""
    from submissions.models import EvaluationJob, Submission

    stored = Submission.objects.filter(pk__in=accepted).count()
    jobs = EvaluationJob.objects.filter(candidate__submission__in=accepted)
    queued = jobs.filter(status="queued", attempts=1).count()
    without_job = Submission.objects.filter(pk__in=accepted, candidates__isnull=True).count()
    messages = broker_messages(redis_url)
    lost = (len(accepted) - stored) + without_job + (jobs.count() - queued) + \
        abs(jobs.count() - messages)
    print(f"uploads accepted (201, warm-up included): {len(accepted)}; submissions stored: "
          f"{stored}; jobs: {jobs.count()} ({queued} queued); broker messages on eval.*: "
          f"{messages}; lost: {lost}")
    return lost


if __name__ == "__main__":
    sys.exit(main())
