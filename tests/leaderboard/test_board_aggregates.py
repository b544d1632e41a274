"""What boards keep instead of counting every shape result on each render (issue 42): the
per-DSL totals and recorded sources of a board, the operator boards' rows, per-board cache
invalidation, one recomputation at a time per cached entry, and the streamed rebuild and
rescore."""

from __future__ import annotations

import importlib
import io
import statistics
import threading
from datetime import timedelta
from typing import Any
from unittest import mock

import pytest
from django.apps import apps as django_apps
from django.core.cache import cache
from django.core.management import call_command
from django.db import connection
from django.db.models import Count, F, Q
from django.test import Client
from django.test.utils import CaptureQueriesContext

from evaluation.catalog.models import HardwareProfile, Release
from evaluation.harness.dsl import DSL_LABELS
from leaderboard import services
from leaderboard.models import (
    BoardRecorded,
    BoardTally,
    OperatorSummary,
    ScoreSummary,
    SubmissionScore,
    WeightSet,
)
from leaderboard.outcomes import scoring_context
from leaderboard.scoring import generalisation_reason_text, solve_rate, summarise
from leaderboard.selectors import (
    RANKABLE,
    assign_ranks,
    best_first,
    dsl_labels,
    dsl_rates,
    mark_no_interval,
    operator_board,
    ranked_order,
    recorded_on_boards,
    recorded_sources,
)
from leaderboard.services import (
    board_totals_recompute,
    rescore_submission,
    rescore_weight_set,
    summaries_rebuild,
    weight_set_activate,
    weight_set_from_release,
)
from portal import derived_cache
from portal.accounts.models import Team
from submissions.models import Candidate, ShapeResult, Submission
from submissions.services import submission_set_ranking_excluded
from tests.builders import scored_kernels, scored_submission
from tests.world import World

pytestmark = pytest.mark.django_db
SOURCE = "class Model: pass"


def counted_rates(release: Release, hardware: HardwareProfile) -> list[dict[str, Any]]:
    """dsl_rates as it was computed before issue 42: a count over every latest public shape
    result of the board, on each render."""
    latest = ShapeResult.objects.filter(
        attempt=F("job__attempts"), job__candidate__submission__release=release,
        job__candidate__submission__hardware=hardware,
        job__candidate__submission__mode=Submission.Mode.RANKED,
        job__candidate__submission__baseline="",
        job__candidate__submission__team__hidden=False)
    counts = (latest.values("job__candidate__dsl")
              .annotate(shapes=Count("id"), files=Count("job__candidate", distinct=True),
                        correct=Count("id", filter=Q(status="passed")),
                        native=Count("id", filter=Q(status="passed", verdict="native")),
                        unverified=Count("id", filter=Q(status="passed",
                                                        verdict="unverified-cpu")))
              .order_by("job__candidate__dsl"))
    return [{"dsl": c["job__candidate__dsl"],
             "dsl_name": DSL_LABELS.get(c["job__candidate__dsl"], c["job__candidate__dsl"]),
             "files": c["files"], "shapes": c["shapes"],
             "correctness_rate": c["correct"] / c["shapes"],
             "adoption_rate": c["native"] / c["shapes"],
             "unverified_rate": c["unverified"] / c["shapes"]} for c in counts]


