"""Eager forwards timed as a serving loop pays for them, the same twice (issue 43; GPU host).

1. Bare processes (no harness, no sandbox, the thread pinned to one core): each forward's
   CUDA-event time per call, isolated (L2 sweep, synchronize, event, forward, event) and
   queued (L2 sweep, event, forward, event: the first launches queue behind the sweep), in
   a process that never profiled ("fresh"), after one torch.profiler session ("profiled"),
   after that session and cuptiFinalize ("detached", then whether a later session still
   records kernels), and started with TEARDOWN_CUPTI=1 ("teardown_env").
2. The evaluator itself (sandboxed child, parent's checks): each forward three times with
   the defaults (queued start, pinned thread, profiler detached) and once as before
   2026-12-04 (idle start, unpinned, not detached): per shape the medians, how far the
   three are apart, and each against the bare process's queued figure.
3. Capture refusal: the Triton forwards captured against the same forwards refusing
   capture, by the evaluator: refusing must never score lower.

Forwards: three two-kernel Triton forwards that refuse capture (multi_kernel_forwards.py)
and three public references that cannot be captured (host syncs), three shapes each.

Usage: python benchmarks/eager_fidelity.py --public-release DIR [--json OUT] [--deadline-s 540]
           [--probes fresh,audit,...] [--triton-probes-only] [--skip probe,harness,capture]
       python benchmarks/eager_fidelity.py --probe MODE --public-release DIR --json OUT
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _path import REPO

TRITON = {"rms_norm": ("RmsNorm", ("15", "0", "40")),
          "silu_and_mul": ("SiluAndMul", ("0", "10", "30")),
          "layer_norm": ("LayerNorm", ("0", "6", "12"))}
REFERENCES = {"gated_delta_rule_update": ("0", "1", "2"),
              "chunk_delta_rule_output": ("0", "1", "2"),
              "moe_count_and_sort": ("0", "1", "2")}
PROBE_MODES = ("fresh", "profiled", "detached", "teardown_env", "audit", "dynamo")
FORWARDS_FILE = REPO / "benchmarks" / "multi_kernel_forwards.py"


def candidate_source(operator: str, public: Path, refusing: bool = True) -> str:
    """A submission's file: a Triton forward of multi_kernel_forwards.py, or the reference."""
    if operator in REFERENCES:
        return (public / "data" / operator / "reference.py").read_text()
    cls = TRITON[operator][0]
    alias = f"refusing_capture({cls})" if refusing else cls
    return FORWARDS_FILE.read_text() + f"\n\nModel = {alias}\n"


def shapes_of(operator: str) -> tuple[str, ...]:
    return TRITON[operator][1] if operator in TRITON else REFERENCES[operator]


# -- 1. bare processes ------------------------------------------------------------------

