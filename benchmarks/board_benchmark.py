"""Boards, rescore and rebuild on PostgreSQL at 10,000-100,000 submissions (issue 42).

On a scratch database (never the configured one; its name must start with `boards_` unless
--database says otherwise) it builds a synthetic release of OPERATORS x SHAPES shapes and
TEAMS x SUBMISSIONS submissions, one shape result per shape, with PostgreSQL's COPY
(psycopg's `cursor.copy`): teams, submissions, candidates, jobs and shape results are
written as text, the shape results' indexes built after the load. Submission i takes one of
PATTERNS result patterns (each a full set of per-shape outcomes drawn at random), so only
PATTERNS summaries are computed, by the portal's own code (`summaries_rebuild` over the first
submission of each pattern); every other submission's summary, tallies and operator rows are
those of its pattern, copied in. The board totals are then added up from them
(`board_totals_recompute`), and two weight sets activated (the bulk rescore).

It then measures, into --out (JSON, one file per phase) and on stdout:

- build: rows/s of the shape results' COPY, the index build, the whole build;
- rescore: activating a weight set (every submission combined from its stored summary), in a
  process of its own: time and peak RSS (VmHWM);
- rebuild: `summaries_rebuild` streaming the whole release (or its first --rebuild-limit
  submissions) from the shape results, in a process of its own: time, peak RSS, and a check
  that the rebuilt summaries equal the copied ones;
- boards: every board kind (aggregate, regime, phase, operator) as a full page, an htmx
  partial (page 5), JSON and CSV, uncached (the cache emptied before each request) and
  cached: p50/p95 over --requests requests each;
- load: --readers processes reading boards for --load-seconds while another process finishes
  a job every second (`rescore_submission`: summary, scores, board totals, per-board cache
  invalidation): the readers' p50/p95/p99;
- then, with --hidden N, adds an N-shape hidden tier (hidden shapes, the jobs' hidden ids,
  their results), rebuilds the pattern summaries, and measures rescore and boards again.

The cache is Redis (--redis, default database 3): shared by the load's processes.

Usage: python benchmarks/board_benchmark.py [--teams 1000] [--submissions 10] [--hidden 31]
           [--database boards_bench] [--out DIR] [--keep] [--reuse] [--phases ...]
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import _path  # noqa: F401 (the repository root on sys.path)
import psycopg

HARDWARE = "H200"
PHASES = ("build", "rescore", "rebuild", "boards", "load", "hidden")
VERDICTS = ["native"] * 9 + ["fallback-torch"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--teams", type=int, default=1000)
    parser.add_argument("--submissions", type=int, default=10, help="per team")
    parser.add_argument("--operators", type=int, default=30)
    parser.add_argument("--shapes", type=int, default=440, help="public shapes in the release")
    parser.add_argument("--hidden", type=int, default=31,
                        help="hidden shapes added for the last phase (0: none)")
    parser.add_argument("--patterns", type=int, default=256)
    parser.add_argument("--server", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--database", default="boards_bench")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/3")
    parser.add_argument("--requests", type=int, default=20, help="per URL, uncached and cached")
    parser.add_argument("--readers", type=int, default=4)
    parser.add_argument("--load-seconds", type=int, default=30)
    parser.add_argument("--rebuild-limit", type=int, default=0,
                        help="rebuild only the first N submissions (0: all)")
    parser.add_argument("--phases", nargs="*", default=list(PHASES), choices=PHASES)
    parser.add_argument("--phase", help=argparse.SUPPRESS)  # a measuring child process
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keep", action="store_true", help="keep the scratch database")
    parser.add_argument("--reuse", action="store_true",
                        help="measure on the scratch database a --keep run left")
    args = parser.parse_args()
    if not args.database.startswith("boards_") and args.database != "atrex_board_benchmark":
        parser.error("the scratch database's name starts with boards_")
    os.environ["DATABASE_URL"] = f"{args.server}/{args.database}"
    os.environ["CACHE_URL"] = args.redis
    os.environ["DJANGO_SETTINGS_MODULE"] = "portal.settings"
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "testserver")
    if args.phase:
        return child(args)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    if not args.reuse:
        with psycopg.connect(f"{args.server}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {args.database}")
            admin.execute(f"CREATE DATABASE {args.database}")
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
                admin.execute(f"DROP DATABASE IF EXISTS {args.database}")
    return 0


def save(args: argparse.Namespace, name: str, data: dict[str, Any]) -> None:
    data = {"teams": args.teams, "submissions_per_team": args.submissions,
            "submissions": args.teams * args.submissions, "shapes": args.shapes,
            "at": datetime.now(UTC).isoformat(timespec="seconds"), **data}
    print(json.dumps({name: data}, indent=1), flush=True)
    if args.out:
        (args.out / f"{name}.json").write_text(json.dumps(data, indent=1) + "\n")


def run(args: argparse.Namespace) -> None:
    from evaluation.catalog.models import Release

    if "build" in args.phases and not args.reuse:
        save(args, "build", build(args))
    release = Release.objects.get()
    vacuum_analyze()
    if "rescore" in args.phases:
        save(args, "rescore", in_child(args, "rescore"))
        vacuum_analyze()  # the rescore replaced every score row
    if "boards" in args.phases:
        save(args, "boards", in_child(args, "boards"))
    if "load" in args.phases:
        save(args, "load", load(args, release))
    if "rebuild" in args.phases:
        save(args, "rebuild", in_child(args, "rebuild"))
    if "hidden" in args.phases and args.hidden:
        t0 = time.perf_counter()
        added = add_hidden_tier(args, release)
        vacuum_analyze()
        save(args, "hidden-build", {"hidden_shapes": args.hidden, "hidden_results": added,
                                    "seconds": round(time.perf_counter() - t0, 1)})
        save(args, "hidden-rescore", in_child(args, "rescore"))
        vacuum_analyze()
        save(args, "hidden-boards", in_child(args, "boards"))


def vacuum_analyze() -> None:
    """What autovacuum does on a kept server, done at once: this machine's PostgreSQL runs
    with autovacuum off, and a rescore leaves every replaced score row dead, so that boards
    read after a few rescores probed past as many dead rows as live ones (an uncached
    aggregate board 147 ms p50 there, 94-100 ms after a VACUUM)."""
    from django.db import connection

    with connection.cursor() as cursor:
        # the tables rescores rewrite (the shape results are written once: ANALYZE does)
        cursor.execute("VACUUM ANALYZE leaderboard_submissionscore, leaderboard_scoresummary, "
                       "leaderboard_operatorsummary, submissions_submission, "
                       "submissions_evaluationjob")
        cursor.execute("ANALYZE")


def in_child(args: argparse.Namespace, phase: str) -> dict[str, Any]:
    """A phase in a process of its own: its peak RSS is the phase's; the boards are read
    there as a web server's process reads them (`child`). What it says on stderr is shown."""
    command = [sys.executable, __file__, "--phase", phase, "--database", args.database,
               "--server", args.server, "--redis", args.redis,
               "--rebuild-limit", str(args.rebuild_limit), "--requests", str(args.requests)]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{phase} failed:\n{done.stdout}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def child(args: argparse.Namespace) -> int:
    import django

    django.setup()
    from evaluation.catalog.models import Release
    from leaderboard.models import ScoreSummary, WeightSet
    from leaderboard.services import summaries_rebuild, weight_set_activate, weight_set_create
    from submissions.models import Submission

    release = Release.objects.get()
    before = peak_rss_mb()
    if args.phase == "boards":
        # the web server's module, as gunicorn loads it: its start freezes the heap loaded
        # so far out of the collector's sight (portal/wsgi.py)
        import portal.wsgi  # noqa: F401

        print(json.dumps(measure_boards(args, release)))
        return 0
    if args.phase == "rescore":
        operators = list(release.operators.values_list("name", flat=True))
        rng = random.Random(len(WeightSet.objects.all()))
        weight_set = weight_set_create(release=release, source="manual",
                                       weights={op: rng.random() for op in operators})
        t0 = time.perf_counter()
        count = weight_set_activate(weight_set=weight_set, actor=None)
        seconds = time.perf_counter() - t0
        result = {"submissions": count, "seconds": round(seconds, 2)}
    else:
        submissions = Submission.objects.filter(release=release)
        if args.rebuild_limit:
            last = submissions.order_by("pk").values_list("pk", flat=True)[args.rebuild_limit - 1]
            submissions = submissions.filter(pk__lte=last)
        count = submissions.count()
        copied = dict(ScoreSummary.objects.filter(submission__in=submissions)
                      .order_by("?").values_list("submission_id", "summary")[:200])
        t0 = time.perf_counter()
        summaries_rebuild(release, submissions)
        seconds = time.perf_counter() - t0
        rebuilt = dict(ScoreSummary.objects.filter(submission_id__in=copied)
                       .values_list("submission_id", "summary"))
        result = {"submissions": count, "seconds": round(seconds, 1),
                  "submissions_per_s": round(count / seconds, 1),
                  "shape_results_per_s": round(count * args_shapes(release) / seconds),
                  "rebuilt_equal_copied": sum(rebuilt[pk] == copied[pk] for pk in copied),
                  "checked": len(copied)}
    result.update({"peak_rss_mb": round(peak_rss_mb(), 1),
                   "rss_before_mb": round(before, 1)})
    print(json.dumps(result))
    return 0


