"""A release folder of public operators whose input.py is missing, completed by stand-ins.

The public Atrex-Bench as available to this project lacks one file,
data/per_token_group_quant_fp8/input.py, so that operator cannot be imported with the rest.
This writes a release of only such operators: their public files unchanged, the project's own
generator from benchmarks/stand_ins/OPERATOR/input.py (each says what it follows), the
public configs/hardware, and a data/operator_importance.json of the operators' own
importance scores (their metadata.json's). `public_baseline.py --release OUT` evaluates it as
a release of its own; `--render RUN --stand-in STAND_IN_RUN` puts its rows beside the main
run's, marked as stand-ins.

Usage: python benchmarks/stand_in_release.py --public DIR --out DIR per_token_group_quant_fp8
(DIR: a public release folder, or a part of one holding data/OPERATOR/ and configs/hardware/)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

STAND_INS = Path(__file__).resolve().parent / "stand_ins"
PUBLIC_FILES = ("reference.py", "shapes.json", "metadata.json", "roofline.json")


def build(public: Path, out: Path, operators: list[str]) -> dict[str, float]:
    """Write the release to `out` (replaced); returns each operator's importance score."""
    problems = []
    for name in operators:
        source = public / "data" / name
        if (source / "input.py").exists():
            problems.append(f"{name}: the public release has an input.py; use it, not a stand-in")
        if not (STAND_INS / name / "input.py").exists():
            problems.append(f"{name}: no stand-in at {STAND_INS / name / 'input.py'}")
        problems += [f"{name}: missing public file data/{name}/{file}"
                     for file in PUBLIC_FILES if not (source / file).exists()]
    if not (public / "configs" / "hardware").is_dir():
        problems.append(f"{public}: no configs/hardware/")
    if problems:
        raise SystemExit("\n".join(problems))
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(public / "configs" / "hardware", out / "configs" / "hardware")
    importance = {}
    for name in operators:
        target = out / "data" / name
        target.mkdir(parents=True)
        for file in PUBLIC_FILES:
            shutil.copyfile(public / "data" / name / file, target / file)
        shutil.copyfile(STAND_INS / name / "input.py", target / "input.py")
        metadata = json.loads((target / "metadata.json").read_text())
        importance[name] = {"importance_score": metadata["importance_score"],
                            "phase": metadata.get("phase"),
                            "num_profiles": metadata.get("num_profiles")}
    (out / "data" / "operator_importance.json").write_text(json.dumps(
        {"metadata": {"written_by": "benchmarks/stand_in_release.py"}, "operators": importance},
        indent=2) + "\n")
    return {name: entry["importance_score"] for name, entry in importance.items()}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--public", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("operators", nargs="+")
    args = parser.parse_args()
    scores = build(args.public, args.out, args.operators)
    print(f"wrote {args.out}: " + ", ".join(f"{op} (importance {s})" for op, s in scores.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
