"""`atrex history OPERATOR` and `atrex compare A B`: what a team needs to iterate on a kernel.

Both read the team's own data with its token (another team's submission is "not found").
Tables go to stdout; `--format json` prints the portal's answer as it is.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rich.console import Console
from rich.table import Table

from atrex_cli import portal
from atrex_cli.client import EXIT_OK
from atrex_cli.terminal import api_from_args, console, print_json


def add_parsers(commands: Any, common: argparse.ArgumentParser) -> None:
    """The two commands, on `atrex`'s subparsers (`common`: --server, --http-timeout)."""
    history = commands.add_parser("history", parents=[common],
                                  help="an operator's scores across the team's submissions")
    history.add_argument("operator")
    history.add_argument("--release", default=None, help="only this release: id, name or name@vN")
    history.add_argument("--hardware", default=None, help="only this hardware, e.g. H200")
    history.add_argument("--format", choices=("table", "json"), default="table")

    compare = commands.add_parser("compare", parents=[common],
                                  help="two submissions side by side, with source diffs")
    compare.add_argument("a", type=int, metavar="A", help="a submission id (deltas are B - A)")
    compare.add_argument("b", type=int, metavar="B", help="another submission id")
    compare.add_argument("--diff", action="store_true",
                         help="also print each changed operator's unified source diff")
    compare.add_argument("--format", choices=("table", "json"), default="table")


def cmd_history(args: argparse.Namespace, err: Console) -> int:
    api = api_from_args(args)
    params = {}
    if args.release:
        params["release"] = str(portal.find_release(api, args.release)["id"])
    if args.hardware:
        params["hardware"] = args.hardware
    doc = portal.operator_history(api, args.operator, params)
    if args.format == "json":
        print_json(doc)
        return EXIT_OK
    console().print(history_table(doc))
    return EXIT_OK


def cmd_compare(args: argparse.Namespace, err: Console) -> int:
    doc = portal.compare(api_from_args(args), args.a, args.b)
    if args.format == "json":
        print_json(doc)
        return EXIT_OK
    out = console()
    for table in compare_tables(doc):
        out.print(table)
    if args.diff:
        for op in doc["operators"]:
            if op["diff"]:
                sys.stdout.write(op["diff"] + "\n")
    return EXIT_OK