def args_shapes(release: Any) -> int:
    from evaluation.catalog.models import Shape

    return int(Shape.every_tier.filter(operator__release=release).count())


# --- the data -------------------------------------------------------------------------------


def build(args: argparse.Namespace) -> dict[str, Any]:
    from django.db import connection

    from leaderboard.services import board_totals_recompute, summaries_rebuild
    from submissions.models import Submission

    started = time.perf_counter()
    release, shapes = build_release(args.operators, args.shapes)
    rng = random.Random(42)
    patterns = [make_pattern(rng, shapes) for _ in range(args.patterns)]
    total = args.teams * args.submissions
    ops = sorted(shapes)
    connection.ensure_connection()
    raw = connection.connection  # psycopg's connection: COPY
    figures: dict[str, Any] = {}
    with connection.cursor() as cursor:
        t0 = time.perf_counter()
        base = datetime(2026, 11, 1, tzinfo=UTC)
        copy_text(raw, "accounts_team", TEAM_COLUMNS, (
            f"{t + 1}\tteam {t}\tteam-{t}\t1000\t100\tf\t{base.isoformat()}\t100\tf\t\t\t"
            for t in range(args.teams)))
        hardware_id, release_id = HARDWARE_ID[0], release.pk
        copy_text(raw, "submissions_submission", SUBMISSION_COLUMNS, (
            f"{i}\tagent\tmodel\t{1000 + i}\t\t{(base + timedelta(seconds=i)).isoformat()}\t"
            f"{hardware_id}\t{release_id}\t{(i - 1) // args.submissions + 1}\t\tranked\t"
            f"\\N\tf\t\t\t\t\t\t\\N" for i in range(1, total + 1)))
        operator_ids = {name: pk for name, pk in
                        release.operators.values_list("name", "pk")}
        n_ops = len(ops)
        copy_text(raw, "submissions_candidate", CANDIDATE_COLUMNS, (
            f"{(i - 1) * n_ops + k + 1}\t\t{'0' * 64}\t{operator_ids[op]}\t{i}\ttriton"
            for i in range(1, total + 1) for k, op in enumerate(ops)))
        copy_text(raw, "submissions_evaluationjob", JOB_COLUMNS, (
            f"{(i - 1) * n_ops + k + 1}\tscored\t1\t\t\\N\t0\t0\t\tf\t\t"
            f"{base.isoformat()}\t\\N\t\\N\t{(i - 1) * n_ops + k + 1}\t\t[]\tgpu\tf\t\t[]\t{{}}"
            "\t\\N\t\\N\t\\N"
            for i in range(1, total + 1) for k in range(n_ops)))
        for table in ("accounts_team", "submissions_submission", "submissions_candidate",
                      "submissions_evaluationjob"):
            cursor.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                           f"(SELECT max(id) FROM {table}))")
        figures["small_tables_s"] = round(time.perf_counter() - t0, 1)
        # the shape results: indexes dropped for the load, built after it
        indexes = drop_indexes(cursor, "submissions_shaperesult")
        t0 = time.perf_counter()
        rows = copy_results(raw, patterns, ops, total, n_ops)
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for statement in indexes:
            cursor.execute(statement)
        index_s = time.perf_counter() - t0
        figures.update({"shape_results": rows, "copy_s": round(load_s, 1),
                        "copy_rows_per_s": round(rows / load_s),
                        "index_build_s": round(index_s, 1)})
        cursor.execute("ANALYZE")
    # the patterns' summaries, by the portal's own code; copied to every other submission
    t0 = time.perf_counter()
    firsts = list(Submission.objects.filter(pk__lte=min(args.patterns, total))
                  .select_related("hardware"))
    summaries_rebuild(release, firsts)
    replicate_summaries(raw, args.patterns, total, args.submissions)
    board_totals_recompute(release)
    figures["summaries_s"] = round(time.perf_counter() - t0, 1)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    figures["build_s"] = round(time.perf_counter() - started, 1)
    figures["shape_results_per_s_overall"] = round(rows / figures["build_s"])
    return figures


