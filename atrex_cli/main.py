"""`atrex`: the Atrex Portal from a terminal or a coding agent's script.

Talks only to the portal's REST API with a team token ($ATREX_TOKEN or `atrex login`).
Results go to stdout (tables, or JSON/CSV with --format); progress and messages to stderr.
Exit codes: atrex_cli.client (EXIT_*) and docs/cli.md.
"""

from __future__ import annotations

import argparse
import getpass
import io
import json
import os
import sys
import time
import uuid
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

from atrex_cli import iteration, portal, submissions
from atrex_cli.client import (
    EXIT_EVALUATION_FAILED,
    EXIT_KINDS,
    EXIT_NOT_EVALUATED,
    EXIT_NOT_STRICT,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WAIT_TIMEOUT,
    Api,
    AuthError,
    CliError,
    NotFound,
    Unreachable,
)
from atrex_cli.config import ConfigError, config_path, read_config_file, resolve, write_config
from atrex_cli.terminal import api_from_args, console, print_json

ACTIVE = ("queued", "running")
# After the last job ends, how long to wait for its score (none comes when the release has
# no active weights).
SCORE_GRACE_S = 20.0


EXIT_CODES = """exit codes:
  0  done                        6  quota used up or rate limited (429)
  2  bad arguments, local file   7  server unreachable or timed out
  3  no/invalid token (401/403)  8  server error (5xx) or unreadable answer
  4  not found (404)             9  the kernel failed: submit --wait / status saw the
  5  rejected by the portal         evaluation end with no shape correct; evaluate-
     (400; its message printed)     local: a shape not correct and native
                                10  --wait-timeout reached
                                11  evaluate-local: the harness failed
                                12  submit --wait / status: the evaluation ended before
                                    any shape was evaluated (cancelled, or lost to an
                                    infrastructure failure): submit again
                                13  --strict: it ended with a shape not correct and native
With --format json (or --json) every outcome is JSON on stdout, errors included:
{"error": {"kind", "message", "exit_code"}}.
token: $ATREX_TOKEN or `atrex login`; server: --server, $ATREX_SERVER. See docs/cli.md."""


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--server", default=None,
                        help="portal URL (default: $ATREX_SERVER, the config file, "
                             "http://127.0.0.1:8000)")
    common.add_argument("--http-timeout", type=float, default=30.0, metavar="S",
                        help="seconds to wait for each HTTP answer (default 30)")
    parser = argparse.ArgumentParser(
        prog="atrex", description="Atrex Portal client: problems, bundles, submissions, boards, "
        "local evaluation.", epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    login = commands.add_parser("login", parents=[common], help="store a team token")
    login.add_argument("--token", default=None,
                       help="the team token (default: $ATREX_TOKEN, else asked for)")
    commands.add_parser("logout", parents=[common], help="forget the stored token")
    commands.add_parser("quota", parents=[common], help="the team's submission quota")

    problems = commands.add_parser("problems", parents=[common],
                                   help="releases, or one release's operators")
    problems.add_argument("release", nargs="?", help="id, name or name@vN")
    problems.add_argument("--format", choices=("table", "json"), default="table")

    bundle = commands.add_parser("bundle", parents=[common],
                                 help="download a release's agent-visible files")
    bundle.add_argument("release")
    bundle.add_argument("operator", nargs="?", help="one operator (default: all)")
    bundle.add_argument("-o", "--output", type=Path, required=True, metavar="DIR")

    submit = commands.add_parser("submit", parents=[common], help="upload kernels")
    submit.add_argument("path", type=Path, metavar="FILE_OR_DIR",
                        help="<operator>.py, a .zip/.tar.gz of them, or a folder of them")
    submit.add_argument("--release", required=True, help="id, name or name@vN")
    submit.add_argument("--hardware", required=True, help="e.g. H200")
    submit.add_argument("--operator", default=None,
                        help="the operator of a single .py (default: its file name)")
    submit.add_argument("--dsl", default="",
                        help="the kernels' DSL: one for every file (triton, gluon, cute) or per "
                             "file, e.g. rms_norm=cute,silu_and_mul=triton (default: the "
                             "release's first accepted DSL)")
    submit.add_argument("--agent", default="", help="the agent that wrote it")
    submit.add_argument("--model", default="", help="the model behind the agent")
    submit.add_argument("--harness", default="",
                        help="the agent harness, e.g. claude-code, codex, atrex-loop")
    submit.add_argument("--tokens", "--tokens-out", dest="tokens", type=int, default=None,
                        help="output tokens the agent spent")
    submit.add_argument("--tokens-in", type=int, default=None, help="input tokens it read")
    submit.add_argument("--notes", default="")
    submit.add_argument("--idempotency-key", default=None, metavar="KEY",
                        help="sent as Idempotency-Key (default: a new random one): the upload "
                             "is retried after a lost connection with the same key, and the "
                             "portal never makes two submissions of one key")
    submit.add_argument("--check", action="store_true",
                        help="a check: evaluated like any submission (on a GPU: timed), never "
                             "ranked; uses the team's daily check quota")
    _wait_options(submit)

    status = commands.add_parser("status", parents=[common], help="a submission's state")
    status.add_argument("id", type=int)
    _wait_options(status)

    profile = commands.add_parser(
        "profile", parents=[common], help="a submission's profile; --ncu: hardware counters")
    profile.add_argument("id", type=int)
    profile.add_argument("--ncu", action="store_true",
                         help="Nsight Compute counters per kernel: with --operator and --shape, "
                              "ask for a profile of that shape (a few a day); else list them")
    profile.add_argument("--operator")
    profile.add_argument("--shape", help="a public shape id the submission was evaluated on")
    profile.add_argument("--wait", action="store_true", help="wait for the requested profile")
    profile.add_argument("--wait-timeout", type=float, default=600.0, metavar="S")
    profile.add_argument("--interval", type=float, default=2.0)
    profile.add_argument("--json", action="store_true", help="print the JSON")

    board = commands.add_parser("leaderboard", parents=[common], help="a board")
    board.add_argument("release", nargs="?", help="id, name or name@vN (default: the only one)")
    board.add_argument("--hardware", default="H200")
    kind = board.add_mutually_exclusive_group()
    kind.add_argument("--operator", help="the per-operator board")
    kind.add_argument("--regime", choices=("memory", "compute"))
    kind.add_argument("--phase", choices=("prefill", "decode"))
    board.add_argument("--format", choices=("table", "json", "csv"), default="table")

    local = commands.add_parser("evaluate-local", parents=[common],
                                help="the public checks on this machine (no roofline)")
    local.add_argument("candidate", type=Path, metavar="FILE")
    local.add_argument("--release", required=True, metavar="DIR_OR_NAME",
                       help="an Atrex-layout folder (e.g. from `atrex bundle`), or a release "
                            "on the portal (its bundle is downloaded)")
    local.add_argument("--operator", required=True)
    local.add_argument("--shapes", default=None, help="comma-separated ids or globs "
                       "(default: all on a GPU, the dev-* shapes on a CPU)")
    local.add_argument("--device", choices=("cuda", "cpu"), default=None)
    local.add_argument("--dsl", default=None,
                       help="the candidate's DSL (default: the release's first accepted DSL)")
    local.add_argument("--trials", type=int, default=5)
    local.add_argument("--timeout", type=float, default=300.0,
                       help="seconds for compile + correctness of one shape")
    local.add_argument("--json", type=Path, default=None, help="write the result JSON here")
    iteration.add_parsers(commands, common)  # history, compare
    submissions.add_parsers(commands, common)  # cancel, submissions
    from atrex_cli import loop

    loop.add_parser(commands, common)
    _mcp_parser(commands, common)
    return parser


def _mcp_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """`atrex mcp` (atrex_cli/mcp_server.py, which imports the MCP SDK only when it runs)."""
    mcp = commands.add_parser(
        "mcp", parents=[common],
        help="serve the portal's tools over MCP (stdio for a local agent; --http for all)")
    mcp.add_argument("--http", action="store_true",
                     help="serve streamable HTTP at /mcp instead of stdio; callers send "
                          "their own team token")
    mcp.add_argument("--host", default="127.0.0.1")
    mcp.add_argument("--port", type=int, default=8001)
    mcp.add_argument("--upstream", default=None,
                     help="with --http: the portal's URL as this process reaches it "
                          "(default: --server)")
    mcp.add_argument("--public-url", default=None,
                     help="with --http: the MCP endpoint's URL as clients reach it (default "
                          "http://HOST:PORT/mcp)")


def _wait_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", action="store_true",
                        help="follow the evaluation live until it ends")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between polls")
    parser.add_argument("--wait-timeout", type=float, default=None, metavar="S",
                        help="give up waiting after S seconds (exit 10)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--json", dest="format", action="store_const", const="json",
                        help="the same as --format json (the submission, its score and its "
                             "per-shape profile)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 13 unless the evaluation ended with every shape correct "
                             "and native (an agent's loop: a fallback is not a success)")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # No markup: messages and table cells carry names and errors from the server verbatim.
    err = Console(stderr=True, markup=False, highlight=False)
    if not err.is_terminal:
        err.soft_wrap = True  # logs: one message per line
    try:
        return COMMANDS[args.command](args, err)
    except CliError as exc:
        return _failed(args, err, str(exc), exc.exit_code)
    except ConfigError as exc:
        return _failed(args, err, str(exc), EXIT_USAGE)
    except KeyboardInterrupt:
        err.print("interrupted")
        return _failed(args, None, "interrupted", 130)