def computed_operator_board(release: Release, hardware: HardwareProfile,
                            weight_set: WeightSet, operator: str) -> dict[str, Any]:
    """operator_board as it was computed before issue 42: every operator's outcomes of every
    submission of the board built, one operator kept."""
    scores = list(SubmissionScore.objects
                  .filter(weight_set=weight_set, **RANKABLE, submission__mode="ranked",
                          submission__hardware=hardware, submission__release=release,
                          submission__team__hidden=False, submission__baseline="",
                          submission__candidates__operator__name=operator)
                  .select_related("submission__team", "submission__hardware"))
    by_submission = scoring_context(release).outcomes_by_submission([s.submission for s in scores])
    outcomes = {pk: [o for o in shapes if o.operator == operator and not o.hidden]
                for pk, shapes in by_submission.items()}
    correctness = {pk: (sum(o.correct for o in shapes) / len(shapes) if shapes else 0.0)
                   for pk, shapes in outcomes.items()}
    best: dict[int, Any] = {}
    for score in scores:
        value = (score.by_operator or {}).get(operator)
        team = score.submission.team_id
        key = best_first(value, correctness[score.submission_id], score.submission.created_at)
        if team not in best or key < best[team][0]:
            best[team] = (key, value, score)
    ordered = sorted(best.values(), key=lambda item: ranked_order(
        item[1], correctness[item[2].submission_id], item[2].submission.created_at))
    rows: list[dict[str, Any]] = [
        {"rank": None, "team": s.submission.team.name, "submission": s.submission.pk,
         "score": value, "correctness_rate": correctness[s.submission_id],
         "date": s.submission.created_at.date().isoformat(),
         "badges": ["does not generalise"] if operator in (s.not_generalising or []) else [],
         "generalisation_why": "; ".join(generalisation_reason_text(r) for r in (
             s.generalisation_reasons or {}).get(operator, ())),
         "hidden_score": (s.hidden_by_operator or {}).get(operator),
         "interval": ((s.intervals or {}).get("by_operator") or {}).get(operator),
         "ranked_by": "score"}
        for _, value, s in ordered]
    for row in rows:
        mark_no_interval(row)
    assign_ranks(rows)
    values = [value for _, value, _ in ordered if value is not None]
    return {"rows": rows, "teams": len(rows),
            "solve_rate": solve_rate([outcomes[s.submission_id] for _, _, s in ordered])
            if ordered else None,
            "median_score": statistics.median(values) if values else None}


@pytest.fixture
def board_world(world: World) -> World:
    """Five teams on rms_norm and gemm_fp16 with mixed results, a check, a hidden team, an
    excluded submission; a triton and a cute file among them."""
    release = world.release
    weight_set_from_release(release)
    scored_kernels(world.red, release, {"rms_norm": (SOURCE, [0.8, 0.6, 0.7]),
                                        "gemm_fp16": (SOURCE, 0.3)}, seconds=1e-5,
                   minutes_ago=30)
    scored_kernels(world.red, release, {"rms_norm": (SOURCE, 0.5)}, minutes_ago=20)
    scored_kernels(world.blue, release, {"rms_norm": (SOURCE, [0.9, 0.1, 0.4])},
                   minutes_ago=10)
    scored_kernels(world.blue, release, {"gemm_fp16": (SOURCE, 0.2)}, status="failed")
    green = Team.objects.create(name="Green", slug="green")
    cute = scored_kernels(green, release, {"rms_norm": (SOURCE, 0.6), "gemm_fp16": (SOURCE, 0.6)},
                          verdict="fallback-torch")
    Candidate.objects.filter(submission=cute).update(dsl="cute")
    rescore_submission(cute)
    hidden = Team.objects.create(name="Hidden", slug="hidden", hidden=True)
    scored_kernels(hidden, release, {"rms_norm": (SOURCE, 0.99)})
    gold = Team.objects.create(name="Gold", slug="gold")
    excluded = scored_kernels(gold, release, {"rms_norm": (SOURCE, 0.95)})
    submission_set_ranking_excluded(submission=excluded, excluded=True, reason="x", actor=None)
    rescore_submission(excluded)
    check = scored_kernels(green, release, {"rms_norm": (SOURCE, 1.0)})
    Submission.objects.filter(pk=check.pk).update(mode=Submission.Mode.CHECK)
    rescore_submission(Submission.objects.get(pk=check.pk))
    return world


def test_the_kept_dsl_rates_are_the_count_over_every_latest_result(board_world: World) -> None:
    release, h200 = board_world.release, board_world.h200
    assert dsl_rates(release=release, hardware=h200) == counted_rates(release, h200)
    assert {r["dsl"] for r in dsl_rates(release=release, hardware=h200)} == {"triton", "cute"}