HARDWARE_ID: list[int] = []
TEAM_COLUMNS = ("id", "name", "slug", "daily_submission_quota", "concurrent_job_quota",
                "hidden", "created_at", "daily_check_quota", "share_links_enabled",
                "webhook_last_delivery", "webhook_secret", "webhook_url")
SUBMISSION_COLUMNS = ("id", "agent", "model_name", "output_tokens", "notes", "created_at",
                      "hardware_id", "release_id", "team_id", "baseline", "mode", "share_token",
                      "ranking_excluded", "environment", "ranking_excluded_reason", "harness",
                      "idempotency_key", "request_digest", "input_tokens")
CANDIDATE_COLUMNS = ("id", "source", "sha256", "operator_id", "submission_id", "dsl")
JOB_COLUMNS = ("id", "status", "attempts", "worker", "heartbeat_at", "shapes_done",
               "shapes_total", "error", "infrastructure_failure", "evaluator_version",
               "created_at", "started_at", "finished_at", "candidate_id", "run", "shape_ids",
               "mode", "low_priority", "hidden_error", "hidden_shape_ids", "held",
               "hidden_started_at", "release_at", "worker_ended_at")
RESULT_COLUMNS = ("job_id", "attempt", "shape_id", "status", "stage_reached", "failed_stage",
                  "error", "verdict", "launch_method", "suspicious", "review", "raw",
                  "median_s", "median_se_s", "attainment", "attainment_with_floor", "sol_s")


