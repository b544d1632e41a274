"""The portal as an MCP server (the official Python SDK, `mcp`): `atrex mcp`.

Two transports, one set of tools:

- **stdio** (`atrex mcp`): a local agent (Claude Code, Codex, any MCP client) starts it as a
  subprocess; it talks to the portal's REST API with the team token of `atrex login` or
  $ATREX_TOKEN, as every `atrex` command does.
- **streamable HTTP** (`atrex mcp --http`): the portal's MCP endpoint, `/mcp`, for agents
  that are not on the team's machine. Each caller sends its own team token
  (`Authorization: Bearer atx_...`), which the SDK's bearer middleware checks against the
  portal (`GET /api/token/`), and each tool call goes to the REST API with that token.

Why the tools call the REST API instead of the database: the API is where who may do what
is decided once (team visibility, token scopes, quotas, idempotency, the audit log), so an
MCP call can do exactly what the same token can do with `atrex` or curl, and the MCP process
holds no database credentials or hidden files. Why a process of its own beside Django rather
than a view: the portal is a WSGI application (gunicorn's sync workers, Django's development
server), and streamable HTTP holds a request open while a tool reports progress; an ASGI
process (uvicorn, from the SDK) serves that without tying up the web tier's workers.
`scripts/run-portal` starts it on the web port + 1; in production it runs beside gunicorn
behind the same proxy (docs/agents.md).

Long jobs: `wait_for_result` and `request_ncu_profile` report MCP progress notifications
(shapes done of total; the queue position while queued) while they wait, and return the
result; a wait that runs out says so and can be called again.
"""

import argparse
import functools
import hashlib
import io
import logging
import time
import zipfile
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import AnyHttpUrl
from rich.console import Console

from atrex_cli import portal
from atrex_cli.client import EXIT_OK, Api, CliError
from atrex_cli.config import resolve
from atrex_cli.feedback import feedback
from atrex_cli.iteration import best_entry

INSTRUCTIONS = """\
Atrex Portal: a leaderboard of GPU kernels scored against the hardware roofline on production
shapes. Work loop: list_problems -> get_problem (reference, input generator, shapes,
tolerance, regimes) -> write a Model(torch.nn.Module) whose forward runs in the DSL (Triton
by default) -> submit_kernel (mode "check" while iterating: evaluated on the GPU, never
ranked) -> wait_for_result -> revise from the per-shape errors, verdicts, attainments and
kernels -> operator_history / compare_submissions to see what improved -> submit_kernel
mode "ranked" once it is your best. A shape scores attainment = SOL time / measured time;
S_op is the median over the operator's shapes; a kernel that calls PyTorch or a vendor
library for the main compute is a fallback and scores 0. Your token's scope (read, check,
full) decides what you may submit: list_problems says which."""

WAIT_STEP_S = 10.0  # one long poll of the portal; progress is reported between them
MAX_WAIT_S = 3600.0


def cmd_mcp(args: argparse.Namespace, err: Console) -> int:
    config = resolve(args.server)
    if not args.http:
        api = Api(config.server, config.token, timeout_s=max(args.http_timeout, 75.0))
        server = build_server(lambda: api)
        server.run("stdio")
        return EXIT_OK
    upstream = (args.upstream or config.server).rstrip("/")
    public = args.public_url or f"http://{args.host}:{args.port}/mcp"
    err.print(f"MCP over streamable HTTP at {public}, tools calling {upstream}")
    http_server(upstream, public, args.http_timeout).run(
        "streamable-http", host=args.host, port=args.port, stateless_http=True)
    return EXIT_OK


def http_server(upstream: str, public_url: str, http_timeout: float = 30.0) -> MCPServer:
    """The HTTP server: every caller authenticated by its team token, each tool call made
    with that token."""

    def caller_api() -> Api:
        token = get_access_token()
        if token is None:  # the bearer middleware lets no request through without one
            raise CliError("no team token")
        return Api(upstream, token.token, timeout_s=max(http_timeout, 75.0))

    auth = AuthSettings(issuer_url=AnyHttpUrl(upstream), resource_server_url=AnyHttpUrl(
        public_url), validate_token_resource=False)
    return build_server(caller_api, token_verifier=PortalTokenVerifier(upstream), auth=auth)


