"""Evaluate the atrex-starter release's reference baselines on a GPU; write docs/baselines.md.

The "PyTorch reference" (reference.py, eager) and the "torch.compile reference" (the same
Model under torch.compile) are evaluated by the harness like any candidate, on the
release's production shapes (the dev tier left out), with the release's H200 profile. The
script prints and writes: per operator S_op (median attainment; fallbacks count here,
since a baseline is PyTorch by design), the fraction of shapes that passed, and the
evaluator's seconds per shape; then S_agg under the release's weights and, when given,
under trace-derived weights (--weights FILE, a JSON {operator: weight}).

Usage: python benchmarks/starter_baselines.py [--kinds pytorch,torch_compile]
           [--compile-shapes N] [--weights FILE] [--out docs/baselines.md] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _path import REPO

from evaluation.baselines import PYTORCH, TORCH_COMPILE, baseline_source
from evaluation.harness.evaluate import (
    EvaluationRequest,
    EvaluationSettings,
    apply_roofline,
    evaluate,
)
from evaluation.harness.isolation.child_process import WarmChildren
from evaluation.harness.isolation.sandbox import SandboxSettings
from evaluation.harness.release import load_release
from evaluation.harness.roofline import roofline_point
from leaderboard.scoring import (
    ScoringPolicy,
    ShapeOutcome,
    normalise_weights,
    summarise,
    weighted_score,
)

RELEASE = REPO / "evaluation" / "releases" / "atrex-starter"
LABELS = {PYTORCH: "PyTorch reference", TORCH_COMPILE: "torch.compile reference"}


def spread(ids: list[str], count: int) -> list[str]:
    """`count` shapes spread over the list (smallest to largest as the file orders them)."""
    if count >= len(ids):
        return ids
    step = (len(ids) - 1) / max(1, count - 1)
    return [ids[round(i * step)] for i in range(count)]


def run(kind: str, compile_shapes: int, hardware: str, device: str, dev: bool,
        operators: dict[str, Any], save: Any, compile_timeout_s: float = 300.0,
        shard: tuple[int, int] = (0, 1), deadline: float = float("inf"),
        only: set[str] | None = None) -> dict[str, Any]:
    """Evaluate the shapes not in `operators` yet, one shape per child, `save()` after each
    (resumable). `shard` = (i, n) takes every n-th shape from the i-th, so n processes, one
    per GPU, share the work; no new shape starts after `deadline` (time.monotonic())."""
    release = load_release(RELEASE)
    profile = release.hardware[hardware]
    # One child started ahead of each evaluation, as a GPU worker keeps one.
    warm = WarmChildren(device=device, dsl="triton", masked_paths=(release.root,),
                        settings=SandboxSettings())
    work = []
    for name, op in sorted(release.operators.items()):
        if only and name not in only:
            continue
        ids = [s.id for s in op.public.shapes if s.id.startswith("dev-") == dev]
        if kind == TORCH_COMPILE and compile_shapes > 0:
            ids = spread(ids, compile_shapes)
        work += [(name, shape_id) for shape_id in ids]
    for name, shape_id in work[shard[0]::shard[1]]:
        entry = operators.setdefault(name, {"shapes": []})
        if any(s["shape"] == shape_id for s in entry["shapes"]):
            continue
        if time.monotonic() > deadline:
            print(f"deadline reached before {name} {shape_id}", flush=True)
            break
        op = release.operators[name]
        job = EvaluationRequest(
            operator=op.public,
            candidate_source=baseline_source((op.public.directory / "reference.py").read_text(),
                                             kind),
            tolerance=op.tolerance, shape_ids=[shape_id],
            dsl_ratio_threshold=release.settings.dsl_ratio_threshold,
            masked_paths=(release.root,))
        started = time.perf_counter()
        result = evaluate(job, EvaluationSettings(device=device,
                                                  compile_timeout_s=compile_timeout_s),
                          warm=warm)
        seconds = time.perf_counter() - started
        assert op.roofline is not None
        apply_roofline(result, op.roofline, profile)
        for shape in result.shapes:
            roof = shape.roofline or {}
            timing = shape.timing or {}
            entry["shapes"].append({
                "shape": shape.shape_id, "status": shape.status, "verdict": shape.verdict,
                "median_us": (timing.get("median_s") or 0) * 1e6 or None,
                "sol_us": (roof.get("sol_s") or 0) * 1e6 or None,
                "attainment": roof.get("attainment"), "error": shape.error,
                "phase": (op.metadata.phase if op.metadata else None), "seconds": seconds})
            print(f"{LABELS[kind]:24} {name:28} {shape.shape_id:48} {shape.status:7} "
                  f"{seconds:6.2f} s" + (f"  {shape.error}" if shape.error else ""), flush=True)
        entry["seconds"] = sum(s["seconds"] for s in entry["shapes"])
        entry["seconds_per_shape"] = entry["seconds"] / len(entry["shapes"])
        save()
    warm.close()
    return operators


def merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    """Shapes of `other` (another shard's results) added to `into`, kind by kind."""
    for kind, operators in other.items():
        for name, op in normalise(operators).items():
            entry = into.setdefault(kind, {}).setdefault(name, {"shapes": []})
            known = {s["shape"] for s in entry["shapes"]}
            entry["shapes"] += [s for s in op["shapes"] if s["shape"] not in known]
    for operators in into.values():
        normalise(operators)


def normalise(operators: dict[str, Any]) -> dict[str, Any]:
    """Per-shape seconds (results saved per operator had only the mean) and the totals."""
    for op in operators.values():
        for shape in op["shapes"]:
            shape.setdefault("seconds", op.get("seconds_per_shape", 0.0))
        op["seconds"] = sum(s["seconds"] for s in op["shapes"])
        op["seconds_per_shape"] = op["seconds"] / max(1, len(op["shapes"]))
    return operators


def resol(results: dict[str, dict[str, Any]], hardware: str) -> int:
    """SOL and attainment of every saved shape afresh from its stored time and the release's
    current roofline (its W/Q convention may have changed since): no kernel is re-run.
    Returns how many shapes changed."""
    release = load_release(RELEASE)
    profile = release.hardware[hardware]
    changed = 0
    for operators in results.values():
        for name, op in operators.items():
            roofline = release.operator(name).roofline or {}
            for shape in op["shapes"]:
                entry = roofline.get(shape["shape"])
                if entry is None:
                    continue
                sol_us = roofline_point(entry, profile).sol_s * 1e6
                attainment = (sol_us / shape["median_us"] if shape["status"] == "passed"
                              and shape.get("median_us") else shape["attainment"])
                changed += attainment != shape["attainment"]
                shape["sol_us"], shape["attainment"] = sol_us, attainment
    return changed


def scores(operators: dict[str, Any], weights: dict[str, float]) -> dict[str, Any]:
    outcomes = [ShapeOutcome(operator=name, shape_id=s["shape"], correct=s["status"] == "passed",
                             verdict=s["verdict"], attainment=s["attainment"],
                             phase=s["phase"])
                for name, op in operators.items() for s in op["shapes"]]
    summary = summarise(outcomes, ScoringPolicy(fallback_scores_zero=False))
    normalised = normalise_weights(weights, sorted(weights))
    return {"by_operator": dict(summary.by_operator),
            "aggregate": weighted_score(summary.by_operator, normalised)}


def compile_on_every_shape(results: dict[str, dict[str, Any]]) -> bool:
    eager, compiled = results.get(PYTORCH, {}), results.get(TORCH_COMPILE, {})
    return set(compiled) == set(eager) and all(
        {s["shape"] for s in op["shapes"]} == {s["shape"] for s in eager[name]["shapes"]}
        for name, op in compiled.items())


def compile_coverage(results: dict[str, dict[str, Any]]) -> str:
    compiled = results.get(TORCH_COMPILE, {})
    if not compiled:
        return ""
    if compile_on_every_shape(results):
        return ("Both baselines are evaluated on every production shape; each torch.compile "
                "shape compiles afresh in a new child.")
    counts = sorted({len(op["shapes"]) for op in compiled.values()})
    return (f"torch.compile is evaluated on {'/'.join(map(str, counts))} shapes per operator "
            "spread from the smallest to the largest (each shape compiles afresh in a new "
            "child), not on every shape.")


def markdown(results: dict[str, dict[str, Any]], weight_sets: dict[str, dict[str, float]],
             meta: dict[str, Any]) -> str:
    kinds = list(results)
    lines = [
        "# Reference baselines of the atrex-starter release",
        "",
        f"Written by `benchmarks/starter_baselines.py` on {meta['device']} "
        f"(torch {meta['torch']}, triton {meta['triton']}), {meta['date']}. "
        "Attainment = SOL / measured time on the H200 profile; S_op = median attainment over "
        "the operator's production shapes (the dev tier left out); a failed shape counts 0. "
        "Baselines are PyTorch by design, so fallback verdicts are scored here."
        + (f" SOL and attainment re-derived on {meta['sol_rederived']} from the stored times "
           "and the release's current roofline (`--resol`: its `compute_overlap` convention)."
           if meta.get("sol_rederived") else ""),
        "",
        compile_coverage(results),
        "Seconds per shape are the evaluator's wall time: child start, compile (for "
        "torch.compile, in a fresh process with cold caches), 5 correctness trials, adoption, "
        "timing with its checked calls.",
        "",
        "| operator | " + " | ".join(f"{LABELS[k]} S_op | passed | s/shape" for k in kinds)
        + " |",
        "| --- |" + " ---: | ---: | ---: |" * len(kinds),
    ]
    names = sorted({name for r in results.values() for name in r})
    first = next(iter(weight_sets))
    for name in names:
        cells = []
        for kind in kinds:
            op = results[kind].get(name)
            if op is None:
                cells.append("not run | | ")
                continue
            s_op = scores(results[kind], weight_sets[first])["by_operator"].get(name)
            passed = sum(s["status"] == "passed" for s in op["shapes"])
            cells.append(f"{'-' if s_op is None else f'{s_op:.3f}'} | {passed}/{len(op['shapes'])}"
                         f" | {op['seconds_per_shape']:.2f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    partial = (PYTORCH in results and TORCH_COMPILE in results
               and not compile_on_every_shape(results))
    if partial:
        lines += ["", "On the torch.compile shapes only (same shapes, so the two S_op compare):",
                  "", "| operator | shapes | PyTorch S_op | torch.compile S_op |",
                  "| --- | --- | ---: | ---: |"]
        for name in names:
            compiled = results[TORCH_COMPILE].get(name)
            eager = results[PYTORCH].get(name)
            if not compiled or not eager:
                continue
            ids = {s["shape"] for s in compiled["shapes"]}
            same = {"x": {**eager, "shapes": [s for s in eager["shapes"] if s["shape"] in ids]}}
            pair = [scores({name: op}, {name: 1.0})["by_operator"].get(name)
                    for op in (same["x"], compiled)]
            lines.append(f"| {name} | {', '.join(sorted(ids))} | "
                         + " | ".join("-" if v is None else f"{v:.3f}" for v in pair) + " |")
    lines += ["", "S_agg over every production shape each baseline was evaluated on" +
              ("." if not partial else
               " (the torch.compile reference over its shapes above, so the two S_agg are "
               "not like for like)."), "",
              "| weights | " + " | ".join(f"{LABELS[k]} S_agg" for k in kinds) + " |",
              "| --- |" + " ---: |" * len(kinds)]
    for label, weights in weight_sets.items():
        values = [scores(results[k], weights)["aggregate"] for k in kinds]
        lines.append(f"| {label} | " + " | ".join("-" if v is None else f"{v:.3f}"
                                                for v in values) + " |")
    failures = [(LABELS[kind], name, s["shape"], (s["error"] or "").splitlines()[0][:160])
                for kind, operators in results.items() for name, op in sorted(operators.items())
                for s in op["shapes"] if s["status"] != "passed"]
    if failures:
        lines += ["", "Shapes that failed (scored 0):", "",
                  "| baseline | operator | shape | error |", "| --- | --- | --- | --- |"]
        lines += [f"| {label} | {name} | {shape} | {error.replace('|', '/')} |"
                  for label, name, shape, error in failures]
    all_seconds = [op["seconds_per_shape"] for r in results.values() for op in r.values()]
    lines += ["", f"Evaluator seconds per shape: median {statistics.median(all_seconds):.2f}, "
              f"max {max(all_seconds):.2f} (per operator and baseline).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kinds", default=f"{PYTORCH},{TORCH_COMPILE}",
                        help="baselines to evaluate; empty: only render --json and --merge")
    parser.add_argument("--compile-shapes", type=int, default=0,
                        help="torch.compile on N shapes per operator spread by size; 0: all")
    parser.add_argument("--operators", default="", help="comma-separated; default all")
    parser.add_argument("--shard", default="0/1",
                        help="I/N: every N-th shape from the I-th (one process per GPU)")
    parser.add_argument("--deadline", type=float, default=float("inf"),
                        help="start no new shape after this many seconds")
    parser.add_argument("--redo", default="",
                        help="comma-separated operators whose saved results of --kinds are "
                        "dropped first; 'failed' drops every saved shape that did not pass")
    parser.add_argument("--merge", type=Path, action="append", default=[],
                        help="another shard's --json, merged in before rendering")
    parser.add_argument("--hardware", default="H200")
    parser.add_argument("--compile-timeout", type=float, default=300.0,
                        help="seconds for import, first call (compilation) and the trials")
    parser.add_argument("--weights", type=Path, action="append", default=[],
                        help="LABEL=FILE: extra weights {operator: weight} to report S_agg under")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "baselines.md")
    parser.add_argument("--json", type=Path, default=None,
                        help="results, written after each operator; read back to resume")
    parser.add_argument("--resol", action="store_true",
                        help="recompute SOL and attainment of saved shapes from their stored "
                        "times and the release's current roofline (no GPU needed)")
    parser.add_argument("--dev", action="store_true",
                        help="the dev tier only (a CPU smoke test of this script)")
    args = parser.parse_args()
    import torch
    import triton

    device = "cuda" if torch.cuda.is_available() else "cpu"
    meta = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
            "torch": torch.__version__, "triton": triton.__version__,
            "date": time.strftime("%Y-%m-%d"), "compile_shapes": args.compile_shapes}
    deadline = time.monotonic() + args.deadline
    results: dict[str, dict[str, Any]] = {}
    saved_meta: list[dict[str, Any]] = []
    if args.json and args.json.exists():  # resume (or, when complete, only render)
        saved = json.loads(args.json.read_text())
        results, saved_meta = saved["results"], [saved["meta"]]
    for path in args.merge:
        saved = json.loads(path.read_text())
        merge(results, saved["results"])
        saved_meta.append(saved["meta"])
    if saved_meta and not args.kinds:  # only rendering: the machine that measured
        meta = saved_meta[0]
    for operators in results.values():  # per-shape seconds for results saved per operator
        normalise(operators)
    kinds = [k for k in args.kinds.split(",") if k]
    redo = set(filter(None, args.redo.split(",")))
    for kind in kinds:
        for name, op in results.get(kind, {}).items():
            op["shapes"] = [s for s in op["shapes"] if name not in redo and
                            not ("failed" in redo and s["status"] != "passed")]

    def save() -> None:
        if args.json:
            args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1))

    index, count = (int(x) for x in args.shard.split("/"))
    for kind in kinds:
        run(kind, args.compile_shapes, args.hardware, device, args.dev,
            results.setdefault(kind, {}), save, args.compile_timeout, (index, count), deadline,
            set(filter(None, args.operators.split(","))))
    for kind_results in results.values():  # operators left empty by --redo and a deadline
        for name in [n for n, op in kind_results.items() if not op["shapes"]]:
            del kind_results[name]
    if args.merge:
        save()  # the merged shards, so the next render needs only --json
    if args.resol:
        print(f"SOL re-derived from the stored times: {resol(results, args.hardware)} shapes "
              "changed", file=sys.stderr)
        meta["sol_rederived"] = time.strftime("%Y-%m-%d")
        save()
    release = load_release(RELEASE)
    weight_sets = {"release operator_importance.json":
                   {n: e.score for n, e in release.importance.items()} or
                   dict.fromkeys(release.operators, 1.0)}
    for item in args.weights:
        label, _, path = str(item).partition("=")
        weight_sets[label] = json.loads(Path(path).read_text())
    text = markdown(results, weight_sets, meta)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