def copy_text(raw: Any, table: str, columns: tuple[str, ...], lines: Any,
              chunk: int = 20000) -> int:
    """COPY `table` FROM STDIN, text format, one line per row (no trailing newline)."""
    count = 0
    with raw.cursor() as cursor, cursor.copy(
            f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        buffer: list[str] = []
        for line in lines:
            buffer.append(line)
            if len(buffer) >= chunk:
                copy.write("\n".join(buffer) + "\n")
                count += len(buffer)
                buffer = []
        if buffer:
            copy.write("\n".join(buffer) + "\n")
            count += len(buffer)
    return count


def drop_indexes(cursor: Any, table: str) -> list[str]:
    """Drop `table`'s indexes and constraints but its primary key; their CREATE statements."""
    cursor.execute("SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
                   "WHERE conrelid = %s::regclass AND contype IN ('u', 'f')", [table])
    constraints = cursor.fetchall()
    cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s "
                   "AND indexname NOT LIKE %s", [table, "%_pkey"])
    names = {name for name, _ in constraints}
    indexes = [(name, sql) for name, sql in cursor.fetchall() if name not in names]
    for name, _ in constraints:
        cursor.execute(f"ALTER TABLE {table} DROP CONSTRAINT {name}")
    for name, _ in indexes:
        cursor.execute(f"DROP INDEX IF EXISTS {name}")
    return ([sql for _, sql in indexes]
            + [f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}"
               for name, definition in constraints])