class PortalTokenVerifier:
    """The SDK's TokenVerifier: a token is valid when the portal says whose it is
    (`GET /api/token/`). Answers are kept VERIFIED_TTL_S seconds, so a client's messages do
    not each cost a round trip; a revoked token still fails at once on every tool call,
    which the portal checks itself."""

    VERIFIED_TTL_S = 30.0

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self._known: dict[str, tuple[float, AccessToken]] = {}

    async def verify_token(self, token: str) -> AccessToken | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._known.get(key)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        try:
            info = await anyio.to_thread.run_sync(
                lambda: portal.token_info(Api(self.upstream, token)))
        except CliError:
            return None
        access = AccessToken(token=token, client_id=str(info["team"]),
                             scopes=[str(info["scope"])], subject=str(info["prefix"]))
        self._known[key] = (time.monotonic() + self.VERIFIED_TTL_S, access)
        return access


def build_server(api_of_call: Callable[[], Api], **options: Any) -> MCPServer:
    """The tools, each calling the portal through `api_of_call()` (the caller's token)."""
    # Warnings only: over stdio the log goes to the agent's stderr, and an INFO line per
    # HTTP request to the portal says nothing it needs.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    server = MCPServer("atrex-portal", instructions=INSTRUCTIONS, log_level="WARNING",
                       **options)
    reading = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    async def call(work: Callable[[Api], Any]) -> Any:
        api = api_of_call()  # here, in the request's context: its token
        try:
            return await anyio.to_thread.run_sync(lambda: work(api))
        except CliError as exc:
            raise ToolError(str(exc)) from None

    @server.tool(annotations=reading)
    async def list_problems() -> dict[str, Any]:
        """What this portal evaluates: each release (id, name@version, the DSLs it accepts)
        with its operators and their shape counts, the hardware targets, and your team,
        token scope (read: reads only; check: check submissions; full: ranked ones too)
        and today's quotas. Start here; then get_problem for one operator."""
        def work(api: Api) -> dict[str, Any]:
            releases = portal.releases(api)
            found = [{**r, "operators": [{"name": o["name"], "shape_count": o["shape_count"]}
                                         for o in portal.operators(api, r)]}
                     for r in releases]
            return {"releases": found, "token": portal.token_info(api),
                    "quota": api.get_json("/api/quota/", team=True)}
        result: dict[str, Any] = await call(work)
        return result

    @server.tool(annotations=reading)
    async def get_problem(release: str, operator: str) -> dict[str, Any]:
        """One operator as a problem: reference.py (the PyTorch semantics to match),
        input.py (_make_inputs), every public shape (init and input kwargs, phase, dev tier,
        and whether it is memory- or compute-bound on each hardware), the correctness
        tolerance (|out - ref| <= atol + rtol*|ref|), its weight in the aggregate score,
        the hardware peaks and how a shape is scored. `release`: an id, a name (newest
        version) or name@vN. Write a file defining `class Model(torch.nn.Module)` with the
        reference's __init__ and forward signatures whose compute runs in the DSL."""
        def work(api: Api) -> dict[str, Any]:
            return portal.problem(api, portal.find_release(api, release), operator)
        result: dict[str, Any] = await call(work)
        return result

    @server.tool()
    async def submit_kernel(release: str, hardware: str, sources: dict[str, str],
                            mode: str = "check", dsl: str = "", agent: str = "",
                            model: str = "", harness: str = "", input_tokens: int | None = None,
                            output_tokens: int | None = None, notes: str = "",
                            idempotency_key: str = "") -> dict[str, Any]:
        """Upload kernels for evaluation. `sources` maps operator name -> the Python source
        of its Model. `mode`: "check" (evaluated on the GPU like any, never ranked; the
        larger daily check quota; needs a check or full token) or "ranked" (enters the
        boards; needs a full token). `dsl`: the files' DSL (default: the release's first;
        or "op=dsl,op2=dsl"). Say who made it: agent, model, harness (e.g. claude-code) and
        the tokens read and written. `idempotency_key`: reuse it when you retry the same
        upload after an error, so it is made once. Returns the submission (its id);
        then call wait_for_result."""
        if mode not in ("check", "ranked"):
            raise ToolError('mode: "check" or "ranked"')
        if not sources:
            raise ToolError("sources: give at least one operator's source")

        def work(api: Api) -> dict[str, Any]:
            chosen = portal.find_release(api, release)
            fields = {"release": str(chosen["id"]), "hardware": hardware, "mode": mode,
                      "dsl": dsl, "agent": agent, "model": model, "harness": harness,
                      "notes": notes}
            for name, value in (("input_tokens", input_tokens),
                                ("output_tokens", output_tokens)):
                if value is not None:
                    fields[name] = str(value)
            name, content = sources_archive(sources)
            key = idempotency_key or "mcp-" + hashlib.sha256(
                repr((sorted(sources.items()), sorted(fields.items()), time.time_ns()))
                .encode()).hexdigest()[:32]
            created: dict[str, Any] = api.post_multipart(
                "/api/submissions/", fields, name, content, headers={"Idempotency-Key": key})
            return {"submission": created["id"], "mode": created["mode"],
                    "status": created["status"], "idempotency_key": key,
                    "jobs": [{"operator": j["operator"], "shapes_total": j["shapes_total"]}
                             for j in created["jobs"]]}
        result: dict[str, Any] = await call(work)
        return result

    @server.tool(annotations=reading)
    async def wait_for_result(submission_id: int, timeout_s: float = 900.0,
                              ctx: Context | None = None) -> dict[str, Any]:
        """Wait until the submission's evaluation has ended and its score is computed,
        reporting progress (shapes done of total, queue position), then return its result
        as get_result does. If `timeout_s` (at most 3600) runs out first, the answer has
        "settled": false; call again to keep waiting."""
        deadline = time.monotonic() + min(max(timeout_s, 0.0), MAX_WAIT_S)
        while True:
            step = max(0.0, min(WAIT_STEP_S, deadline - time.monotonic()))
            detail: dict[str, Any] = await call(functools.partial(
                portal.submission, submission_id=submission_id, wait=step))
            if ctx is not None:
                done = sum(j["shapes_done"] for j in detail["jobs"])
                total = sum(j["shapes_total"] for j in detail["jobs"]) or None
                await ctx.report_progress(done, total, progress_message(detail))
            if feedback(detail, None)["settled"] or time.monotonic() >= deadline:
                break
        result: dict[str, Any] = await call(
            lambda api: feedback(detail, portal.profile(api, submission_id)))
        return result

    @server.tool(annotations=reading)
    async def get_result(submission_id: int) -> dict[str, Any]:
        """A submission's result now: status and summary, S_agg and S_op with their 95%
        intervals, and per shape its status, error (traceback tail for a compile error,
        max errors for a wrong result), verdict (native, mixed, fallback-torch/vendor/
        compiled) with the foreign kernels, median time, attainment, regime and the kernels
        that took the device time. `settled` false: still being evaluated."""
        def work(api: Api) -> dict[str, Any]:
            return feedback(portal.submission(api, submission_id),
                            portal.profile(api, submission_id))
        result: dict[str, Any] = await call(work)
        return result

    @server.tool(annotations=reading)
    async def get_profile(submission_id: int) -> dict[str, Any]:
        """The submission's full per-shape profile: every kernel of one observed forward
        with launches, device time and share, the DSL ratio, attainment with and without the
        launch floor, and the achieved fraction of peak bandwidth or FLOP rate."""
        result: dict[str, Any] = await call(
            lambda api: portal.profile(api, submission_id) or {})
        return result

    @server.tool()
    async def request_ncu_profile(submission_id: int, operator: str, shape: str,
                                  wait: bool = True, timeout_s: float = 600.0,
                                  ctx: Context | None = None) -> dict[str, Any]:
        """Nsight Compute hardware counters of one public shape of a submission (a few a
        day): per kernel its duration, DRAM bytes and share of peak, occupancy, SM and
        tensor-pipe use, L2 hit rate and what limits it. With `wait` it waits for the GPU
        worker (progress while queued) and returns the profile."""
        made: dict[str, Any] = await call(
            lambda api: portal.ncu_profile_request(api, submission_id, operator, shape))
        deadline = time.monotonic() + min(max(timeout_s, 0.0), MAX_WAIT_S)
        while wait and made["status"] == "queued" and time.monotonic() < deadline:
            if ctx is not None:
                await ctx.report_progress(0, 1, f"ncu profile {made['id']} queued")
            await anyio.sleep(2.0)
            found = await call(lambda api: portal.ncu_profiles(api, submission_id))
            made = next((p for p in found if p["id"] == made["id"]), made)
        return made

    @server.tool(annotations=reading)
    async def compare_submissions(a: int, b: int, include_diff: bool = True) -> dict[str, Any]:
        """Submission B against A, both your team's: per operator both S_op and the delta,
        whether the source changed (and its unified diff); per shape both times, the
        speedup (time A / time B), both attainments and verdicts."""
        found: dict[str, Any] = await call(lambda api: portal.compare(api, a, b))
        if not include_diff:
            for op in found.get("operators") or []:
                op.pop("diff", None)
        return found

    @server.tool(annotations=reading)
    async def operator_history(operator: str, release: str = "",
                               hardware: str = "") -> dict[str, Any]:
        """Your team's submissions of one operator, oldest first (S_op, correct and native
        shapes, verdicts, whether the source changed), and `best`: the entry with the
        highest S_op (then the most correct shapes, then the newest)."""
        def work(api: Api) -> dict[str, Any]:
            params = {}
            if release:
                params["release"] = str(portal.find_release(api, release)["id"])
            if hardware:
                params["hardware"] = hardware
            doc = portal.operator_history(api, operator, params)
            if "best" not in doc:  # a portal from before `best` was in the answer
                doc["best"] = best_entry(doc["entries"])
            return doc
        result: dict[str, Any] = await call(work)
        return result

    @server.tool(annotations=reading)
    async def leaderboard(release: str, hardware: str = "H200", board: str = "aggregate",
                          operator: str = "") -> dict[str, Any]:
        """A public board: `board` aggregate, memory, compute, prefill or decode, or one
        operator's board with `operator`. Rows: rank, team, submission, score with its 95%
        interval, correctness and DSL adoption rates, agent, model and tokens; and the
        unranked baseline rows (PyTorch eager, torch.compile, production timings)."""
        import json

        def work(api: Api) -> dict[str, Any]:
            data = portal.board(api, portal.find_release(api, release), hardware, board,
                                operator or None, csv=False)
            doc: dict[str, Any] = json.loads(data)
            return doc
        result: dict[str, Any] = await call(work)
        return result

    @server.tool()
    async def cancel_submission(submission_id: int) -> dict[str, Any]:
        """Cancel a submission's queued and running jobs (a check with a check token; a
        ranked one needs a full token). It still counts against today's quota."""
        done: dict[str, Any] = await call(lambda api: portal.cancel(api, submission_id))
        return {"submission": done["id"], "outcome": done["outcome"],
                "jobs": [{"operator": j["operator"], "status": j["status"]}
                         for j in done["jobs"]]}

    @server.tool(annotations=reading)
    async def list_submissions(limit: int = 20) -> dict[str, Any]:
        """Your team's newest submissions (at most 100): id, date, release, hardware, mode,
        outcome summary, operators, agent, model, harness."""
        found: list[dict[str, Any]] = await call(portal.submissions)
        return {"submissions": [
            {"id": s["id"], "created_at": s["created_at"], "release": s["release"],
             "hardware": s["hardware"], "mode": s["mode"], "outcome": s["outcome"]["summary"],
             "operators": [j["operator"] for j in s["jobs"]], "agent": s.get("agent"),
             "model": s.get("model"), "harness": s.get("harness")}
            for s in found[:max(0, min(limit, 100))]]}

    return server


def sources_archive(sources: dict[str, str]) -> tuple[str, bytes]:
    """One operator's source as `<operator>.py`, several as a zip of them."""
    for name in sources:
        if not name or "/" in name or "\\" in name or name.startswith("."):
            raise CliError(f"sources: {name!r} is not an operator name")
    if len(sources) == 1:
        [(name, text)] = sources.items()
        return f"{name}.py", text.encode("utf-8")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, text in sorted(sources.items()):
            archive.writestr(f"{name}.py", text)
    return "kernels.zip", buffer.getvalue()


def progress_message(detail: dict[str, Any]) -> str:
    parts = []
    for job in detail["jobs"]:
        place = job.get("queue")
        where = f", number {place['position']} in the queue" if place else ""
        parts.append(f"{job['operator']}: {job['status']} {job['shapes_done']}/"
                     f"{job['shapes_total']}{where}")
    return "; ".join(parts)
