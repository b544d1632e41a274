"""`atrex loop`: a measure-revise loop around a generator command the team supplies.

Each round the generator (any agent CLI or script, run with `sh -c`) gets the operator's
files, the best kernel so far and the last result's feedback (`atrex_cli/feedback.py`:
per-shape errors, attainments, verdicts, kernels and device times, the regime) and writes a
new candidate. The loop submits it as a check, waits for it and decides:

- accepted only when every shape is correct and native and its S_op is better than the
  best's beyond both 95% intervals (its interval's low end above the best's high end);
  the first correct and native candidate is accepted when there is no best yet;
- otherwise rejected, with the reason (incorrect, not native, within the interval, not
  better, not timed, no candidate, a source already tried).

After `--patience` rounds without an accepted revision the generator's context restarts
("optimization dropout", after the Atrex Kernel Agent): its next input marks
`fresh_context`, drops the recent rounds' history and carries the best kernel with a summary
of the whole audit trail instead, so a generator that keeps a conversation starts a new one.
Every revision, result and decision stays in the work folder (`rounds/NNN/`) and in
`audit.jsonl`; `--final-ranked` submits the best as a ranked submission at the end.

The generator's contract (docs/agents.md): its stdin and $ATREX_LOOP_INPUT hold the round's
input JSON (`atrex.loop-input/1`); it writes the candidate to $ATREX_LOOP_OUTPUT and may
write `{"input_tokens": N, "output_tokens": M, "model": "..."}` to $ATREX_LOOP_USAGE, which
the submission records beside the agent, model and harness.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from atrex_cli import portal
from atrex_cli.client import EXIT_EVALUATION_FAILED, EXIT_OK, Api, CliError
from atrex_cli.feedback import feedback
from atrex_cli.terminal import api_from_args, print_json

INPUT_SCHEMA = "atrex.loop-input/1"
SUMMARY_SCHEMA = "atrex.loop-summary/1"
POLL_S = 10.0  # one long poll of the portal while waiting for a result


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    loop = commands.add_parser(
        "loop", parents=[common],
        help="measure-revise loop around a generator command (checks; the best, ranked)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    loop.add_argument("--release", required=True, help="id, name or name@vN")
    loop.add_argument("--operator", required=True)
    loop.add_argument("--hardware", required=True)
    loop.add_argument("--generator", required=True, metavar="CMD",
                      help="the command that writes a candidate ($ATREX_LOOP_OUTPUT) from the "
                           "round's input ($ATREX_LOOP_INPUT, also on stdin); run with sh -c "
                           "in the round's folder")
    loop.add_argument("--rounds", type=int, default=10, help="generator rounds (default 10)")
    loop.add_argument("--patience", type=int, default=3, metavar="K",
                      help="rounds without an accepted revision before the generator's "
                           "context restarts from the best (dropout; default 3)")
    loop.add_argument("--start", type=Path, default=None, metavar="FILE",
                      help="a first kernel, evaluated before round 1 (default: none; the "
                           "generator starts from the reference)")
    loop.add_argument("--workdir", type=Path, default=None,
                      help="where rounds and the audit trail go (default ./atrex-loop-OP-TIME)")
    loop.add_argument("--final-ranked", action="store_true",
                      help="submit the best as a ranked submission at the end (a full token)")
    loop.add_argument("--dsl", default="", help="the candidates' DSL (default: the release's)")
    loop.add_argument("--agent", default="", help="recorded with each submission")
    loop.add_argument("--model", default="", help="recorded with each submission")
    loop.add_argument("--harness", default="atrex-loop", help="recorded with each submission")
    loop.add_argument("--generator-timeout", type=float, default=1800.0, metavar="S")
    loop.add_argument("--wait-timeout", type=float, default=3600.0, metavar="S",
                      help="give up on one evaluation after S seconds (the round is rejected)")
    loop.add_argument("--format", choices=("json",), default="json",
                      help="the summary on stdout is JSON")


@dataclass
class Best:
    round: int
    submission: int
    sha256: str
    s_op: float | None
    interval: list[float] | None
    path: str


@dataclass
class Decision:
    accepted: bool
    reason: str


@dataclass
class LoopState:
    best: Best | None = None
    since_improvement: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)  # since the last dropout
    trail: list[dict[str, Any]] = field(default_factory=list)  # every round, for summaries
    tried: dict[str, int] = field(default_factory=dict)  # source sha256 -> its round
    dropouts: int = 0
    fresh_context: bool = True  # the first round starts with nothing to remember
    last_result: dict[str, Any] | None = None  # the last evaluated candidate's feedback


def decide(result: dict[str, Any], operator: str, best: Best | None) -> Decision:
    """Accept a revision only when it is correct, native and better than the best beyond
    both intervals (see the module docstring); `result` is its feedback."""
    if not result["settled"]:
        return Decision(False, "the evaluation did not end within --wait-timeout")
    op = next((o for o in result["operators"] if o["operator"] == operator), None)
    if op is None or not op["shapes"]:
        return Decision(False, f"not evaluated: {result.get('summary') or 'no shape ran'}")
    total = len(op["shapes"])
    if op["correct"] < total:
        failed = next(s for s in op["shapes"] if s["status"] != "passed")
        return Decision(False, f"incorrect: {total - op['correct']} of {total} shapes failed "
                               f"(first: {failed['shape_id']}, {failed['failed_stage']}: "
                               f"{(failed['error'] or '')[:200]})")
    if op["native"] < total:
        verdicts = sorted({s["verdict"] or "-" for s in op["shapes"] if not s["native"]})
        return Decision(False, f"not native: {total - op['native']} of {total} shapes "
                               f"({', '.join(verdicts)})")
    s_op, interval = op["s_op"], op["s_op_interval"]
    if best is None:
        return Decision(True, "the first correct and native kernel" + _score_words(s_op,
                                                                                  interval))
    if s_op is None:
        return Decision(False, "correct and native, but not timed (no GPU): nothing shows "
                               "it is better than the best")
    if best.s_op is None:
        return Decision(True, "the first timed kernel" + _score_words(s_op, interval))
    low = interval[0] if interval else s_op
    best_high = best.interval[1] if best.interval else best.s_op
    if low > best_high:
        return Decision(True, f"better beyond the interval: S_op {_words(s_op, interval)} "
                              f"against the best's {_words(best.s_op, best.interval)}")
    if s_op > best.s_op:
        return Decision(False, f"better but within the interval: S_op "
                               f"{_words(s_op, interval)} against the best's "
                               f"{_words(best.s_op, best.interval)}")
    return Decision(False, f"not better: S_op {_words(s_op, interval)} against the best's "
                           f"{_words(best.s_op, best.interval)}")


def _words(value: float | None, interval: list[float] | None) -> str:
    if value is None:
        return "not timed"
    return f"{value:.4f}" + (f" [{interval[0]:.4f}, {interval[1]:.4f}]" if interval else "")


def _score_words(value: float | None, interval: list[float] | None) -> str:
    return f" (S_op {_words(value, interval)})"


def audit_summary(trail: list[dict[str, Any]], best: Best | None) -> str:
    """What the whole trail says, in a few lines: what a restarted generator keeps."""
    accepted = [e for e in trail if e.get("decision") == "accepted"]
    rejected = [e for e in trail if e.get("decision") == "rejected"]
    kinds: dict[str, int] = {}
    for e in rejected:
        kind = str(e.get("reason", "")).split(":")[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    lines = [f"{len(trail)} rounds so far: {len(accepted)} accepted, {len(rejected)} rejected"
             + (f" ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})" if kinds
                else "") + "."]
    if accepted:
        lines.append("accepted revisions: " + "; ".join(
            f"round {e['round']} (submission {e['submission']}, S_op "
            f"{_words(e.get('s_op'), e.get('interval'))})" for e in accepted))
    if best is not None:
        lines.append(f"best: round {best.round}, submission {best.submission}, S_op "
                     f"{_words(best.s_op, best.interval)}; its source is best.py.")
    else:
        lines.append("no correct and native kernel yet.")
    return "\n".join(lines)


class Loop:
    """One run of `atrex loop` (see the module docstring)."""

    def __init__(self, args: argparse.Namespace, api: Api, err: Console) -> None:
        self.args, self.api, self.err = args, api, err
        self.run_id = uuid.uuid4().hex[:12]
        stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        self.workdir: Path = (args.workdir or Path(f"atrex-loop-{args.operator}-{stamp}"))
        self.workdir = self.workdir.resolve()
        self.state = LoopState()
        self.release: dict[str, Any] = {}
        self.problem_dir = self.workdir / "problem"

    # -- the run -----------------------------------------------------------------------

    def run(self) -> dict[str, Any]:
        self.release = portal.find_release(self.api, self.args.release)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._write_problem()
        if self.args.start is not None:
            self._evaluate_round(0, self.args.start.read_text(encoding="utf-8"), {}, 0.0, 0)
        for number in range(1, self.args.rounds + 1):
            self._round(number)
        final = self._final_ranked() if self.args.final_ranked else None
        return self._summary(final)

    def _round(self, number: int) -> None:
        state = self.state
        if state.since_improvement >= self.args.patience > 0:
            state.dropouts += 1
            state.fresh_context, state.since_improvement, state.history = True, 0, []
            self._audit({"event": "dropout", "round": number, "reason": (
                f"{self.args.patience} rounds without an accepted revision: the generator's "
                "context restarts from the best kernel and the audit's summary")})
            self.err.print(f"round {number}: dropout, the generator starts afresh from the best")
        folder = self.workdir / "rounds" / f"{number:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        inputs = self._inputs(number, folder)
        fresh = state.fresh_context
        state.fresh_context = False
        started = time.monotonic()
        code = self._generate(folder, inputs)
        generator_s = time.monotonic() - started
        usage = _read_usage(folder / "usage.json")
        candidate = folder / "candidate.py"
        entry_base = {"round": number, "fresh_context": fresh, "generator_exit": code,
                      "generator_s": round(generator_s, 2), **usage}
        if not candidate.is_file():
            self._reject(entry_base, f"no candidate: the generator wrote no {candidate.name} "
                                     f"(exit {code}; see generator.log)")
            return
        source = candidate.read_text(encoding="utf-8", errors="replace")
        sha = hashlib.sha256(source.encode()).hexdigest()
        if sha in state.tried:
            self._reject({**entry_base, "sha256": sha},
                         f"a source already tried (round {state.tried[sha]}): not submitted")
            return
        self._evaluate_round(number, source, usage, generator_s, code, fresh=fresh)

    def _evaluate_round(self, number: int, source: str, usage: dict[str, Any],
                        generator_s: float, code: int, fresh: bool = False) -> None:
        state = self.state
        sha = hashlib.sha256(source.encode()).hexdigest()
        state.tried[sha] = number
        folder = self.workdir / "rounds" / f"{number:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "candidate.py").write_text(source, encoding="utf-8")
        started = time.monotonic()
        entry: dict[str, Any] = {"round": number, "fresh_context": fresh, "sha256": sha,
                                 "generator_exit": code, "generator_s": round(generator_s, 2),
                                 **usage}
        try:
            detail = self._submit_check(number, source, usage)
        except CliError as exc:
            self._reject(entry, f"not submitted: {exc}")
            return
        entry["submission"] = detail["id"]
        self.err.print(f"round {number}: check submission {detail['id']}, waiting")
        detail = self._wait(detail["id"])
        result = feedback(detail, portal.profile(self.api, detail["id"]))
        (folder / "result.json").write_text(json.dumps(result, indent=2) + "\n")
        entry["evaluation_s"] = round(time.monotonic() - started, 2)
        op: dict[str, Any] = next((o for o in result["operators"]
                                   if o["operator"] == self.args.operator), {})
        entry.update(status=result["status"], summary=result["summary"],
                     s_op=op.get("s_op"), interval=op.get("s_op_interval"),
                     correct=op.get("correct"), native=op.get("native"),
                     shapes=len(op.get("shapes") or []))
        decision = decide(result, self.args.operator, state.best)
        state.last_result = result
        if decision.accepted:
            best_path = self.workdir / "best.py"
            best_path.write_text(source, encoding="utf-8")
            state.best = Best(round=number, submission=detail["id"], sha256=sha,
                              s_op=op.get("s_op"), interval=op.get("s_op_interval"),
                              path=str(best_path))
            state.since_improvement = 0
            self._record(entry, "accepted", decision.reason)
        else:
            self._reject(entry, decision.reason)

    def _reject(self, entry: dict[str, Any], reason: str) -> None:
        self.state.since_improvement += 1
        self._record(entry, "rejected", reason)

    def _record(self, entry: dict[str, Any], decision: str, reason: str) -> None:
        state = self.state
        best = state.best
        entry = {**entry, "decision": decision, "reason": reason,
                 "best_after": asdict(best) if best is not None else None}
        state.history.append(entry)
        state.trail.append(entry)
        self._audit({"event": "round", **entry})
        folder = self.workdir / "rounds" / f"{entry['round']:03d}"
        (folder / "decision.json").write_text(json.dumps(entry, indent=2) + "\n")
        self.err.print(f"round {entry['round']}: {decision}: {reason}")

    # -- what the generator gets -----------------------------------------------------

    def _write_problem(self) -> None:
        problem = portal.problem(self.api, self.release, self.args.operator)
        self.problem_dir.mkdir(parents=True, exist_ok=True)
        for name, content in problem["files"].items():
            (self.problem_dir / name).write_text(content, encoding="utf-8")
        (self.problem_dir / "problem.json").write_text(json.dumps(
            {k: v for k, v in problem.items() if k != "files"}, indent=2) + "\n")

    def _inputs(self, number: int, folder: Path) -> dict[str, Any]:
        state = self.state
        fresh = state.fresh_context
        if state.best is not None:
            shutil.copyfile(state.best.path, folder / "best.py")
        last = state.last_result
        inputs = {
            "schema": INPUT_SCHEMA, "round": number, "rounds": self.args.rounds,
            "operator": self.args.operator,
            "release": {k: self.release[k] for k in ("id", "name", "version")},
            "hardware": self.args.hardware, "dsl": self.args.dsl or self.release["dsl"],
            "fresh_context": fresh,
            "problem_dir": str(self.problem_dir),
            "best": {**asdict(state.best), "path": str(folder / "best.py")}
            if state.best is not None else None,
            "feedback": last,
            "history": [_brief(e) for e in state.history],
            "audit_summary": audit_summary(state.trail, state.best) if fresh and state.trail
            else None,
            "output": str(folder / "candidate.py"),
            "usage": str(folder / "usage.json"),
        }
        (folder / "input.json").write_text(json.dumps(inputs, indent=2) + "\n")
        if last is not None:
            (folder / "feedback.json").write_text(json.dumps(last, indent=2) + "\n")
        return inputs

    def _generate(self, folder: Path, inputs: dict[str, Any]) -> int:
        env = {**os.environ, "ATREX_LOOP_INPUT": str(folder / "input.json"),
               "ATREX_LOOP_OUTPUT": inputs["output"], "ATREX_LOOP_USAGE": inputs["usage"],
               "ATREX_LOOP_ROUND": str(inputs["round"]),
               "ATREX_LOOP_FRESH_CONTEXT": "1" if inputs["fresh_context"] else "0",
               "ATREX_LOOP_PROBLEM": inputs["problem_dir"]}
        # The generator's own client must not reuse this loop's token by accident: it is
        # handed nothing of the portal (a generator that submits breaks the audit trail).
        env.pop("ATREX_TOKEN", None)
        with open(folder / "generator.log", "wb") as log:
            try:
                done = subprocess.run(["sh", "-c", self.args.generator], cwd=folder, env=env,
                                      input=json.dumps(inputs).encode(), stdout=log,
                                      stderr=subprocess.STDOUT,
                                      timeout=self.args.generator_timeout)
            except subprocess.TimeoutExpired:
                log.write(f"\n[atrex loop] timed out after {self.args.generator_timeout} s\n"
                          .encode())
                return 124
        return done.returncode

    # -- the portal --------------------------------------------------------------------

    def _fields(self, mode: str, usage: dict[str, Any]) -> dict[str, str]:
        fields = {"release": str(self.release["id"]), "hardware": self.args.hardware,
                  "operator": self.args.operator, "mode": mode, "dsl": self.args.dsl,
                  "agent": self.args.agent, "model": usage.get("model") or self.args.model,
                  "harness": self.args.harness,
                  "notes": f"atrex loop {self.run_id}"}
        for name in ("input_tokens", "output_tokens"):
            if usage.get(name) is not None:
                fields[name] = str(usage[name])
        return fields

    def _submit_check(self, number: int, source: str, usage: dict[str, Any]) -> dict[str, Any]:
        from atrex_cli.main import upload_once

        return upload_once(self.api, self._fields("check", usage), f"{self.args.operator}.py",
                           source.encode(), f"loop-{self.run_id}-r{number}", self.err)

    def _wait(self, submission_id: int) -> dict[str, Any]:
        deadline = time.monotonic() + self.args.wait_timeout
        while True:
            step = max(0.0, min(POLL_S, deadline - time.monotonic()))
            detail = portal.submission(self.api, submission_id, wait=step)
            if feedback(detail, None)["settled"] or time.monotonic() >= deadline:
                return detail

    def _final_ranked(self) -> dict[str, Any] | None:
        best = self.state.best
        if best is None:
            return {"submitted": False, "reason": "no accepted kernel"}
        from atrex_cli.main import upload_once

        try:
            created = upload_once(self.api, self._fields("ranked", {}),
                                  f"{self.args.operator}.py",
                                  Path(best.path).read_bytes(), f"loop-{self.run_id}-final",
                                  self.err)
        except CliError as exc:
            self._audit({"event": "final", "submitted": False, "reason": str(exc)})
            return {"submitted": False, "reason": str(exc)}
        result = feedback(self._wait(created["id"]), portal.profile(self.api, created["id"]))
        final = {"submitted": True, "submission": created["id"], "status": result["status"],
                 "summary": result["summary"],
                 "s_op": (result["score"] or {}).get("by_operator", {}).get(self.args.operator)}
        self._audit({"event": "final", **final})
        return final

    # -- the trail -----------------------------------------------------------------------

    def _audit(self, event: dict[str, Any]) -> None:
        line = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "loop": self.run_id,
                **event}
        with open(self.workdir / "audit.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")

    def _summary(self, final: dict[str, Any] | None) -> dict[str, Any]:
        trail = self.state.trail
        return {"schema": SUMMARY_SCHEMA, "loop": self.run_id, "workdir": str(self.workdir),
                "operator": self.args.operator, "hardware": self.args.hardware,
                "rounds": len(trail),
                "accepted": [e["round"] for e in trail if e["decision"] == "accepted"],
                "rejected": [e["round"] for e in trail if e["decision"] == "rejected"],
                "dropouts": self.state.dropouts,
                "best": asdict(self.state.best) if self.state.best is not None else None,
                "final": final, "audit": str(self.workdir / "audit.jsonl"),
                "audit_summary": audit_summary(trail, self.state.best)}


def _brief(entry: dict[str, Any]) -> dict[str, Any]:
    """A history entry as the generator reads it."""
    return {k: entry.get(k) for k in ("round", "submission", "decision", "reason", "s_op",
                                      "interval", "sha256")}


def _read_usage(path: Path) -> dict[str, Any]:
    """The generator's own account of what it spent (optional)."""
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    usage: dict[str, Any] = {}
    for name in ("input_tokens", "output_tokens"):
        if isinstance(doc.get(name), int) and doc[name] >= 0:
            usage[name] = doc[name]
    if isinstance(doc.get("model"), str):
        usage["model"] = doc["model"][:100]
    return usage


def cmd_loop(args: argparse.Namespace, err: Console) -> int:
    if args.rounds < 0 or args.patience < 0:
        raise CliError("--rounds and --patience are whole numbers >= 0")
    if args.start is not None and not args.start.is_file():
        raise CliError(f"no such file: {args.start}")
    api = api_from_args(args)
    if not api.token:
        raise CliError("no team token: run `atrex login` or set ATREX_TOKEN", exit_code=3)
    summary = Loop(args, api, err).run()
    print_json(summary)
    sys.stdout.flush()
    return EXIT_OK if summary["best"] is not None else EXIT_EVALUATION_FAILED