def build_release(operator_count: int, shape_count: int) -> tuple[Any, dict[str, list[int]]]:
    """The release, its hardware and shapes; per operator name, its public shapes' keys."""
    from evaluation.catalog.models import (
        HardwareProfile,
        Operator,
        OperatorHidden,
        Release,
        ReleaseHidden,
        Shape,
    )

    hardware = HardwareProfile.objects.create(
        name=HARDWARE, peak_flops={"bf16_tc": 989e12, "fp32_strict": 67e12},
        hbm_bytes_per_s=4.8e12, launch_floor_s=2e-6)
    HARDWARE_ID.append(hardware.pk)
    release = Release.objects.create(name="bench", version=1, content_sha256="0" * 64)
    ReleaseHidden.objects.create(release=release, importance={})
    rng = random.Random(7)
    shapes: dict[str, list[int]] = {}
    for index in range(operator_count):
        name = f"op{index:02d}"
        op = Operator.objects.create(release=release, name=name, reference_py="",
                                     input_py="", shapes_json="{}")
        ids = [f"s{j}" for j in range(index, shape_count, operator_count)]
        OperatorHidden.objects.create(operator=op, roofline={"shapes": {
            sid: roofline_entry(rng) for sid in ids}}, atol=1e-2, rtol=5e-2,
            metadata={"id": f"b{index}", "dtype": "bf16",
                      "phase": rng.choice(["prefill", "decode", "prefill/decode"])})
        created = Shape.objects.bulk_create(Shape(operator=op, shape_id=sid, position=i)
                                            for i, sid in enumerate(ids))
        shapes[name] = [s.pk for s in created]
    return release, shapes


def roofline_entry(rng: random.Random) -> dict[str, Any]:
    return {"semantic_W_flops": {"bf16": rng.randint(10**6, 10**12)},
            "semantic_Q_read_bytes": rng.randint(10**5, 10**9),
            "semantic_Q_write_bytes": rng.randint(10**5, 10**9)}


def make_pattern(rng: random.Random, shapes: dict[str, list[int]]) -> dict[str, list[str]]:
    """One submission's results: per operator, the text of its shapes' rows after job_id."""
    pattern = {}
    for op, keys in shapes.items():
        skill = rng.random()
        pattern[op] = [result_text(rng, key, skill) for key in keys]
    return pattern


def result_text(rng: random.Random, shape_key: int, skill: float) -> str:
    correct = rng.random() < 0.9
    if not correct:
        return f"1\t{shape_key}\tfailed\tcorrectness\tcorrectness\t\t\t\tf\t\t{{}}\t\\N\t\\N\t0\t\\N\t\\N"
    attainment = min(1.0, skill * rng.random())
    verdict = rng.choice(VERDICTS)
    # a time and its error, as the harness stores them since intervals
    return (f"1\t{shape_key}\tpassed\ttimed\t\t\t{verdict}\tgraph\tf\t\t{{}}\t1e-05\t"
            f"{rng.uniform(2e-8, 2e-7)!r}\t{attainment!r}\t{min(1.0, attainment * 1.1)!r}\t"
            f"{attainment * 1e-5!r}")


def copy_results(raw: Any, patterns: list[dict[str, list[str]]], ops: list[str], total: int,
                 n_ops: int) -> int:
    """Every job's rows: submission i has pattern (i - 1) % len(patterns)."""
    count = 0
    with raw.cursor() as cursor, cursor.copy(
            f"COPY submissions_shaperesult ({', '.join(RESULT_COLUMNS)}) FROM STDIN") as copy:
        for i in range(1, total + 1):
            pattern = patterns[(i - 1) % len(patterns)]
            parts = []
            for k, op in enumerate(ops):
                prefix = f"{(i - 1) * n_ops + k + 1}\t"
                parts.append("".join(prefix + row + "\n" for row in pattern[op]))
                count += len(pattern[op])
            copy.write("".join(parts))
    return count