def wants_json(args: argparse.Namespace) -> bool:
    return getattr(args, "format", None) == "json" or getattr(args, "json", None) is True


def _failed(args: argparse.Namespace, err: Console | None, message: str, code: int) -> int:
    """The message on stderr; with --format json also the error as JSON on stdout, so that
    an agent reading stdout gets JSON for every outcome."""
    if err is not None:
        err.print(Text.assemble(("error:", "red"), f" {message}"))
    if wants_json(args):
        print_json({"error": {"kind": EXIT_KINDS.get(code, "error"), "message": message,
                              "exit_code": code}})
    return code


def cmd_login(args: argparse.Namespace, err: Console) -> int:
    config = resolve(args.server)
    token = args.token or os.environ.get("ATREX_TOKEN")
    if not token:
        token = getpass.getpass("team token: ") if sys.stdin.isatty() else sys.stdin.readline()
    token = token.strip()
    if not token:
        raise AuthError("no token given")
    quota = Api(config.server, token, timeout_s=args.http_timeout).get_json("/api/quota/",
                                                                            team=True)
    try:
        scope = portal.token_info(Api(config.server, token, timeout_s=args.http_timeout))["scope"]
    except NotFound:  # a portal from before token scopes
        scope = "full"
    path = config_path()
    write_config(path, {**read_config_file(path), "server": config.server, "token": token})
    err.print(f"signed in to {config.server} as team {quota['team']} (token scope: {scope}); "
              f"token stored in {path} (mode 0600)")
    return EXIT_OK