def test_a_stored_job_changes_the_boards_dsl_rates_and_recorded_sources(
        board_world: World) -> None:
    release, h200 = board_world.release, board_world.h200
    before = {r["dsl"]: r for r in dsl_rates(release=release, hardware=h200)}
    assert recorded_on_boards(release=release, hardware=h200) == []
    # a job stores its results (a gluon file, recorded elsewhere), then its rescore runs
    submission = scored_submission(release, board_world.blue, {"rms_norm": 0.7}, dsl="gluon")
    ShapeResult.objects.filter(job__candidate__submission=submission).update(raw={"recorded": {
        "gpu": "NVIDIA H200", "date": "2026-12-02", "evaluator": "e", "source": "s.json"}})
    rescore_submission(submission)
    after = {r["dsl"]: r for r in dsl_rates(release=release, hardware=h200)}
    shapes = ShapeResult.objects.filter(job__candidate__submission=submission).count()
    assert after["gluon"]["files"] == 1 and after["gluon"]["shapes"] == shapes
    assert after["gluon"]["adoption_rate"] == 1.0
    assert after["triton"] == before["triton"] and after["cute"] == before["cute"]
    assert list(after.values()) == counted_rates(release, h200)
    source = "NVIDIA H200, 2026-12-02, e: s.json"
    assert recorded_on_boards(release=release, hardware=h200) == [source]
    assert recorded_sources([submission.pk]) == [source]
    # the job run again, failing this time: its old counts leave the totals
    ShapeResult.objects.filter(job__candidate__submission=submission).update(
        status="failed", verdict="", raw={})
    rescore_submission(submission)
    again = {r["dsl"]: r for r in dsl_rates(release=release, hardware=h200)}
    assert again["gluon"]["correctness_rate"] == 0.0 and again["gluon"]["shapes"] == shapes
    assert list(again.values()) == counted_rates(release, h200)
    assert recorded_on_boards(release=release, hardware=h200) == []
    assert BoardRecorded.objects.get(source=source).submissions == 0


def test_a_hidden_teams_files_leave_the_rates_and_come_back(board_world: World) -> None:
    release, h200 = board_world.release, board_world.h200
    Team.objects.filter(name="Hidden").update(hidden=False)
    assert dsl_rates(release=release, hardware=h200) == counted_rates(release, h200)
    Team.objects.filter(name="Red").update(hidden=True)
    assert dsl_rates(release=release, hardware=h200) == counted_rates(release, h200)


def test_the_totals_recomputed_from_the_tallies_are_the_kept_ones(board_world: World) -> None:
    kept = sorted(BoardTally.objects.values_list("hardware", "dsl", "files", "shapes",
                                                "correct", "native", "unverified"))
    board_totals_recompute(board_world.release)
    assert sorted(BoardTally.objects.values_list(
        "hardware", "dsl", "files", "shapes", "correct", "native", "unverified")) == kept


@pytest.mark.parametrize("operator", ["rms_norm", "gemm_fp16"])
def test_the_operator_board_is_what_the_full_computation_showed(board_world: World,
                                                                operator: str) -> None:
    release, h200 = board_world.release, board_world.h200
    weight_set = release.weight_sets.get(active=True)
    board = operator_board(release=release, hardware=h200, weight_set=weight_set,
                           operator=operator)
    expected = computed_operator_board(release, h200, weight_set, operator)
    assert board["rows"] == expected["rows"] and board["teams"] == expected["teams"]
    assert board["solve_rate"] == expected["solve_rate"]
    assert board["median_score"] == expected["median_score"]
    teams = [r["team"] for r in board["rows"]]
    assert "Hidden" not in teams and "Gold" not in teams  # hidden team; excluded submission
    if operator == "rms_norm":
        assert teams == ["Red", "Blue", "Green"]  # Red's best is its 0.7 median, not 0.5


def test_an_operator_board_reads_its_operators_rows_only(board_world: World) -> None:
    release, h200 = board_world.release, board_world.h200
    weight_set = release.weight_sets.get(active=True)
    with CaptureQueriesContext(connection) as captured:
        operator_board(release=release, hardware=h200, weight_set=weight_set,
                       operator="rms_norm")
    assert not any("submissions_shaperesult" in q["sql"] for q in captured.captured_queries)
    assert OperatorSummary.objects.filter(operator__name="rms_norm").count() == \
        Candidate.objects.filter(operator__name="rms_norm").count()


