"""The portal's MCP tools through the SDK's own client against a live portal: `atrex mcp`
over stdio (as Claude Code or Codex starts it) and the HTTP endpoint (`atrex mcp --http`,
each caller with its own team token)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from django.test import override_settings
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from leaderboard.services import weight_set_from_release
from portal.accounts.models import TokenScope, token_create
from portal.audit.models import AuditEntry
from submissions.models import Submission
from tests.cli.helpers import NATIVE
from tests.paths import REPO
from tests.worker import pipeline_workers
from tests.world import World

pytestmark = [pytest.mark.django_db(transaction=True)]

TOOLS = {"list_problems", "get_problem", "submit_kernel", "wait_for_result", "get_result",
         "get_profile", "request_ncu_profile", "compare_submissions", "operator_history",
         "leaderboard", "cancel_submission", "list_submissions"}


@pytest.fixture
def tokens(live_server: Any, world: World) -> dict[str, str]:
    weight_set_from_release(world.release)
    return {scope: token_create(team=world.red, name=f"agent-{scope}", created_by=world.ruby,
                                scope=scope)[1] for scope in TokenScope.values}


def stdio_params(server: str, token: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATREX_")}
    env.update(ATREX_SERVER=server, ATREX_TOKEN=token, ATREX_CONFIG=os.devnull)
    return StdioServerParameters(command=sys.executable, args=["-m", "atrex_cli", "mcp"],
                                 env=env, cwd=str(REPO))


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content
    found: dict[str, Any] = result.structured_content
    return found


def error_text(result: Any) -> str:
    assert result.is_error, result.structured_content
    return " ".join(getattr(c, "text", "") for c in result.content)


@contextmanager
def http_mcp(server: str, tmp_path: Path) -> Iterator[str]:
    """`atrex mcp --http` on a free port, as scripts/run-portal starts it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATREX_")}
    log = tmp_path / "mcp.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "atrex_cli", "mcp", "--http", "--server", server,
             "--port", str(port)], cwd=REPO, env={**env, "ATREX_CONFIG": os.devnull},
            stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the MCP server did not start:\n{log.read_text()}") \
                        from None
                time.sleep(0.3)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=30)


async def http_client(stack: AsyncExitStack, url: str, token: str) -> Client:
    http = await stack.enter_async_context(httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(120.0)))
    return await stack.enter_async_context(
        Client(streamable_http_client(url, http_client=http)))


@override_settings(ATREX_SHAPE_FILTER="dev-*")
def test_stdio_tools_take_an_agent_from_the_problem_to_a_scored_check(
        live_server: Any, tokens: dict[str, str], world: World, tmp_path: Path) -> None:
    source = NATIVE.read_text()

    async def session() -> dict[str, Any]:
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        async with Client(stdio_params(live_server.url, tokens["check"])) as client:
            listed = await client.list_tools()
            names = {t.name for t in listed.tools}
            descriptions = {t.name: t.description or "" for t in listed.tools}
            overview = structured(await client.call_tool("list_problems", {}))
            problem = structured(await client.call_tool(
                "get_problem", {"release": "atrex-fixture", "operator": "rms_norm"}))
            refused = await client.call_tool("submit_kernel", {
                "release": "atrex-fixture", "hardware": "H200", "mode": "ranked",
                "sources": {"rms_norm": source}})
            with pipeline_workers(tmp_path):  # before the upload: a worker purges its queue
                made = structured(await client.call_tool("submit_kernel", {
                    "release": "atrex-fixture", "hardware": "H200", "mode": "check",
                    "sources": {"rms_norm": source}, "agent": "test-agent", "model": "m1",
                    "harness": "claude-code", "input_tokens": 1200, "output_tokens": 340}))
                result = structured(await client.call_tool(
                    "wait_for_result", {"submission_id": made["submission"], "timeout_s": 240},
                    progress_callback=on_progress))
            history = structured(await client.call_tool("operator_history",
                                                         {"operator": "rms_norm"}))
            listed_submissions = structured(await client.call_tool("list_submissions", {}))
        return {"names": names, "descriptions": descriptions, "overview": overview,
                "problem": problem, "refused": refused, "made": made, "result": result,
                "progress": progress, "history": history, "listed": listed_submissions}

    got = asyncio.run(session())
    assert got["names"] == TOOLS
    assert all(len(text) > 80 for text in got["descriptions"].values())  # written for agents
    assert got["overview"]["token"]["scope"] == "check"
    assert "atrex-fixture" in {r["name"] for r in got["overview"]["releases"]}
    problem = got["problem"]
    assert "class Model" in problem["files"]["reference.py"]
    assert "_make_inputs" in problem["files"]["input.py"]
    hidden = world.release.operators.get(name="rms_norm").hidden
    assert problem["tolerance"] == {"atol": hidden.atol, "rtol": hidden.rtol}
    assert {s["shape_id"] for s in problem["shapes"]} >= {"dev-t4-h256", "dev-t3-h200"}
    assert "checks only" in error_text(got["refused"])  # the token's scope, in MCP too

    result = got["result"]
    assert result["settled"] and result["status"] == "scored"
    [operator] = result["operators"]
    assert operator["correct"] == 2 and operator["native"] == 2
    assert {s["verdict"] for s in operator["shapes"]} == {"unverified-cpu"}
    assert got["progress"] and got["progress"][-1][0] == 2  # shapes done, as notifications
    submission = Submission.objects.get(pk=got["made"]["submission"])
    assert (submission.mode, submission.harness, submission.input_tokens,
            submission.output_tokens) == ("check", "claude-code", 1200, 340)
    assert got["history"]["best"]["submission"] == submission.pk
    assert got["listed"]["submissions"][0]["id"] == submission.pk
    used = AuditEntry.objects.get(action="submission.create", target=f"submission:{submission.pk}")
    assert used.after["scope"] == "check" and used.after["name"] == "agent-check"
    assert AuditEntry.objects.filter(action="token.refused").count() == 1