def cmd_logout(args: argparse.Namespace, err: Console) -> int:
    path = config_path()
    stored = read_config_file(path)
    if "token" in stored:
        del stored["token"]
        write_config(path, stored)
        err.print(f"token removed from {path}")
    else:
        err.print("no token stored")
    return EXIT_OK


def cmd_quota(args: argparse.Namespace, err: Console) -> int:
    quota = api_from_args(args).get_json("/api/quota/", team=True)
    print_json(quota)
    return EXIT_OK


def cmd_problems(args: argparse.Namespace, err: Console) -> int:
    api = api_from_args(args)
    if args.release is None:
        # What this portal can evaluate first (and said above the table), the newest version
        # of each name before older ones.
        releases = sorted(portal.releases(api), key=lambda r: (
            not r.get("evaluated_shapes", 1), r.get("superseded_by") is not None, r["name"],
            -int(r["version"])))
        if args.format == "json":
            print_json(releases)
            return EXIT_OK
        summary = portal.capability_summary(api)
        if summary:
            err.print(summary, soft_wrap=True)
        table = Table(title="Releases")
        for column in ("id", "release", "DSL", "operators", "shapes", "evaluated here"):
            table.add_column(column)
        for r in releases:
            state = (f" (superseded by v{r['superseded_by']})" if r.get("superseded_by")
                     else "")
            table.add_row(str(r["id"]), f"{r['name']}@v{r['version']}{state}", r["dsl"],
                          str(r["operator_count"]), str(r["shape_count"]), _evaluated_here(r))
        console().print(table)
        return EXIT_OK
    release = portal.find_release(api, args.release)
    if release.get("superseded_by"):
        err.print(f"{release['name']}@v{release['version']} is superseded by "
                  f"v{release['superseded_by']} ({release['name']} alone means that one)")
    elif not args.release.isdigit() and "@" not in args.release:
        err.print(f"{args.release} means {release['name']}@v{release['version']}, its newest "
                  "version")
    operators = portal.operators(api, release)
    if args.format == "json":
        print_json({"release": release, "operators": [
            {"name": o["name"], "shape_count": o["shape_count"],
             "shapes": list(json.loads(o["files"]["shapes.json"]))} for o in operators]})
        return EXIT_OK
    table = Table(title=f"{release['name']}@v{release['version']} (id {release['id']}, "
                        f"{release['dsl']}; evaluated here: {_evaluated_here(release)})")
    for column in ("operator", "shapes", "shape ids"):
        table.add_column(column)
    for o in operators:
        ids = list(json.loads(o["files"]["shapes.json"]))
        table.add_row(o["name"], str(o["shape_count"]),
                      ", ".join(ids[:4]) + (f", … (+{len(ids) - 4})" if len(ids) > 4 else ""))
    console().print(table)
    return EXIT_OK


