"""What every `atrex` command shares: the API client its arguments name, the console it
prints to, and JSON output."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from rich.console import Console

from atrex_cli.client import Api
from atrex_cli.config import resolve


def api_from_args(args: argparse.Namespace) -> Api:
    config = resolve(args.server)
    return Api(config.server, config.token, timeout_s=args.http_timeout)


def console() -> Console:
    out = Console(markup=False, highlight=False)
    if not out.is_terminal:
        out.width = 160  # pipes and logs: one row per line
    return out


def print_json(doc: Any) -> None:
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")
