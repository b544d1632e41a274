"""The expert ladder on a GPU: open kernel libraries' adapters, then torch.compile, through
the evaluator; one JSON file that the portal loads as baseline rows (leaderboard/ladder.py).

For every adapter in evaluation/library_candidates (evaluation/library_ladder.py) whose
operator the release has, the harness evaluates the adapter as it evaluates any candidate:
sandboxed child, correctness on fresh inputs, adoption (the library's kernels named by
package and version, verdict `library`), timing (graph replay or eager span, L2 flushed).
Then, with the time left, the release's torch.compile baseline: the ladder's operators first
(the comparison the paper's table makes), then the others by importance weight.

Time: one command of at most ~8 minutes on one H200. Every operator's shapes are evaluated up
to --max-shapes per operator (a spread from smallest to largest as shapes.json orders them;
the file says which, per operator); the timing of one shape stops at --timing-cap-s; no new
evaluation starts after --deadline-s. What did not fit is listed in the output's "skipped".

Needs the libraries installed into the host's Python (the sandbox sees the Python install):
    pip install --no-deps --no-index /path/to/.whl/{flag_gems,liger_kernel,fla_core,einops,sqlalchemy}-*.whl

Usage (repository root, on the GPU host, as root so the sandbox can be built):
    python benchmarks/library_ladder.py --release /path/to/atrex-bench --json $OUT/ladder.json
        [--deadline-s 400] [--max-shapes 16] [--timing-cap-s 0.3] [--packages a,b]
        [--operators a,b] [--compile-shapes 2] [--no-compile]
        [--compile-only] [--merge earlier.json]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _path import REPO
from stack import card_profile

from evaluation.baselines import TORCH_COMPILE, baseline_source
from evaluation.harness.evaluate import (
    EvaluationRequest,
    EvaluationSettings,
    apply_roofline,
    evaluate,
)
from evaluation.harness.isolation.child_process import WarmChildren
from evaluation.harness.isolation.sandbox import SandboxSettings
from evaluation.harness.libraries import declared_libraries
from evaluation.harness.release import LoadedRelease, load_release, project_hardware_profiles
from evaluation.harness.timing import TimingSettings
from evaluation.library_ladder import NOT_YET, PACKAGES, Adapter, adapters


def spread(ids: list[str], count: int) -> list[str]:
    """`count` shapes spread over the list (smallest to largest as the file orders them)."""
    if count <= 0 or count >= len(ids):
        return ids
    step = (len(ids) - 1) / max(1, count - 1)
    return sorted({ids[round(i * step)] for i in range(count)}, key=ids.index)


def evaluate_one(release: LoadedRelease, operator: str, source: str, shape_ids: list[str],
                 warm: WarmChildren, settings: EvaluationSettings,
                 hardware: str = "H200") -> dict[str, Any]:
    """One candidate on the chosen shapes: the result's shapes as the worker reports them,
    with SOL and attainment on the project's H200 profile (for this script's summary; the
    portal computes its own from the release's roofline when it stores them)."""
    op = release.operators[operator]
    job = EvaluationRequest(operator=op.public, candidate_source=source,
                            tolerance=op.tolerance, shape_ids=shape_ids,
                            dsl_ratio_threshold=release.settings.dsl_ratio_threshold,
                            masked_paths=(release.root,))
    started = time.perf_counter()
    result = evaluate(job, settings, warm=warm)
    seconds = time.perf_counter() - started
    if op.roofline is not None:
        apply_roofline(result, op.roofline, project_hardware_profiles()[hardware])
    shapes = result.to_dict()["shapes"]
    return {"shapes": shapes, "seconds": seconds, "summary": summarise(shapes)}