def _evaluated_here(release: dict[str, Any]) -> str:
    """"8 shapes, ranked on H200", "8 shapes, checks on H200 (CPU)" or "no" (an older
    portal that does not say: "?")."""
    if "evaluated_shapes" not in release:
        return "?"
    shapes = release["evaluated_shapes"]
    if not shapes:
        return "no"
    where = [f"ranked on {', '.join(release['ranked_on'])}"] if release.get("ranked_on") else []
    where += [f"checks on {', '.join(release['checked_on'])} (CPU)"] \
        if release.get("checked_on") else []
    return f"{shapes} shapes" + (f", {'; '.join(where)}" if where else "")


def cmd_bundle(args: argparse.Namespace, err: Console) -> int:
    api = api_from_args(args)
    release = portal.find_release(api, args.release)
    written = portal.download_bundle(api, release, args.operator, args.output)
    root = args.output / release["name"]
    err.print(f"{len(written)} files written under {root}")
    for path in written:
        print(path)
    return EXIT_OK


def upload_payload(path: Path) -> tuple[str, bytes]:
    """A file as it is; a folder as a zip of its top-level <operator>.py files."""
    if path.is_file():
        return path.name, path.read_bytes()
    if not path.is_dir():
        raise CliError(f"no such file or folder: {path}")
    sources = sorted(p for p in path.iterdir() if p.is_file() and p.suffix == ".py")
    if not sources:
        raise CliError(f"{path} holds no <operator>.py files")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for source in sources:
            archive.write(source, source.name)
    return f"{path.resolve().name or 'kernels'}.zip", buffer.getvalue()