def test_an_operator_boards_page_shows_a_page_of_rows_and_a_pager(board_world: World) -> None:
    """Rows Red, Blue, Green: two a page, as the boards page 50; the exports keep all."""
    release = board_world.release
    url = f"/boards/{release.pk}/H200/operators/rms_norm/"
    with mock.patch("leaderboard.views.PAGE_SIZE", 2):
        first = Client().get(url).content.decode()
        second = Client().get(f"{url}?page=2").content.decode()
    assert "<td>Red</td>" in first and "<td>Blue</td>" in first and "<td>Green</td>" not in first
    assert "Rows 1–2 of 3" in first and "page=2" in first
    assert "<td>Green</td>" in second and "<td>Red</td>" not in second and "Rows 3–3 of 3" in second
    exported = Client().get(f"/api/boards/{release.pk}/H200/operators/rms_norm/").json()
    assert [r["team"] for r in exported["rows"]] == ["Red", "Blue", "Green"]


def board_cached(url: str) -> bool:
    """Whether the board at `url` came from the cache (no score row read)."""
    with CaptureQueriesContext(connection) as captured:
        assert Client().get(url).status_code == 200
    return not any("leaderboard_submissionscore" in q["sql"] for q in captured.captured_queries)


def test_a_finished_job_drops_only_the_boards_it_is_on(world: World) -> None:
    release = world.release
    weight_set_from_release(release)
    scored_kernels(world.red, release, {"rms_norm": (SOURCE, 0.5)})
    h100 = scored_kernels(world.blue, release, {"rms_norm": (SOURCE, 0.4)}, hardware="H100")
    h200_url, h100_url = f"/api/boards/{release.pk}/H200/", f"/api/boards/{release.pk}/H100/"
    for url in (h200_url, h100_url):
        Client().get(url)
        assert board_cached(url)
    late = scored_kernels(world.blue, release, {"rms_norm": (SOURCE, 0.9)})  # an H200 job
    assert board_cached(h100_url) and not board_cached(h200_url)
    assert [r["team"] for r in Client().get(h200_url).json()["rows"]] == ["Blue", "Red"]
    rescore_submission(h100)  # and an H100 one
    assert board_cached(h200_url) and not board_cached(h100_url)
    del late


def test_a_boards_csv_is_written_once_and_rewritten_after_a_job(world: World) -> None:
    release = world.release
    weight_set_from_release(release)
    scored_kernels(world.red, release, {"rms_norm": (SOURCE, 0.5)})
    url = f"/api/boards/{release.pk}/H200/?format=csv"
    first = Client().get(url).content.decode()
    assert "Red" in first and "Blue" not in first
    with mock.patch("leaderboard.exports.rows_as_csv") as write:
        assert Client().get(url).content.decode() == first  # kept: not written again
    write.assert_not_called()
    scored_kernels(world.blue, release, {"rms_norm": (SOURCE, 0.9)})  # a job ends: dropped
    rows = Client().get(url).content.decode().splitlines()
    assert [line.split(",")[1] for line in rows[1:3]] == ["Blue", "Red"]


