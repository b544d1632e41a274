"""The "does not generalise" rule of 2026-12-04 (each hidden shape against its public sibling)
applied to a saved GPU run of the hidden tier, with no GPU: which public shape each hidden
shape is compared with, both figures, and whether each team is flagged, beside the medians'
rule the run itself applied.

Reads `hidden_tier_run.py --json` output (default: the H200 run of 2026-12-03,
`results/h200-2026-12-03c/hidden-tier.json`: the starter's rms_norm, an honest Triton kernel
and one that falls back on every shape it had not seen). a_floor = min(1, (SOL + launch
floor) / T) per shape is computed from the saved attainment and median (SOL = a * T) and the
hardware profile's launch floor; the hidden shapes' calls from the release's public rules
(data/hidden_tier.json: the template and the size in the id); the siblings among the public
shapes the run covered, as the portal chooses them (evaluation/catalog/siblings.py); the
flag by leaderboard/scoring.py itself.

Usage: python benchmarks/generalisation_check.py [RUN.json] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from _path import REPO

from evaluation.catalog.siblings import public_sibling
from evaluation.harness.release import load_hardware_profile
from evaluation.release_tools.make_starter_hidden_shapes import hidden_shape
from leaderboard.scoring import (
    DEFAULT_GENERALISATION_FACTOR,
    ShapeOutcome,
    combine,
    generalisation_reason_text,
    summarise,
)

RUN = REPO / "benchmarks" / "results" / "h200-2026-12-03c" / "hidden-tier.json"
STARTER = REPO / "evaluation" / "releases" / "atrex-starter" / "data"


def hidden_calls(operator: str, hidden_ids: list[str],
                 public: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each hidden shape's call, rebuilt from the rule whose template it was made from."""
    rules = json.loads((STARTER / "hidden_tier.json").read_text())["operators"][operator]
    calls = {}
    for hidden_id in hidden_ids:
        tokens = int(re.search(r"-t(\d+)-", hidden_id).group(1))  # type: ignore[union-attr]
        for rule in rules:
            new_id, call = hidden_shape(operator, rule["from"], public[rule["from"]], tokens)
            if new_id == hidden_id:
                calls[hidden_id] = call
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, nargs="?", default=RUN)
    parser.add_argument("--operator", default="rms_norm")
    parser.add_argument("--hardware", type=Path, default=REPO / "evaluation/hardware/H200.yaml")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    run = json.loads(args.run.read_text())
    floor_s = load_hardware_profile(args.hardware).launch_floor_s
    public_calls = json.loads((STARTER / args.operator / "shapes.json").read_text())
    factor = float(run.get("factor") or DEFAULT_GENERALISATION_FACTOR)
    report = []
    for team in run["teams"]:
        shapes = team["shapes"]
        covered = [s["shape"] for s in shapes if not s["hidden"]]
        hidden = hidden_calls(args.operator, [s["shape"] for s in shapes if s["hidden"]],
                              public_calls)
        outcomes = []
        for s in shapes:
            a, t = s["attainment"], s["median_s"]
            sibling = public_sibling(s["shape"], hidden[s["shape"]], {
                k: public_calls[k] for k in covered}) if s["hidden"] else None
            outcomes.append(ShapeOutcome(
                operator=args.operator, shape_id=s["shape"], correct=s["status"] == "passed",
                verdict=s["verdict"], attainment=a, attainment_se=0.0, hidden=s["hidden"],
                attainment_with_floor=min(1.0, (a * t + floor_s) / t) if a and t else None,
                sibling=sibling))
        summary = summarise(outcomes)
        score = combine(summary, {args.operator: 1.0}, generalisation_factor=factor)
        entry = {"team": team["team"], "flagged_then": team["not_generalising"],
                 "flagged_now": args.operator in score.not_generalising,
                 "medians": score.generalisation.get(args.operator),
                 "comparisons": list(summary.hidden_siblings or ()),
                 "reasons": [generalisation_reason_text(r)
                             for r in score.generalisation_reasons.get(args.operator, ())]}
        report.append(entry)
        print(f"{team['team']}: flagged by the medians' rule {team['not_generalising']}, "
              f"by the siblings' {entry['flagged_now']}")
        for c in entry["comparisons"]:
            print(f"  {c['hidden_shape']} ({c['hidden_state']}, a_floor {c['hidden']:.3f}) "
                  f"against {c['public_shape']} ({c['public_state']}, a_floor "
                  f"{c['public']:.3f}): ratio {c['hidden'] / c['public']:.3f}")
        for reason in entry["reasons"]:
            print(f"  why: {reason}")
    if args.json:
        args.json.write_text(json.dumps({"run": str(args.run.relative_to(REPO)),
                                         "launch_floor_s": floor_s, "factor": factor,
                                         "teams": report}, indent=1) + "\n")


if __name__ == "__main__":
    main()