def best_entry(entries: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The board's order: the higher S_op, then the higher share of correct shapes, then the
    newer. "Not timed" (a CPU check) is no score, not 0: a correct untimed submission beats
    one whose every shape failed, and one with no correct shape is never the best."""
    correct = [e for e in entries if e["correct"] > 0]
    return max(correct, key=lambda e: (e["s_op"] or 0.0, e["correct"] / max(e["shapes_total"], 1),
                                       e["created_at"]), default=None)


def history_table(doc: dict[str, Any]) -> Table:
    table = Table(title=f"{doc['operator']}: {doc['team']}'s submissions, oldest first")
    for column in ("submission", "date", "release", "hardware", "status", "S_op", "correct",
                   "native", "verdicts", "source"):
        table.add_column(column)
    for e in doc["entries"]:
        table.add_row(str(e["submission"]), e["created_at"][:16].replace("T", " "),
                      f"{e['release']['name']}@v{e['release']['version']}", e["hardware"],
                      e["status"] + _marks(e), _s_op(e), f"{e['correct']}/{e['shapes_total']}",
                      f"{e['native']}/{e['shapes_total']}",
                      ", ".join(f"{v} {n}" for v, n in e["verdicts"].items()) or "-",
                      _source(e))
    best = best_entry(doc["entries"])
    if any(_marks(e) for e in doc["entries"]):
        table.caption = "check: a check submission; interpreter: an interpreter check (never ranked)"
    if not doc["entries"]:
        table.caption = f"the team has not submitted {doc['operator']} yet"
    else:
        marks = str(table.caption) if table.caption else ""
        if best is None:
            headline = "no submission has a correct shape yet"
        elif best["s_op"] is None:
            headline = (f"best: submission {best['submission']}, {best['correct']}/"
                        f"{best['shapes_total']} shapes correct, not timed")
        else:
            headline = f"best S_op {best['s_op']:.3f} (submission {best['submission']})"
        table.caption = "; ".join(filter(None, [headline, marks]))
    if doc["truncated"]:
        table.caption = (table.caption or "") + "; only the newest shown"
    return table


def compare_tables(doc: dict[str, Any]) -> list[Table]:
    a, b = doc["a"], doc["b"]
    operators = Table(title=f"A: {_side(a)}\nB: {_side(b)}", caption=None if doc["same_target"]
                      else "not the same release and hardware: shapes matched by id")
    for column in ("operator", "A", "B", "S_op A", "S_op B", "delta", "source"):
        operators.add_column(column)
    shapes = Table(title="per shape (speedup: time A / time B; delta: B - A)")
    for column in ("operator", "shape", "time A us", "time B us", "speedup", "attain. A",
                   "attain. B", "delta", "verdict A", "verdict B"):
        shapes.add_column(column)
    for op in doc["operators"]:
        side_a, side_b = op["a"] or {}, op["b"] or {}
        operators.add_row(op["operator"], side_a.get("status", "not submitted"),
                          side_b.get("status", "not submitted"), _operator_score(side_a),
                          _operator_score(side_b), _signed(op["s_op_delta"]),
                          "changed" if op["source_changed"] else "same")
        for s in op["shapes"]:
            ra, rb = s["a"] or {}, s["b"] or {}
            shapes.add_row(op["operator"], s["shape_id"], _micro(ra), _micro(rb),
                           "-" if s["speedup"] is None else f"{s['speedup']:.2f}x",
                           _attainment(ra), _attainment(rb),
                           _signed(s["attainment_delta"]), _verdict(ra), _verdict(rb)
                           + (" (changed)" if s["verdict_changed"] else ""))
    return [operators, shapes]


def _side(side: dict[str, Any]) -> str:
    aggregate = "-" if side.get("weights_version") is None else _score(side["aggregate"])
    return (f"submission {side['submission']} ({side['team']}, {side['release']['name']}@v"
            f"{side['release']['version']}, {side['hardware']}): {side['status']}"
            f"{_marks(side)}, S_agg {aggregate}")


def _marks(entry: dict[str, Any]) -> str:
    """What no board ranks: a check submission, an interpreter check."""
    marks = [m for m, on in (("check", entry.get("mode") == "check"),
                             ("interpreter", entry.get("interpreter"))) if on]
    return f" ({', '.join(marks)})" if marks else ""


def _score(value: float | None) -> str:
    """As every page prints a score: None is not timed (correct, no GPU time), not 0."""
    return "not timed" if value is None else f"{value:.3f}"


def _s_op(entry: dict[str, Any]) -> str:
    # Correct shapes without a GPU time (a CPU-only portal) are not 0: not timed.
    if entry["s_op"] is not None or (entry["status"] == "scored" and entry["correct"]):
        return _score(entry["s_op"])
    return "-"


def _source(entry: dict[str, Any]) -> str:
    if entry["previous"] is None:
        return str(entry["sha256"])[:8]
    return "changed" if entry["source_changed"] else f"same as {entry['previous']}"


def _micro(row: dict[str, Any]) -> str:
    """A shape's median time in µs; "not timed" for a correct shape without a GPU time."""
    if not row:
        return "-"
    if row["median_s"] is not None:
        return f"{row['median_s'] * 1e6:.2f}"
    return "not timed" if row.get("status") == "passed" else "-"


def _operator_score(side: dict[str, Any]) -> str:
    if not side or side.get("status") in ("queued", "running", "empty"):
        return "-"
    return _score(side.get("s_op"))


def _attainment(row: dict[str, Any]) -> str:
    if row and row.get("attainment") is None and row.get("status") == "passed":
        return "not timed"
    return _number(row.get("attainment")) if row else "-"


def _verdict(row: dict[str, Any]) -> str:
    return str(row.get("verdict") or row.get("status") or "-") if row else "-"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