def test_http_endpoint_authenticates_each_caller_by_team_token(
        live_server: Any, tokens: dict[str, str], world: World, tmp_path: Path) -> None:
    existing = Submission.objects.create(team=world.red, release=world.release,
                                         hardware=world.h200, mode="check")

    async def session(url: str) -> dict[str, Any]:
        async with httpx2.AsyncClient() as bare:
            unauthenticated = await bare.post(url, json={"jsonrpc": "2.0", "id": 1,
                                                         "method": "tools/list"},
                                              headers={"Accept": "application/json, "
                                                       "text/event-stream"})
            forged = await bare.post(url, json={"jsonrpc": "2.0", "id": 1,
                                                "method": "tools/list"},
                                     headers={"Authorization": "Bearer atx_not-a-token",
                                              "Accept": "application/json, text/event-stream"})
        async with AsyncExitStack() as stack:
            reader = await http_client(stack, url, tokens["read"])
            names = {t.name for t in (await reader.list_tools()).tools}
            overview = structured(await reader.call_tool("list_problems", {}))
            read_refused = await reader.call_tool("submit_kernel", {
                "release": "atrex-fixture", "hardware": "H200", "mode": "check",
                "sources": {"rms_norm": NATIVE.read_text()}})
            result = structured(await reader.call_tool("get_result",
                                                       {"submission_id": existing.pk}))
            checker = await http_client(stack, url, tokens["check"])
            ranked_refused = await checker.call_tool("submit_kernel", {
                "release": "atrex-fixture", "hardware": "H200", "mode": "ranked",
                "sources": {"rms_norm": NATIVE.read_text()}})
            full = await http_client(stack, url, tokens["full"])
            ranked = structured(await full.call_tool("submit_kernel", {
                "release": "atrex-fixture", "hardware": "H200", "mode": "ranked",
                "sources": {"rms_norm": NATIVE.read_text()}, "harness": "codex"}))
            cancelled = structured(await full.call_tool("cancel_submission",
                                                        {"submission_id": ranked["submission"]}))
        return {"unauthenticated": unauthenticated.status_code, "forged": forged.status_code,
                "names": names, "overview": overview, "read_refused": read_refused,
                "result": result, "ranked_refused": ranked_refused, "ranked": ranked,
                "cancelled": cancelled}

    with http_mcp(live_server.url, tmp_path) as url:
        got = asyncio.run(session(url))
    assert got["unauthenticated"] == 401 and got["forged"] == 401
    assert got["names"] == TOOLS
    assert got["overview"]["token"]["scope"] == "read"
    assert "read-only" in error_text(got["read_refused"])
    assert got["result"]["submission"] == existing.pk and got["result"]["settled"]
    assert "checks only" in error_text(got["ranked_refused"])
    made = Submission.objects.get(pk=got["ranked"]["submission"])
    assert (made.mode, made.harness, made.team) == ("ranked", "codex", world.red)
    assert got["cancelled"]["jobs"][0]["status"] == "cancelled"
    assert Submission.objects.filter(mode="ranked").count() == 1  # nothing else was made
    assert json.dumps(got["result"])  # plain JSON for the agent