def test_one_recomputation_at_a_time_under_concurrent_misses(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Eight readers miss one entry at once: one computes it, the others wait for it."""
    cache.clear()
    readers = 8
    computed, waiting = [], threading.Semaphore(0)
    sleep = derived_cache.time.sleep

    def noted_sleep(seconds: float) -> None:
        waiting.release()  # a reader found the entry being computed
        sleep(seconds)

    monkeypatch.setattr(derived_cache.time, "sleep", noted_sleep)

    def compute() -> str:
        computed.append(1)
        for _ in range(readers - 1):  # every other reader is waiting before it is stored
            assert waiting.acquire(timeout=30)
        return "board"

    got: list[str] = []
    threads = [threading.Thread(target=lambda: got.append(
        derived_cache.remember("kind", "key", compute, 60))) for _ in range(readers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert computed == [1] and got == ["board"] * readers


def test_during_a_recomputation_others_get_the_previous_value(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache.clear()
    assert derived_cache.remember("kind", "key", lambda: "old", 60) == "old"
    derived_cache.changed("kind")  # a write: the entry is recomputed on its next read
    inside, release = threading.Event(), threading.Event()

    def slow() -> str:
        inside.set()
        assert release.wait(timeout=30)
        return "new"

    got: list[str] = []
    first = threading.Thread(target=lambda: got.append(
        derived_cache.remember("kind", "key", slow, 60)))
    first.start()
    assert inside.wait(timeout=30)
    # another reader meanwhile: the previous value, not a second recomputation
    assert derived_cache.remember("kind", "key", lambda: pytest.fail("computed twice"),
                                  60) == "old"
    release.set()
    first.join()
    assert got == ["new"] and derived_cache.remember("kind", "key", lambda: "x", 60) == "new"


def test_the_streamed_rebuild_gives_the_summaries_of_the_whole_release_read_at_once(
        board_world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    release = board_world.release
    # what summaries_rebuild computed before issue 42: every outcome of the release at once
    context = scoring_context(release)
    submissions = list(Submission.objects.filter(release=release).select_related("hardware"))
    outcomes = context.outcomes_by_submission(submissions, whole_release=True)
    expected = {s.pk: summarise(outcomes.get(s.pk, []), services._policy(release, s),
                                complete=s.pk not in context.running,
                                lost_jobs=context.lost_jobs.get(s.pk, 0),
                                interpreter_jobs=context.interpreter_jobs.get(s.pk, 0)).as_json()
                for s in submissions}
    kept = {
        "tally": dict(ScoreSummary.objects.values_list("submission_id", "tally")),
        "operators": sorted(OperatorSummary.objects.values_list(
            "submission_id", "operator_id", "score", "correctness_rate", "solved", "rankable")),
        "totals": sorted(BoardTally.objects.values_list("dsl", "files", "shapes", "correct")),
    }
    ScoreSummary.objects.all().delete()
    monkeypatch.setattr(services, "REBUILD_BATCH", 2)  # several batches, keyset-paged
    assert summaries_rebuild(release) == {}
    assert dict(ScoreSummary.objects.values_list("submission_id", "summary")) == expected
    assert dict(ScoreSummary.objects.values_list("submission_id", "tally")) == kept["tally"]
    assert sorted(OperatorSummary.objects.values_list(
        "submission_id", "operator_id", "score", "correctness_rate", "solved",
        "rankable")) == kept["operators"]
    # the totals lost their old tallies with the deleted summaries, so they are recomputed
    board_totals_recompute(release)
    assert sorted(BoardTally.objects.values_list("dsl", "files", "shapes", "correct")) == \
        kept["totals"]


def test_a_streamed_rebuild_under_debug_keeps_no_growing_query_log(
        board_world: World, monkeypatch: pytest.MonkeyPatch, settings: Any) -> None:
    """DEBUG (the embedded default) logs every query's SQL, and each batch's upsert of
    summaries is megabytes of it: at 100,000 submissions the rebuild grew past 1 GB before the
    log was cleared after each batch."""
    from django.db import connection

    settings.DEBUG = True
    monkeypatch.setattr(services, "REBUILD_BATCH", 1)
    connection.queries_log.clear()
    summaries_rebuild(board_world.release)
    assert Submission.objects.filter(release=board_world.release).count() > 2
    assert len(connection.queries) < 5  # what the last look for another batch left


def test_the_streamed_rescore_gives_the_scores_of_one_pass(
        board_world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    weight_set = board_world.release.weight_sets.get(active=True)
    fields = ("submission_id", "aggregate", "memory", "compute", "prefill", "decode",
              "correctness_rate", "ranked", "excluded", "by_operator", "intervals")
    whole = sorted(SubmissionScore.objects.filter(weight_set=weight_set).values_list(*fields))
    monkeypatch.setattr(services, "RESCORE_BATCH", 2)
    count = rescore_weight_set(weight_set)
    assert count == Submission.objects.filter(release=board_world.release).count()
    assert sorted(SubmissionScore.objects.filter(weight_set=weight_set)
                  .values_list(*fields)) == whole


def test_activating_weights_reads_no_shape_result(board_world: World) -> None:
    release = board_world.release
    weights = services.weight_set_create(release=release, weights={"rms_norm": 1},
                                         source="manual")
    with CaptureQueriesContext(connection) as captured:
        weight_set_activate(weight_set=weights, actor=None)
    assert not any("submissions_shaperesult" in q["sql"] for q in captured.captured_queries)


def test_a_deleted_submission_leaves_the_boards_totals(board_world: World) -> None:
    release, h200 = board_world.release, board_world.h200
    Submission.objects.filter(team__name="Green").delete()
    assert dsl_rates(release=release, hardware=h200) == counted_rates(release, h200)
    assert "cute" not in {r["dsl"] for r in dsl_rates(release=release, hardware=h200)}


def test_after_the_upgrade_dropped_the_summaries_a_plain_rescore_restores_every_board(
        board_world: World) -> None:
    """Migration leaderboard 0013 drops every summary and board total (derived data): the
    next `manage.py rescore` rebuilds them, the same as before."""
    release, h200 = board_world.release, board_world.h200
    weight_set = release.weight_sets.get(active=True)
    rates = dsl_rates(release=release, hardware=h200)
    board = operator_board(release=release, hardware=h200, weight_set=weight_set,
                           operator="rms_norm")
    migration = importlib.import_module(
        "leaderboard.migrations.0013_summaries_rebuilt_with_board_aggregates")
    migration.drop_summaries(django_apps, None)
    assert not ScoreSummary.objects.exists() and not OperatorSummary.objects.exists()
    assert dsl_rates(release=release, hardware=h200) == []
    call_command("rescore", release.name, stdout=io.StringIO())
    assert dsl_rates(release=release, hardware=h200) == rates
    assert operator_board(release=release, hardware=h200, weight_set=weight_set,
                          operator="rms_norm")["rows"] == board["rows"]


def test_a_submissions_dsl_label_is_read_from_its_files_once(board_world: World) -> None:
    """A label is kept per submission, outside the boards' generations: its files and their
    DSLs are fixed at upload, so a finished job's dropped board reads none of them again."""
    mixed = scored_submission(board_world.release, board_world.blue,
                              {"rms_norm": 0.5, "gemm_fp16": 0.5}, dsl={"gemm_fp16": "cute"})
    one = scored_submission(board_world.release, board_world.red, {"rms_norm": 0.5}, dsl="gluon")
    made = {mixed.pk: mixed.created_at, one.pk: one.created_at}
    labels = dsl_labels(made)
    assert labels == {mixed.pk: "gemm_fp16: cute, rms_norm: triton", one.pk: "gluon"}
    with CaptureQueriesContext(connection) as queries:
        assert dsl_labels(made) == labels
    assert len(queries) == 0
    derived_cache.changed(derived_cache.board(board_world.release.pk,
                                              HardwareProfile.objects.get(name="H200").pk))
    with CaptureQueriesContext(connection) as queries:
        assert dsl_labels({one.pk: one.created_at}) == {one.pk: "gluon"}
    assert len(queries) == 0
    # the same id made again at another time (a database restored under the kept cache): its
    # own files are read, not the label kept for the id
    Candidate.objects.filter(submission=one).update(dsl="cute")
    later = one.created_at + timedelta(seconds=1)
    assert dsl_labels({one.pk: later}) == {one.pk: "cute"}


def test_a_board_page_escapes_what_teams_name_themselves(world: World) -> None:
    """A row's cells are written as HTML in Python (leaderboard/views.py, Cell.html): a team
    name, its agent's name and an admin's exclusion reason are text, never markup."""
    release = world.release
    weight_set_from_release(release)
    Team.objects.filter(pk=world.red.pk).update(name='<img src=x onerror="alert(1)">')
    submission = scored_kernels(world.red, release, {"rms_norm": (SOURCE, 0.5)})
    Submission.objects.filter(pk=submission.pk).update(agent="<script>x</script>")
    rescore_submission(Submission.objects.get(pk=submission.pk))
    page = Client().get(f"/boards/{release.pk}/H200/").content.decode()
    assert "onerror" in page  # the row is there
    assert "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;" in page
    assert "&lt;script&gt;x&lt;/script&gt;" in page
    assert "<img src=x" not in page and "<script>x" not in page
