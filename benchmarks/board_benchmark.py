"""Board render time and bulk rescore time on PostgreSQL, at leaderboard scale.

Creates a scratch database (never the configured one), fills it with a synthetic release
of OPERATORS x SHAPES shapes and TEAMS x SUBMISSIONS scored submissions (one shape result
per shape), then prints: the aggregate board's render time (p50/p95 over repeated GETs of
the page and of its JSON) and the time to activate a new weight set (bulk rescore).
Targets from issue 4: board p95 < 150 ms, rescore < 10 s at 1,000 x 10 x 440.

Usage: python benchmarks/board_benchmark.py [--teams 1000] [--submissions 10]
           [--server postgres://postgres@127.0.0.1:5432] [--keep]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time

import _path  # noqa: F401 (the repository root on sys.path)
import psycopg

SCRATCH_DB = "atrex_board_benchmark"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--submissions", type=int, default=10)
    parser.add_argument("--operators", type=int, default=30)
    parser.add_argument("--shapes", type=int, default=440, help="shapes in the release")
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--requests", type=int, default=40)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument("--reuse", action="store_true",
                        help="measure on the scratch database a --keep run left")
    args = parser.parse_args()

    if not args.reuse:
        with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH_DB}")
            admin.execute(f"CREATE DATABASE {SCRATCH_DB}")
    os.environ["DATABASE_URL"] = f"{args.server}/{SCRATCH_DB}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    try:
        run(args)
    finally:
        from django.db import connections

        connections.close_all()
        if not args.keep:
            with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
                admin.execute(f"DROP DATABASE IF EXISTS {SCRATCH_DB}")
    return 0


def run(args: argparse.Namespace) -> None:
    from django.db import connection
    from django.test import Client

    from evaluation.catalog.models import HardwareProfile, Release
    from leaderboard.services import summaries_rebuild, weight_set_activate, weight_set_create

    if args.reuse:
        release = Release.objects.get()
    else:
        started = time.perf_counter()
        release = build_release(args.operators, args.shapes)
        build_submissions(release, args.teams, args.submissions)
        print(f"data: {args.teams} teams x {args.submissions} submissions x {args.shapes} "
              f"shapes built in {time.perf_counter() - started:.1f} s", flush=True)
        # In service, each submission's summary is written when its jobs finish; here all of
        # them are built at once from the shape results (what a change of fallback policy costs).
        t0 = time.perf_counter()
        summaries_rebuild(release)
        print(f"summaries rebuilt from {args.teams * args.submissions * args.shapes} shape "
              f"results: {time.perf_counter() - t0:.1f} s", flush=True)
    # Statistics as autovacuum keeps them in service. Straight after a bulk load the planner
    # has none, thinks each table holds a row and nests 10,000 index lookups: the board query
    # then took 73 ms instead of 25-40 ms, depending on whether autovacuum had run yet.
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    operators = list(release.operators.values_list("name", flat=True))
    first = weight_set_create(release=release, weights=dict.fromkeys(operators, 1.0),
                              source="manual")
    second = weight_set_create(release=release,
                               weights={op: random.random() for op in operators}, source="manual")
    timed = []
    for weight_set in (first, second):
        t0 = time.perf_counter()
        count = weight_set_activate(weight_set=weight_set, actor=None)
        timed.append(time.perf_counter() - t0)
    print(f"rescore after a weight change: {timed[-1]:.2f} s for {count} submissions "
          f"(first activation {timed[0]:.2f} s)")
    client = Client()
    hardware = HardwareProfile.objects.get()
    base = f"/boards/{release.pk}/{hardware.name}/"
    pages = (("board page", base), ("board page 5 (htmx)", f"{base}?page=5"),
             ("memory-bound board page", f"{base}memory/"),
             ("board JSON (every row)", f"/api/boards/{release.pk}/{hardware.name}/"))
    # Boards are cached until a write changes them (portal/derived_cache.py): "uncached"
    # empties the cache before every request, so each one renders from the database.
    for cached in (False, True):
        for label, url in pages:
            measure(client, f"{label}, {'cached' if cached else 'uncached'}", url,
                    args.requests, cached)


def measure(client, label: str, url: str, requests: int,  # type: ignore[no-untyped-def]
            cached: bool) -> None:
    from django.core.cache import cache

    client.get(url)  # the first request of a warm server, not counted
    times = []
    for _ in range(requests):
        if not cached:
            cache.clear()
        t0 = time.perf_counter()
        response = client.get(url, headers={"HX-Request": "true"} if "htmx" in label else {})
        times.append(time.perf_counter() - t0)
        assert response.status_code == 200
    times.sort()
    p95 = times[int(0.95 * (len(times) - 1))]
    print(f"{label}: p50 {statistics.median(times) * 1e3:.0f} ms, p95 {p95 * 1e3:.0f} ms "
          f"over {len(times)} requests", flush=True)


def build_release(operator_count: int, shape_count: int):  # type: ignore[no-untyped-def]
    from evaluation.catalog.models import (
        HardwareProfile,
        Operator,
        OperatorHidden,
        Release,
        ReleaseHidden,
        Shape,
    )

    HardwareProfile.objects.create(name="H200", peak_flops={"bf16_tc": 989e12,
                                                            "fp32_strict": 67e12},
                                   hbm_bytes_per_s=4.8e12, launch_floor_s=2e-6)
    release = Release.objects.create(name="bench", version=1, content_sha256="0" * 64)
    ReleaseHidden.objects.create(release=release, importance={})
    for index in range(operator_count):
        op = Operator.objects.create(release=release, name=f"op{index:02d}", reference_py="",
                                     input_py="", shapes_json="{}")
        ids = [f"s{j}" for j in range(index, shape_count, operator_count)]
        roofline = {"shapes": {sid: {"semantic_W_flops": {"bf16": random.randint(10**6, 10**12)},
                                     "semantic_Q_read_bytes": random.randint(10**5, 10**9),
                                     "semantic_Q_write_bytes": random.randint(10**5, 10**9)}
                               for sid in ids}}
        OperatorHidden.objects.create(operator=op, roofline=roofline, atol=1e-2, rtol=5e-2,
                                      metadata={"id": f"b{index}", "dtype": "bf16",
                                                "phase": random.choice(["prefill", "decode",
                                                                        "prefill/decode"])})
        Shape.objects.bulk_create(Shape(operator=op, shape_id=sid, position=i)
                                  for i, sid in enumerate(ids))
    return release


def build_submissions(release, teams: int, per_team: int) -> None:  # type: ignore[no-untyped-def]
    from evaluation.catalog.models import HardwareProfile, Shape
    from portal.accounts.models import Team
    from submissions.models import Candidate, EvaluationJob, ShapeResult, Submission

    hardware = HardwareProfile.objects.get()
    shapes_by_op: dict[int, list[int]] = {}
    for shape_id, operator_id in Shape.objects.filter(operator__release=release).values_list(
            "pk", "operator_id"):
        shapes_by_op.setdefault(operator_id, []).append(shape_id)
    Team.objects.bulk_create(Team(name=f"team {t}", slug=f"team-{t}") for t in range(teams))
    for team in Team.objects.all():
        submissions = Submission.objects.bulk_create(
            Submission(team=team, release=release, hardware=hardware) for _ in range(per_team))
        candidates = Candidate.objects.bulk_create(
            Candidate(submission=s, operator_id=op, source="", sha256="0" * 64)
            for s in submissions for op in shapes_by_op)
        jobs = EvaluationJob.objects.bulk_create(
            EvaluationJob(candidate=c, status="scored", attempts=1) for c in candidates)
        results = []
        for job in jobs:
            skill = random.random()
            for shape_id in shapes_by_op[job.candidate.operator_id]:
                correct = random.random() < 0.9
                results.append(ShapeResult(
                    job=job, attempt=1, shape_id=shape_id,
                    status="passed" if correct else "failed",
                    verdict=random.choice(["native"] * 9 + ["fallback-torch"]) if correct else "",
                    attainment=min(1.0, skill * random.random()) if correct else 0.0, raw={},
                    # a time and its error, as the harness stores them since intervals
                    # (scoring draws every shape around its attainment with it)
                    median_s=1e-5 if correct else None,
                    median_se_s=random.uniform(2e-8, 2e-7) if correct else None))
        ShapeResult.objects.bulk_create(results, batch_size=5000)


if __name__ == "__main__":
    sys.exit(main())