def cmd_submit(args: argparse.Namespace, err: Console) -> int:
    api = api_from_args(args)
    if not api.token:
        raise AuthError("no team token: run `atrex login` or set ATREX_TOKEN")
    filename, content = upload_payload(args.path)
    release = portal.find_release(api, args.release)
    known_hardware = release.get("hardware")  # absent from portals older than this client
    if known_hardware is not None and args.hardware not in known_hardware:
        raise NotFound(f"no hardware profile {args.hardware!r} on this portal (known: "
                       f"{', '.join(known_hardware) or 'none'}); nothing was uploaded")
    fields = {"release": str(release["id"]), "hardware": args.hardware, "agent": args.agent,
              "model": args.model, "notes": args.notes}
    if args.operator:
        fields["operator"] = args.operator
    if args.dsl:
        fields["dsl"] = args.dsl
    if args.check:
        fields["mode"] = "check"
    if args.tokens is not None:
        fields["output_tokens"] = str(args.tokens)
    if args.tokens_in is not None:
        fields["input_tokens"] = str(args.tokens_in)
    if args.harness:
        fields["harness"] = args.harness
    key = args.idempotency_key or f"atrex-{uuid.uuid4().hex}"
    if not err.is_terminal:
        err.print(f"uploading {filename} ({len(content)} bytes)")
    with Progress(TextColumn("uploading {task.fields[name]}"), BarColumn(), DownloadColumn(),
                  TransferSpeedColumn(), console=err, transient=True,
                  disable=not err.is_terminal) as bar:
        task = bar.add_task("upload", total=len(content), name=filename)

        def sent(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        try:
            created = upload_once(api, fields, filename, content, key, err, sent)
        except NotFound as exc:
            raise NotFound(f"{exc} (is --hardware {args.hardware!r} a hardware profile of this "
                           "portal? a release's page lists them)") from None
    operators = ", ".join(j["operator"] for j in created["jobs"])
    err.print(f"{'check ' if created.get('mode') == 'check' else ''}submission {created['id']} "
              f"created for {created['team']} on {release['name']}@v{release['version']} / "
              f"{args.hardware}: {operators}")
    if not args.wait:
        if args.format == "json":
            print_json(created)
        else:
            print(created["id"])
        return EXIT_OK
    return _follow(api, created["id"], args, err)


UPLOAD_RETRIES = (1.0, 3.0, 9.0)  # seconds before each retry of a lost upload


def upload_once(api: Api, fields: dict[str, str], filename: str, content: bytes, key: str,
                err: Console, sent: Any = None) -> dict[str, Any]:
    """POST the upload with an Idempotency-Key, again with the same key when the connection
    fails (the answer may have been lost after the portal made it): at most one submission."""
    for pause in (*UPLOAD_RETRIES, None):
        try:
            created: dict[str, Any] = api.post_multipart(
                "/api/submissions/", fields, filename, content, sent,
                headers={"Idempotency-Key": key})
            return created
        except Unreachable as exc:
            if pause is None:
                raise
            err.print(f"{exc}; trying again in {pause:.0f} s with the same idempotency key")
            time.sleep(pause)
    raise AssertionError("unreachable")  # the loop returns or raises


def cmd_status(args: argparse.Namespace, err: Console) -> int:
    api = api_from_args(args)
    if args.wait:
        return _follow(api, args.id, args, err)
    detail = portal.submission(api, args.id)
    _report(api, detail, args.format)
    return outcome_exit_code(detail, strict=args.strict)


def cmd_profile(args: argparse.Namespace, err: Console) -> int:
    api = api_from_args(args)
    if not args.ncu:
        print_json(portal.profile(api, args.id))
        return 0
    if bool(args.operator) != bool(args.shape):
        raise CliError("--ncu needs both --operator and --shape to ask for a profile")
    if args.operator:
        made = portal.ncu_profile_request(api, args.id, args.operator, args.shape)
        err.print(f"ncu profile {made['id']} of {args.operator}/{args.shape}: {made['status']}")
        chosen = [made]
        deadline = time.monotonic() + args.wait_timeout
        while args.wait and chosen[0]["status"] == "queued":
            if time.monotonic() > deadline:
                raise CliError(f"ncu profile {made['id']} still queued after "
                               f"{args.wait_timeout:.0f} s")
            time.sleep(args.interval)
            chosen = [p for p in portal.ncu_profiles(api, args.id) if p["id"] == made["id"]]
    else:
        chosen = portal.ncu_profiles(api, args.id)
    if args.json:
        print_json(chosen if not args.operator else chosen[0])
    else:
        for found in chosen:
            _ncu_table(found)
    return 1 if any(p["status"] == "failed" for p in chosen) else 0


def _ncu_table(found: dict[str, Any]) -> None:
    clocks = found.get("clocks") or {}
    sm = clocks.get("sm_clock_max_hz")
    title = (f"{found['operator']} / {found['shape']}: {found['status']}"
             + (f", SM clock seen {sm / 1e9:.2f} GHz" if sm else "")
             + (f" ({found['error']})" if found.get("error") else ""))
    table = Table(title=title)
    for column in ("kernel", "duration", "DRAM of peak", "occupancy", "SM", "tensor pipe",
                   "L2 hit", "limited by"):
        table.add_column(column)

    def pct(value: float | None, scale: float = 1.0) -> str:
        return "-" if value is None else f"{value * scale:.1f}%"

    for k in found.get("kernels") or []:
        duration = k.get("duration_s")
        table.add_row(str(k.get("name", ""))[:48],
                      "-" if duration is None else f"{duration * 1e6:.1f} us",
                      pct(k.get("dram_of_peak"), 100), pct(k.get("achieved_occupancy_pct")),
                      pct(k.get("sm_throughput_pct")), pct(k.get("tensor_pipe_pct")),
                      pct(k.get("l2_hit_rate_pct")), str(k.get("limited_by", "")))
    console().print(table)


def queue_place_text(queue: dict[str, Any] | None) -> str:
    """A queued job's place as the CLI says it ("" when it is not queued)."""
    if not queue:
        return ""
    text = f"number {queue['position']} in the queue, {queue['running']} running"
    start = queue.get("estimated_start_s")
    return text + (f", estimated start in ~{start:.0f} s" if start is not None else
                   ", no estimate yet")


def _follow(api: Api, submission_id: int, args: argparse.Namespace, err: Console) -> int:
    """Poll the submission until no job is queued or running, one progress bar per job (a
    line per change when stderr is not a terminal: agents' logs); then the per-operator
    table. Exit as `outcome_exit_code` says, or 10 on --wait-timeout."""
    deadline = None if args.wait_timeout is None else time.monotonic() + args.wait_timeout
    detail = portal.submission(api, submission_id)
    live = err.is_terminal
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, disable=not live) as bar:
        tasks: dict[int, TaskID] = {}
        shown: dict[int, tuple[str, int, str]] = {}
        ended_at: float | None = None
        while True:
            for job in detail["jobs"]:
                if job["id"] not in tasks:
                    tasks[job["id"]] = bar.add_task("", total=job["shapes_total"] or None)
                place = queue_place_text(job.get("queue"))
                bar.update(tasks[job["id"]], completed=job["shapes_done"],
                           description=f"{job['operator']}: {job['status']}"
                                       + (f" ({place})" if place else ""))
                state = (job["status"], job["shapes_done"], place)
                if not live and shown.get(job["id"]) != state:
                    shown[job["id"]] = state
                    err.print(f"{job['operator']}: {job['status']} {job['shapes_done']}/"
                              f"{job['shapes_total']}")
                    if place:
                        err.print(f"  {place}")
            if not _jobs_active(detail):
                ended_at = ended_at or time.monotonic()
                if _score_settled(detail) or time.monotonic() - ended_at > SCORE_GRACE_S:
                    break
            if deadline is not None and time.monotonic() > deadline:
                err.print(f"still {detail['status']} after {args.wait_timeout:.0f} s; "
                          f"`atrex status {submission_id} --wait` follows it again")
                if args.format == "json":  # the id and the state so far, for the agent
                    print_json({**detail, "wait_timed_out": True})
                return EXIT_WAIT_TIMEOUT
            # A long poll: the portal answers as soon as the evaluation settles, else after
            # the interval (older portals ignore `wait` and answer at once: then sleep).
            asked = time.monotonic()
            detail = portal.submission(api, submission_id, wait=args.interval)
            time.sleep(max(0.0, args.interval - (time.monotonic() - asked))
                       if _jobs_active(detail) else 0.0)
    _report(api, detail, args.format)
    return outcome_exit_code(detail, strict=args.strict)