def probe(mode: str, public: Path, rounds: int = 3, calls: int = 25) -> dict[str, Any]:
    """One bare process: every forward's event times, isolated and queued (docstring)."""
    import torch

    from evaluation.harness.operator_files import import_file, make_inputs, make_model
    from evaluation.harness.release import load_release
    from evaluation.harness.timing import L2Flusher
    from evaluation.harness.timing_host import detach_profiler, pinned_thread

    release = load_release(public)
    flush = L2Flusher("read")
    out: dict[str, Any] = {"mode": mode, "cases": []}
    events: dict[str, int] = {}
    counting = [False]
    if mode == "audit":
        from evaluation.harness.isolation.integrity import install_audit_tripwire

        install_audit_tripwire()

        def count(event: str, args: tuple[object, ...]) -> None:
            if counting[0]:
                events[event] = events.get(event, 0) + 1
        sys.addaudithook(count)
    if mode == "dynamo":
        import torch._dynamo  # noqa: F401
    session_done = False
    operators = [*TRITON] if os.environ.get("PROBE_TRITON_ONLY") else [*TRITON, *REFERENCES]
    with pinned_thread(True):
        for operator in operators:
            op = release.operator(operator).public
            source = candidate_source(operator, public)
            path = Path(os.environ.get("TMPDIR", "/tmp")) / f"probe_{operator}.py"
            path.write_text(source)
            cls = import_file(path, f"probe_{operator}").Model
            inputs_module = import_file(op.directory / "input.py", f"probe_inputs_{operator}")
            for shape_id in shapes_of(operator):
                spec = op.shape(shape_id)
                device = torch.device("cuda")
                sets = [make_inputs(inputs_module, spec.input_kwargs, seed, device)
                        for seed in range(4)]
                model = make_model(cls, spec.init_kwargs, 1, device)

                def forward(i: int, model: torch.nn.Module = model,
                            sets: list[dict[str, Any]] = sets) -> None:
                    with torch.no_grad():
                        model(**sets[i % len(sets)])

                for i in range(len(sets)):
                    forward(i)
                torch.cuda.synchronize()
                if mode == "audit":  # the interpreter events of one warm forward
                    counting[0] = True
                    forward(0)
                    counting[0] = False
                    out.setdefault("events_per_forward", {})[f"{operator}/{shape_id}"] = dict(
                        events)
                    print(f"probe audit {operator}/{shape_id}: interpreter events in one "
                          f"forward: {dict(events)}", flush=True)
                    events.clear()
                if mode in ("profiled", "detached", "teardown_env") and not session_done:
                    acts = [torch.profiler.ProfilerActivity.CUDA]
                    with torch.profiler.profile(activities=acts):
                        forward(0)
                        torch.cuda.synchronize()
                    session_done = True
                    if mode == "detached":
                        out["detached"] = detach_profiler()
                times: dict[str, list[float]] = {"isolated": [], "queued": []}
                for _ in range(rounds):
                    for style in ("isolated", "queued"):
                        times[style] += _event_times(forward, flush, calls, style == "isolated")
                out["cases"].append({"operator": operator, "shape": shape_id,
                                     **{k: statistics.median(v) for k, v in times.items()},
                                     **{f"{k}_p10": statistics.quantiles(v, n=10)[0]
                                        for k, v in times.items()}})
                print(f"probe {mode} {operator}/{shape_id}: isolated "
                      f"{out['cases'][-1]['isolated'] * 1e6:.1f} us, queued "
                      f"{out['cases'][-1]['queued'] * 1e6:.1f} us", flush=True)
                del sets, model
                torch.cuda.empty_cache()
    if mode == "detached":  # does the profiler still record after cuptiFinalize?
        acts = [torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            torch.ones(1 << 20, device="cuda").sum()
            torch.cuda.synchronize()
        from evaluation.harness.timing_records import device_records

        out["records_after_detach"] = len(device_records(prof))
    return out


def _event_times(forward: Callable[[int], None], flush: Any, calls: int,
                 isolated: bool) -> list[float]:
    import torch

    times = []
    for i in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        flush()
        if isolated:
            torch.cuda.synchronize()
        start.record()
        forward(i)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return times


def run_probe(mode: str, public: Path, out_dir: Path, round_: int = 0) -> dict[str, Any]:
    env = dict(os.environ)
    if mode == "teardown_env":
        env["TEARDOWN_CUPTI"] = "1"
    # later rounds' files stay out of the results folder (a device call brings back 8 files);
    # their medians are in the report's probe_rounds
    folder = out_dir if round_ == 0 else Path(tempfile.gettempdir())
    path = folder / (f"probe-{mode}.json" if round_ == 0 else f"probe-{mode}-{round_}.json")
    subprocess.run([sys.executable, __file__, "--probe", mode, "--public-release", str(public),
                    "--json", str(path)], env=env, check=True, timeout=300)
    result: dict[str, Any] = json.loads(path.read_text())
    return result


# -- 2. and 3. the evaluator ------------------------------------------------------------

def evaluate_forward(operator: str, public: Path, timing: Any, warm: Any,
                     refusing: bool = True) -> dict[str, Any]:
    from evaluation.harness.evaluate import EvaluationRequest, EvaluationSettings, evaluate
    from evaluation.harness.release import load_release

    release = load_release(public)
    op = release.operator(operator)
    job = EvaluationRequest(operator=op.public,
                            candidate_source=candidate_source(operator, public, refusing),
                            tolerance=op.tolerance, shape_ids=list(shapes_of(operator)),
                            masked_paths=(release.root,))
    started = time.perf_counter()
    result = evaluate(job, EvaluationSettings(device="cuda", timing=timing), warm=warm)
    rows = {}
    for shape in result.shapes:
        t = shape.timing or {}
        rows[shape.shape_id] = {"status": shape.status, "error": (shape.error or "")[:200],
                                "median_s": t.get("median_s"), "method": t.get("method"),
                                "busy_s": t.get("busy_median_s"), "n": t.get("n"),
                                "graph_error": (t.get("graph_error") or "")[:120],
                                "detached": t.get("profiler_detached")}
    return {"seconds": time.perf_counter() - started, "shapes": rows}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--public-release", type=Path, required=True)
    parser.add_argument("--json", type=Path, default=Path("eager_fidelity.json"))
    parser.add_argument("--probe", choices=PROBE_MODES)
    parser.add_argument("--deadline-s", type=float, default=540)
    parser.add_argument("--skip", default="", help="comma-separated: probe,harness,capture")
    parser.add_argument("--probes", default=",".join(PROBE_MODES),
                        help="comma-separated bare-process modes to run")
    parser.add_argument("--triton-probes-only", action="store_true",
                        help="bare processes time the Triton forwards only (the references' "
                             "figures take minutes)")
    parser.add_argument("--probe-rounds", type=int, default=1,
                        help="the bare-process modes alternated this many times, each a new "
                             "process")
    parser.add_argument("--evaluations", default="new,new,new,old",
                        help="the evaluator's runs per forward, in order: new (the defaults) "
                             "or old (as before 2026-12-04)")
    args = parser.parse_args()
    if args.probe:
        args.json.write_text(json.dumps(probe(args.probe, args.public_release)))
        return

    import dataclasses

    from evaluation.harness.isolation.child_process import WarmChildren
    from evaluation.harness.isolation.sandbox import SandboxSettings
    from evaluation.harness.timing import TimingSettings

    deadline = time.monotonic() + args.deadline_s
    skip = set(filter(None, args.skip.split(",")))
    report: dict[str, Any] = {"probes": {}, "harness": {}, "capture": {}}
    out_dir = args.json.parent
    if "probe" not in skip:
        if args.triton_probes_only:
            os.environ["PROBE_TRITON_ONLY"] = "1"
        # Alternated over --probe-rounds: one process per mode cannot tell a mode's effect
        # from the host's drift (on the H100, 2026-12-05, the fresh process was fast on 5 of
        # 9 shapes and the one with the audit tripwire on none).
        for round_ in range(args.probe_rounds):
            for mode in filter(None, args.probes.split(",")):
                if time.monotonic() < deadline:
                    result = run_probe(mode, args.public_release, out_dir, round_)
                    if round_ == 0:
                        report["probes"][mode] = result
                    report.setdefault("probe_rounds", []).append(
                        {"round": round_, "mode": mode, "queued_median": statistics.median(
                            c["queued"] for c in result["cases"])})
                    print(f"probe round {round_} {mode}: median queued over shapes "
                          f"{_us(report['probe_rounds'][-1]['queued_median'])} us", flush=True)
    from evaluation.harness.release import load_release

    root = load_release(args.public_release).root
    warm = WarmChildren(device="cuda", dsl="triton", masked_paths=(root,),
                        settings=SandboxSettings())
    new = TimingSettings()
    old = dataclasses.replace(new, start="idle", pin_thread=False, detach_profiler=False)
    if "harness" not in skip:
        for operator in [*TRITON, *REFERENCES]:
            runs = []
            for label in filter(None, args.evaluations.split(",")):
                timing = {"new": new, "old": old}[label]
                if time.monotonic() > deadline:
                    break
                runs.append({"label": label, **evaluate_forward(operator, args.public_release,
                                                               timing, warm)})
                print(f"harness {operator} {label}: " + ", ".join(
                    f"{s}={_us(r['median_s'])}" for s, r in runs[-1]["shapes"].items()),
                    flush=True)
            report["harness"][operator] = runs
            args.json.write_text(json.dumps(report, indent=1))
    if "capture" not in skip:
        for operator in TRITON:
            if time.monotonic() > deadline:
                break
            report["capture"][operator] = {
                "captured": evaluate_forward(operator, args.public_release, new, warm, False),
                "refusing": (report["harness"].get(operator) or [None])[0]}
            args.json.write_text(json.dumps(report, indent=1))
    warm.close()
    args.json.write_text(json.dumps(report, indent=1))
    summarize(report)


def summarize(report: dict[str, Any]) -> None:
    """Per forward and shape: bare figures, the evaluator's three medians, the old one."""
    bare = {(c["operator"], c["shape"]): c for c in
            (report["probes"].get("fresh") or {}).get("cases", [])}
    print("\nforward/shape | bare isolated | bare queued | harness new x3 (spread) | old | "
          "new/bare queued")
    spreads, ratios = [], []
    for operator, runs in report["harness"].items():
        for shape in shapes_of(operator):
            news = [r["shapes"].get(shape, {}).get("median_s") for r in runs if r["label"] == "new"]
            news = [n for n in news if n]
            olds = [r["shapes"].get(shape, {}).get("median_s") for r in runs if r["label"] == "old"]
            b = bare.get((operator, shape), {})
            spread = (max(news) / min(news) - 1) if len(news) > 1 else None
            ratio = statistics.median(news) / b["queued"] if news and b.get("queued") else None
            if spread is not None:
                spreads.append(spread)
            if ratio is not None:
                ratios.append(ratio)
            print(f"{operator}/{shape} | {_us(b.get('isolated'))} | {_us(b.get('queued'))} | "
                  f"{', '.join(_us(n) for n in news)} ({_pct(spread)}) | "
                  f"{_us(olds[0] if olds else None)} | {ratio or 0:.2f}")
    if spreads:
        print(f"\nrepeat (max/min - 1 of three evaluations), median over shapes: "
              f"{_pct(statistics.median(spreads))}; harness/bare queued, median "
              f"{statistics.median(ratios):.3f}" if ratios else "")
    for operator, pair in report["capture"].items():
        captured, refusing = pair["captured"], pair["refusing"]
        for shape in shapes_of(operator):
            c = captured["shapes"].get(shape, {}).get("median_s")
            r = ((refusing or {}).get("shapes") or {}).get(shape, {}).get("median_s")
            method = captured["shapes"].get(shape, {}).get("method")
            print(f"capture {operator}/{shape}: captured {_us(c)} ({method}), refusing "
                  f"{_us(r)}, refusing/captured {(r / c) if c and r else 0:.2f}")


def _us(seconds: float | None) -> str:
    return "-" if not seconds else f"{seconds * 1e6:.1f}"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


if __name__ == "__main__":
    main()