def summarise(shapes: list[dict[str, Any]]) -> dict[str, Any]:
    """Correct shapes, verdicts, libraries seen, and S_op (median attainment; a shape that
    failed counts 0, as the portal scores a baseline)."""
    values = [((s.get("roofline") or {}).get("attainment") or 0.0)
              if s["status"] == "passed" else 0.0 for s in shapes]
    verdicts: dict[str, int] = {}
    libraries: set[str] = set()
    for shape in shapes:
        adoption = shape.get("adoption") or {}
        verdict = str(adoption.get("verdict") or "-")
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        libraries |= {f"{lib['package']} {lib['version']}" for lib in adoption.get("libraries") or []}
    errors = sorted({str(s["error"])[:200] for s in shapes if s.get("error")})
    return {"shapes": len(shapes), "correct": sum(s["status"] == "passed" for s in shapes),
            "s_op": statistics.median(values) if values else None, "verdicts": verdicts,
            "libraries": sorted(libraries), "errors": errors[:3]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", type=Path, required=True)
    parser.add_argument("--json", type=Path, required=True)
    parser.add_argument("--deadline-s", type=float, default=400.0)
    parser.add_argument("--max-shapes", type=int, default=16)
    parser.add_argument("--timing-cap-s", type=float, default=0.3)
    parser.add_argument("--compile-shapes", type=int, default=2)
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--packages", default=",".join(PACKAGES))
    parser.add_argument("--operators", default="")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--with-reference", action="store_true",
                        help="beside each torch.compile row, the PyTorch reference on the same "
                             "shapes (the compile speed-up on this card, in one call)")
    parser.add_argument("--compile-only", action="store_true",
                        help="no adapters: the torch.compile baseline alone")
    parser.add_argument("--merge", type=Path,
                        help="an earlier run's JSON: its rows are kept and only the operators "
                             "it has no torch.compile row for are compiled (a baseline that "
                             "does not fit in one device call, continued in the next)")
    args = parser.parse_args()
    # the environment of every result records the libraries this host carries
    os.environ.setdefault("ATREX_LIBRARIES", ",".join(PACKAGES))
    deadline = time.monotonic() + args.deadline_s
    release = load_release(args.release)
    only = {o for o in args.operators.split(",") if o}
    chosen = [a for a in adapters(packages=args.packages.split(","))
              if a.operator in release.operators and (not only or a.operator in only)]
    settings = EvaluationSettings(device=args.device, compile_timeout_s=180.0,
                                  call_timeout_s=60.0,
                                  timing=TimingSettings(max_seconds=args.timing_cap_s))
    warm = WarmChildren(device=args.device, dsl="triton", masked_paths=(release.root,),
                        settings=SandboxSettings())
    versions = declared_libraries()
    # on a CPU nothing is timed: the profile only names the rows' hardware
    hardware = card_profile() if args.device == "cuda" else "H200"
    output: dict[str, Any] = {
        "meta": {"date": datetime.date.today().isoformat(), "release": str(args.release),
                 "hardware": hardware, "max_shapes": args.max_shapes,
                 "timing_cap_s": args.timing_cap_s, "deadline_s": args.deadline_s,
                 "libraries": versions, "python": sys.version.split()[0],
                 "selection": f"every shape of an operator with at most {args.max_shapes}; "
                              f"else {args.max_shapes} spread over shapes.json's order"},
        "libraries": {}, "torch_compile": {}, "pytorch": {}, "skipped": [], "not_yet": NOT_YET}
    earlier = json.loads(args.merge.read_text()) if args.merge is not None else None
    if earlier is not None and earlier["meta"].get("hardware", "H200") != hardware:
        print(f"not merging {args.merge}: its rows ran on {earlier['meta'].get('hardware')}, "
              f"this card is {hardware}", flush=True)
        earlier = None
    if earlier is not None:
        output["meta"]["runs"] = [*earlier["meta"].get("runs", [earlier["meta"]]),
                                  dict(output["meta"])]
        output["meta"]["libraries"] = earlier["meta"].get("libraries", versions)
        output["libraries"], output["torch_compile"] = earlier["libraries"], \
            earlier["torch_compile"]
        output["pytorch"] = earlier.get("pytorch", {})
        output["skipped"] = [line for line in earlier["skipped"]
                             if not line.startswith("torch.compile ")]

    def save() -> None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(output, indent=1, default=str))

    def shape_ids(operator: str, count: int) -> list[str]:
        return spread([s.id for s in release.operators[operator].public.shapes], count)

    for adapter in [] if args.compile_only else chosen:
        run_adapter(adapter, release, output, versions, warm, settings, deadline,
                    shape_ids(adapter.operator, args.max_shapes), hardware)
        save()
    if not args.no_compile:
        covered = sorted({a.operator for a in chosen})
        weights = {name: (release.importance[name].score if name in release.importance
                              else 0.0) for name in release.operators}
        rest = sorted((n for n in release.operators if n not in covered and (not only or n in only)),
                      key=lambda n: -weights[n])
        for operator in [*covered, *rest]:
            if operator in output["torch_compile"]:  # an earlier run's (--merge)
                continue
            if time.monotonic() > deadline:
                output["skipped"].append(f"torch.compile {operator}: deadline")
                continue
            source = baseline_source(
                (release.operators[operator].public.directory / "reference.py").read_text(),
                TORCH_COMPILE)
            ids = shape_ids(operator, args.compile_shapes)
            entry = evaluate_one(release, operator, source, ids, warm, settings, hardware)
            output["torch_compile"][operator] = entry
            print_row("torch.compile", operator, entry)
            if args.with_reference:
                reference = (release.operators[operator].public.directory / "reference.py")
                entry = evaluate_one(release, operator, reference.read_text(), ids, warm,
                                     settings, hardware)
                output["pytorch"][operator] = entry
                print_row("PyTorch", operator, entry)
            save()
    warm.close()
    output["s_agg"] = aggregates(release, output)
    save()
    print("\nS_agg under the release's weights (an operator without a row counts 0; the portal "
          "recomputes these from the release's roofline when it loads the file):")
    for name, value in output["s_agg"].items():
        print(f"  {name:28} {value:.4f}")
    print(f"\nwrote {args.json}; skipped: {len(output['skipped'])}")
    for line in output["skipped"]:
        print(f"  {line}")
    return 0