def outcome_exit_code(detail: dict[str, Any], strict: bool = False) -> int:
    """0 unless the evaluation ended with no shape correct: 9 when shapes were evaluated
    and failed (the kernel's doing), 12 when it ended before any shape was (cancelled, or an
    infrastructure failure: submit again). Still running: 0. `strict`: 13 when it ended
    with any shape not correct and native (the interpreter's unverified-cpu counts as
    native there: it saw no foreign work, and the CPU cannot see more)."""
    code = _outcome_code(detail)
    outcome = detail.get("outcome") or {}
    if (strict and code == EXIT_OK and outcome.get("status") not in ("queued", "running")
            and not (outcome.get("shapes") and outcome.get("correct") == outcome.get("shapes")
                     == outcome.get("native"))):
        return EXIT_NOT_STRICT
    return code


def _outcome_code(detail: dict[str, Any]) -> int:
    outcome = detail.get("outcome")
    if outcome is None:  # a portal from before the outcome field: what its jobs say
        ended = not _jobs_active(detail)
        return EXIT_EVALUATION_FAILED if ended and not any(
            j["status"] == "scored" for j in detail["jobs"]) else EXIT_OK
    return {"failed": EXIT_EVALUATION_FAILED, "cancelled": EXIT_NOT_EVALUATED,
            "lost": EXIT_NOT_EVALUATED}.get(outcome["status"], EXIT_OK)