def replicate_summaries(raw: Any, patterns: int, total: int, per_team: int) -> None:
    """Every submission past the first PATTERNS gets its pattern's summary, tally and
    operator rows (its own team, id and date)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT submission_id, summary::text, tally::text, recorded::text, "
                       "rescore_text FROM leaderboard_scoresummary WHERE submission_id <= %s",
                       [patterns])
        summaries = {pk: (s, t, r, text) for pk, s, t, r, text in cursor.fetchall()}
        cursor.execute("SELECT submission_id, operator_id, hardware_id, on_board, rankable, "
                       "score, correctness_rate, solved, hidden_score, interval::text, "
                       "not_generalising, covered, dev_covered, generalisation_reasons::text "
                       "FROM leaderboard_operatorsummary "
                       "WHERE submission_id <= %s", [patterns])
        operators: dict[int, list[tuple[Any, ...]]] = {}
        for pk, *rest in cursor.fetchall():
            operators.setdefault(pk, []).append(tuple(rest))
        cursor.execute("DELETE FROM leaderboard_scoresummary WHERE submission_id > %s",
                       [patterns])
        cursor.execute("DELETE FROM leaderboard_operatorsummary WHERE submission_id > %s",
                       [patterns])
    base = datetime(2026, 11, 1, tzinfo=UTC)
    now = datetime.now(UTC).isoformat()

    def escape(text: str) -> str:  # COPY's text format (a rescore text holds line breaks)
        return text.replace("\\", "\\\\").replace("\n", "\\n")

    copy_text(raw, "leaderboard_scoresummary",
              ("submission_id", "summary", "tally", "recorded", "rescore_text", "computed_at"),
              (f"{i}\t{escape(summaries[(i - 1) % patterns + 1][0])}\t"
               f"{escape(summaries[(i - 1) % patterns + 1][1])}\t"
               f"{escape(summaries[(i - 1) % patterns + 1][2])}\t"
               f"{escape(summaries[(i - 1) % patterns + 1][3])}\t{now}"
               for i in range(patterns + 1, total + 1)))

    def cell(value: Any) -> str:
        if value is None:
            return "\\N"
        if isinstance(value, bool):
            return "t" if value else "f"
        return str(value)

    copy_text(raw, "leaderboard_operatorsummary",
              ("submission_id", "team_id", "created_at", "operator_id", "hardware_id",
               "on_board", "rankable", "score", "correctness_rate", "solved", "hidden_score",
               "interval", "not_generalising", "covered", "dev_covered",
               "generalisation_reasons"),
              (f"{i}\t{(i - 1) // per_team + 1}\t{(base + timedelta(seconds=i)).isoformat()}\t"
               + "\t".join(cell(v) for v in row)
               for i in range(patterns + 1, total + 1)
               for row in operators.get((i - 1) % patterns + 1, [])))


def add_hidden_tier(args: argparse.Namespace, release: Any) -> int:
    """N hidden shapes spread over the operators, in every job's hidden ids, with results."""
    from django.db import connection

    from evaluation.catalog.models import Shape
    from leaderboard.services import board_totals_recompute, summaries_rebuild
    from submissions.models import Submission

    rng = random.Random(11)
    ops = sorted(release.operators.all(), key=lambda o: o.name)
    hidden: dict[str, list[int]] = {op.name: [] for op in ops}
    hidden_ids: dict[str, list[str]] = {op.name: [] for op in ops}
    for j in range(args.hidden):
        op = ops[j % len(ops)]
        sid = f"h{j}"
        op.hidden.roofline["shapes"][sid] = roofline_entry(rng)
        op.hidden.save(update_fields=["roofline"])
        shape = Shape.every_tier.create(operator=op, shape_id=sid, position=1000 + j,
                                        hidden=True)
        hidden[op.name].append(shape.pk)
        hidden_ids[op.name].append(sid)
    total = args.teams * args.submissions
    n_ops = len(ops)
    with connection.cursor() as cursor:
        for k, op in enumerate(ops):
            if hidden_ids[op.name]:
                cursor.execute("UPDATE submissions_evaluationjob SET hidden_shape_ids = %s "
                               "WHERE (id - 1) %% %s = %s",
                               [json.dumps(hidden_ids[op.name]), n_ops, k])
    patterns = [{op: [result_text(rng, key, rng.random()) for key in keys]
                 for op, keys in hidden.items()} for _ in range(args.patterns)]
    connection.ensure_connection()
    count = copy_results(connection.connection, patterns, [op.name for op in ops], total,
                         n_ops)
    firsts = list(Submission.objects.filter(pk__lte=min(args.patterns, total))
                  .select_related("hardware"))
    summaries_rebuild(release, firsts)
    replicate_summaries(connection.connection, args.patterns, total, args.submissions)
    board_totals_recompute(release)
    return count