def aggregates(release: LoadedRelease, output: dict[str, Any]) -> dict[str, float]:
    """S_agg of each library's row, of the best open kernel (per operator the library with the
    higher S_op) and of torch.compile's, over every operator of the release."""
    weights = {name: (release.importance[name].score if name in release.importance else 0.0)
               for name in release.operators}
    total = sum(weights.values()) or 1.0

    def s_agg(by_operator: dict[str, float]) -> float:
        return sum(weights.get(op, 0.0) * value for op, value in by_operator.items()) / total

    rows: dict[str, dict[str, float]] = {}
    best: dict[str, float] = {}
    for package, entry in output["libraries"].items():
        scores = {op: float(e["summary"]["s_op"] or 0.0) for op, e in entry["operators"].items()}
        rows[f"{package} {entry['version']}"] = scores
        for op, value in scores.items():
            best[op] = max(best.get(op, 0.0), value)
    result = {name: s_agg(scores) for name, scores in rows.items()}
    result["best open kernel"] = s_agg(best)
    result["torch.compile (operators run)"] = s_agg(
        {op: float(e["summary"]["s_op"] or 0.0) for op, e in output["torch_compile"].items()})
    if output.get("pytorch"):
        result["PyTorch reference (same shapes)"] = s_agg(
            {op: float(e["summary"]["s_op"] or 0.0) for op, e in output["pytorch"].items()})
    return result


def run_adapter(adapter: Adapter, release: LoadedRelease, output: dict[str, Any],
                versions: dict[str, str | None], warm: WarmChildren,
                settings: EvaluationSettings, deadline: float, ids: list[str],
                hardware: str) -> None:
    if time.monotonic() > deadline:
        output["skipped"].append(f"{adapter.package} {adapter.operator}: deadline")
        return
    if versions.get(adapter.package) is None:
        output["skipped"].append(f"{adapter.package} {adapter.operator}: not installed here")
        return
    entry = evaluate_one(release, adapter.operator, adapter.source(), ids, warm, settings,
                         hardware)
    entry["source_file"] = str(adapter.path.relative_to(REPO))
    package = output["libraries"].setdefault(
        adapter.package, {"version": versions[adapter.package], "operators": {}})
    package["operators"][adapter.operator] = entry
    print_row(f"{adapter.label} {versions[adapter.package]}", adapter.operator, entry)


def print_row(who: str, operator: str, entry: dict[str, Any]) -> None:
    s = entry["summary"]
    s_op = f"{s['s_op']:.3f}" if s["s_op"] is not None else "-"
    print(f"{who:24} {operator:28} correct {s['correct']:3}/{s['shapes']:<3} S_op {s_op:>6} "
          f"{entry['seconds']:6.1f} s  {s['verdicts']}  {', '.join(s['libraries'])}"
          + (f"  {s['errors'][0]}" if s["errors"] else ""), flush=True)


if __name__ == "__main__":
    sys.exit(main())