def _jobs_active(detail: dict[str, Any]) -> bool:
    return any(job["status"] in ACTIVE for job in detail["jobs"])


def _score_settled(detail: dict[str, Any]) -> bool:
    """The score under the active weights covers every scored job (the portal computes it
    just after a job ends), or there is nothing to score."""
    if not any(job["status"] == "scored" for job in detail["jobs"]):
        return True
    score = detail.get("score")
    return score is not None and bool(score["current"])


def _report(api: Api, detail: dict[str, Any], fmt: str) -> None:
    if fmt == "json":
        # The per-shape profile (kernels, achieved fraction of peak) for agents' loops.
        print_json({**detail, "profile": portal.profile(api, detail["id"])})
        return
    score = detail.get("score") or {}
    by_operator = score.get("by_operator") or {}
    release = detail["release"]
    outcome = detail.get("outcome") or {}
    table = Table()
    for column in ("operator", "status", "shapes", "passed", "verdicts", "score", "error"):
        table.add_column(column)
    failures = []
    for job in detail["jobs"]:
        results = job["results"]
        verdicts: dict[str, int] = {}
        for r in results:
            verdict = r["verdict"] or r["status"]
            verdicts[verdict] = verdicts.get(verdict, 0) + 1
        failed = [r for r in results if r["status"] != "passed"]
        failures += [(job["operator"], r) for r in failed]
        error = job["error"] or (_shape_error(failed[0]) if failed else "")
        if len(failed) > 1 or len(error) > 80:
            error = error[:60] + " … (all errors below)"
        table.add_row(job["operator"], job["status"], f"{job['shapes_done']}/{job['shapes_total']}",
                      str(len(results) - len(failed)),
                      ", ".join(f"{v} {n}" for v, n in sorted(verdicts.items())) or "-",
                      score_text(by_operator[job["operator"]])
                      if job["operator"] in by_operator else "-", error)
    if score:
        interval = (score.get("intervals") or {}).get("aggregate")
        table.caption = (f"S_agg {score_text(score.get('aggregate'))}"
                         + (f" (95% interval {interval[0]:.3f} to {interval[1]:.3f})"
                            if interval else "") + " under "
                         f"weights v{score['weights_version']}; correctness "
                         f"{score['correctness_rate']:.0%}, DSL adoption "
                         f"{score['dsl_adoption_rate']:.0%}"
                         + ("" if score["ranked"] else "; " + _not_ranked_because(detail)))
    out = console()
    # Lines a script can grep whole (soft wrap: never cut): the outcome first, each error last.
    out.print(f"submission {detail['id']} ({detail['team']}, {release['name']}@v"
              f"{release['version']}, {detail['hardware']}): "
              f"{outcome.get('summary') or detail['status']}", soft_wrap=True)
    out.print(table)
    if outcome.get("check") or detail.get("mode") == "check":
        out.print("check mode: evaluated like any submission but never ranked (no board, "
                  "export or analysis shows it); " + (
                      "an interpreter check uses no quota." if outcome.get("interpreter")
                      else "it used the daily check quota."), soft_wrap=True)
    if outcome.get("interpreter"):
        out.print("interpreter check: Triton's CPU interpreter ran this, not a GPU. No time is "
                  "measured and it is never ranked; the interpreter computes some bf16 "
                  "operations wrongly, so a failure here may pass on a GPU.", soft_wrap=True)
    for job in detail["jobs"]:
        if job["error"]:
            out.print(f"{job['operator']}: {job['status']}: {job['error']}", soft_wrap=True)
    for operator, r in failures:
        out.print(f"{operator} / {r['shape_id']}: {_shape_error(r)}", soft_wrap=True)


def _not_ranked_because(detail: dict[str, Any]) -> str:
    """Why a score is not ranked, as its submission's page says it."""
    outcome, score = detail.get("outcome") or {}, detail.get("score") or {}
    if detail.get("mode") == "check":
        return "never ranked (check mode)"
    if outcome.get("interpreter"):
        return "never ranked (interpreter check: no GPU time)"
    if score.get("lost_jobs") or not score.get("complete", True):
        return "not ranked until every job has ended"
    return "not ranked (a result is under review)"