# --- measuring ------------------------------------------------------------------------------


def board_urls(release: Any) -> list[tuple[str, str, str, dict[str, str]]]:
    """(kind, form, url, headers) of every board kind in every form."""
    base, api = f"/boards/{release.pk}/{HARDWARE}/", f"/api/boards/{release.pk}/{HARDWARE}/"
    htmx = {"HX-Request": "true"}
    urls = []
    for kind, page, export in (("aggregate", base, api),
                               ("regime (memory)", f"{base}memory/", f"{api}memory/"),
                               ("phase (decode)", f"{base}decode/", f"{api}decode/"),
                               ("operator (op07)", f"{base}operators/op07/",
                                f"{api}operators/op07/")):
        urls.append((kind, "page", page, {}))
        if not kind.startswith("operator"):  # an operator board is one page, no htmx table
            urls.append((kind, "htmx page 5", f"{page}?page=5", htmx))
        urls.append((kind, "JSON", export, {}))
        urls.append((kind, "CSV", f"{export}?format=csv", {}))
    return urls


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * (len(ordered) - 1) + 0.5))]


def cpu_probe_ms() -> float:
    """A fixed pure-Python loop, timed (best of 3): how fast this host ran at the time. This
    project's machine has been seen to run it at 130 ms and at 240 ms minutes apart, and
    every board figure moves with it."""
    best = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        sum(i * i for i in range(3_000_000))
        best = min(best, time.perf_counter() - t0)
    return round(best * 1e3, 1)


def measure_boards(args: argparse.Namespace, release: Any) -> dict[str, Any]:
    """Uncached: before each request the board's cached entries are dropped, as a finished
    job drops them (`derived_cache.changed(board(...))`); what every board shares and no job
    changes (which subset boards have shapes, the production timings' row) stays. Cold: the
    whole cache emptied first (the aggregate page only)."""
    from django.core.cache import cache
    from django.test import Client

    from evaluation.catalog.models import HardwareProfile
    from portal import derived_cache

    hardware = HardwareProfile.objects.get(name=HARDWARE)
    probe_before = cpu_probe_ms()
    client = Client()
    results = []
    cold = []
    for _ in range(args.requests):
        cache.clear()
        t0 = time.perf_counter()
        client.get(f"/boards/{release.pk}/{HARDWARE}/")
        cold.append((time.perf_counter() - t0) * 1e3)
    results.append({"board": "aggregate", "form": "page, cold cache", "cached": False,
                    "p50_ms": round(statistics.median(cold), 1),
                    "p95_ms": round(percentile(cold, 0.95), 1), "requests": len(cold)})
    for kind, form, url, headers in board_urls(release):
        client.get(url, headers=headers)  # a warm server's first request, not counted
        for cached in (False, True):
            times = []
            for _ in range(args.requests):
                if not cached:
                    derived_cache._next_generation(derived_cache.board(release.pk, hardware.pk))
                t0 = time.perf_counter()
                response = client.get(url, headers=headers)
                times.append((time.perf_counter() - t0) * 1e3)
                assert response.status_code == 200, (url, response.status_code)
            entry = {"board": kind, "form": form, "cached": cached, "url": url,
                     "p50_ms": round(statistics.median(times), 1),
                     "p95_ms": round(percentile(times, 0.95), 1), "requests": len(times),
                     "bytes": len(response.content)}
            print(f"{kind:18} {form:12} {'cached' if cached else 'uncached':8} "
                  f"p50 {entry['p50_ms']:7.1f} ms  p95 {entry['p95_ms']:7.1f} ms",
                  file=sys.stderr, flush=True)
            results.append(entry)
    return {"cache": "redis", "uncached": "the board's entries dropped before each request "
            "(as a finished job drops them)", "cpu_probe_ms": {"before": probe_before,
                                                                 "after": cpu_probe_ms()},
            "results": results}


