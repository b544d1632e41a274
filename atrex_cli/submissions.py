"""`atrex cancel ID` and `atrex submissions`: what an agent's loop needs besides submitting.

Both are the team's own (its token); another team's submission is "not found".
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from atrex_cli import portal
from atrex_cli.client import EXIT_OK
from atrex_cli.terminal import api_from_args, console, print_json


def add_parsers(commands: Any, common: argparse.ArgumentParser) -> None:
    cancel = commands.add_parser("cancel", parents=[common],
                                 help="cancel a submission's queued and running jobs")
    cancel.add_argument("id", type=int)
    cancel.add_argument("--format", choices=("table", "json"), default="table")

    listing = commands.add_parser("submissions", parents=[common],
                                  help="the team's newest submissions (at most 100)")
    listing.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    listing.add_argument("--format", choices=("table", "json"), default="table")


def cmd_cancel(args: argparse.Namespace, err: Console) -> int:
    """Cancelling a ranked submission needs a full token; a check, a checks-only one. A
    cancelled submission still counts against the day's quota (it held a GPU worker)."""
    detail = portal.cancel(api_from_args(args), args.id)
    if args.format == "json":
        print_json(detail)
    else:
        print(f"submission {detail['id']}: {detail['outcome']['summary']}")
        for job in detail["jobs"]:
            print(f"  {job['operator']}: {job['status']} {job['shapes_done']}/"
                  f"{job['shapes_total']}")
    return EXIT_OK


def cmd_submissions(args: argparse.Namespace, err: Console) -> int:
    found = portal.submissions(api_from_args(args))[:max(args.limit, 0)]
    if args.format == "json":
        print_json(found)
        return EXIT_OK
    table = Table(title="the team's submissions, newest first")
    for column in ("id", "date", "release", "hardware", "mode", "outcome", "operators",
                   "agent", "harness"):
        table.add_column(column)
    for s in found:
        table.add_row(str(s["id"]), s["created_at"][:16].replace("T", " "),
                      f"{s['release']['name']}@v{s['release']['version']}", s["hardware"],
                      s["mode"], s["outcome"]["summary"],
                      ", ".join(j["operator"] for j in s["jobs"]),
                      " ".join(filter(None, [s.get("agent"), s.get("model")])) or "-",
                      s.get("harness") or "-")
    if not found:
        table.caption = "no submissions yet"
    console().print(table)
    return EXIT_OK