def _shape_error(result: dict[str, Any]) -> str:
    """"correctness failed: max abs error 0.5 > ..." (the harness bounds the message)."""
    stage = result.get("failed_stage") or result["status"]
    return f"{stage} failed: {result.get('error') or 'no message'}"


def score_text(value: float | None) -> str:
    """A score as every page prints it: None is not timed (a correct result without a GPU
    time: not 0)."""
    return "not timed" if value is None else f"{value:.3f}"


def cmd_leaderboard(args: argparse.Namespace, err: Console) -> int:
    api = api_from_args(args)
    release = portal.find_release(api, args.release)
    board = args.regime or args.phase or "aggregate"
    data = portal.board(api, release, args.hardware, board, args.operator,
                        csv=args.format == "csv")
    if args.format == "csv":
        sys.stdout.write(data.decode("utf-8"))
        return EXIT_OK
    doc = json.loads(data)
    if args.format == "json":
        print_json(doc)
        return EXIT_OK
    title = f"{doc['release']} on {doc['hardware']}: " + (
        f"operator {args.operator}" if args.operator else f"{board} board") + \
        f" (weights v{doc['weights_version']})"
    table = Table(title=title)
    columns: tuple[str, ...]
    if args.operator:
        columns = ("rank", "team", "submission", "score", "date")
        rows = doc["rows"]
    else:
        columns = ("rank", "team", "submission", board, "correctness_rate", "dsl_adoption_rate",
                   "output_tokens", "agent", "model", "date", "badges")
        rows = doc["rows"] + doc["baselines"]
    for column in columns:
        table.add_column(column.replace("_rate", "").replace("_", " "))
    for row in rows:
        # A missing score is a correct result without a GPU time: not timed, not 0.
        table.add_row(*("not timed" if c in SCORE_COLUMNS and row.get(c) is None
                        else _with_interval(row) if c == board and row.get("interval")
                        else _cell(row.get(c)) for c in columns))
    if not rows:
        table.caption = "no ranked submissions yet"
    console().print(table)
    return EXIT_OK


SCORE_COLUMNS = ("score", "aggregate", "memory", "compute", "prefill", "decode")


def _with_interval(row: dict[str, Any]) -> str:
    """The board's own score and half its 95% interval ("tie" in the badges when it overlaps
    the next row's)."""
    value, high = row[row["ranked_by"]], row["interval"][1]
    return f"{value:.3f} ± {high - value:.3f}"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return str(value)


def cmd_evaluate_local(args: argparse.Namespace, err: Console) -> int:
    from atrex_cli.local import LocalRun, evaluate_local

    release_dir = Path(args.release)
    if not release_dir.is_dir():
        if "/" in args.release or args.release.startswith("."):
            raise CliError(f"no such release folder: {release_dir}")
        api = api_from_args(args)
        release = portal.find_release(api, args.release)
        target = _cache_dir() / f"{release['name']}-v{release['version']}"
        portal.download_bundle(api, release, None, target)
        release_dir = target / release["name"]
        err.print(f"public files of {release['name']}@v{release['version']} in {release_dir}")
    passed = evaluate_local(LocalRun(
        release=release_dir, operator=args.operator, candidate=args.candidate,
        shapes=args.shapes, device=args.device, trials=args.trials, timeout_s=args.timeout,
        json_out=args.json, dsl=args.dsl), err)
    return EXIT_OK if passed else EXIT_EVALUATION_FAILED


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "atrex" / "bundles"


def _loop(args: argparse.Namespace, err: Console) -> int:
    from atrex_cli.loop import cmd_loop

    return cmd_loop(args, err)


def _mcp(args: argparse.Namespace, err: Console) -> int:
    from atrex_cli.mcp_server import cmd_mcp

    return cmd_mcp(args, err)


COMMANDS = {"login": cmd_login, "logout": cmd_logout, "quota": cmd_quota,
            "problems": cmd_problems, "bundle": cmd_bundle, "submit": cmd_submit,
            "status": cmd_status, "profile": cmd_profile, "leaderboard": cmd_leaderboard,
            "evaluate-local": cmd_evaluate_local, "history": iteration.cmd_history,
            "compare": iteration.cmd_compare, "cancel": submissions.cmd_cancel,
            "submissions": submissions.cmd_submissions, "loop": _loop, "mcp": _mcp}