def _reader(urls: list[tuple[str, str, str, dict[str, str]]], seconds: float, seed: int,
            out: Any) -> None:
    from django.db import connections
    from django.test import Client

    import portal.wsgi  # noqa: F401 (a web server's process: portal/wsgi.py freezes its heap)

    connections.close_all()
    client, rng, times = Client(), random.Random(seed), []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        _, _, url, headers = rng.choice(urls)
        t0 = time.perf_counter()
        response = client.get(url, headers=headers)
        times.append((time.perf_counter() - t0) * 1e3)
        if response.status_code != 200:
            times.append(float("inf"))
    out.put(("reads", times))


def _finisher(release_id: int, seconds: float, out: Any) -> None:
    """A job finishes every second: its submission's environment rewritten and the submission
    rescored (summary, scores, totals)."""
    from django.db import connections

    from leaderboard.services import rescore_submission
    from submissions.environment import submission_environment_update
    from submissions.models import Submission

    connections.close_all()
    rng = random.Random(5)
    ids = list(Submission.objects.filter(release_id=release_id).values_list("pk", flat=True))
    spent = []
    stop = time.monotonic() + seconds
    while time.monotonic() < stop:
        tick = time.monotonic()
        submission = Submission.objects.select_related("release", "hardware").get(
            pk=rng.choice(ids))
        submission_environment_update(submission.pk)  # what the job's end does before it
        rescore_submission(submission)
        spent.append((time.monotonic() - tick) * 1e3)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - tick)))
    out.put(("jobs", spent))


def load(args: argparse.Namespace, release: Any) -> dict[str, Any]:
    from django.core.cache import cache
    from django.db import connections

    urls = [u for u in board_urls(release) if u[1] != "CSV"]
    cache.clear()
    connections.close_all()
    context = multiprocessing.get_context("fork")
    out = context.Queue()
    readers = [context.Process(target=_reader, args=(urls, args.load_seconds, seed, out))
               for seed in range(args.readers)]
    finisher = context.Process(target=_finisher,
                               args=(release.pk, args.load_seconds, out))
    for process in [*readers, finisher]:
        process.start()
    gathered = [out.get() for _ in range(len(readers) + 1)]
    for process in [*readers, finisher]:
        process.join()
    jobs = [t for what, batch in gathered if what == "jobs" for t in batch]
    reads = [t for what, batch in gathered if what == "reads" for t in batch]
    return {"readers": args.readers, "seconds": args.load_seconds, "requests": len(reads),
            "errors": sum(t == float("inf") for t in reads),
            "p50_ms": round(statistics.median(reads), 1),
            "p95_ms": round(percentile(reads, 0.95), 1),
            "p99_ms": round(percentile(reads, 0.99), 1),
            "jobs_finished": len(jobs),
            "job_rescore_p50_ms": round(statistics.median(jobs), 1) if jobs else None,
            "urls": [f"{kind} {form}" for kind, form, _, _ in urls]}


if __name__ == "__main__":
    sys.exit(main())
