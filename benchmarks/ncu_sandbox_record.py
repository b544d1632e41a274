"""ncu profiles of one shape with the candidate in its sandbox (evaluation/harness/ncu/sandbox.py),
as the profile mode runs them: an honest Triton rms_norm and its PyTorch fallback, on the
shape the unsandboxed recordings used (benchmarks/ncu_profile_record.py), so the two can be
set side by side.

Usage (a GPU host, as root, from the repository root): python benchmarks/ncu_sandbox_record.py
    --out DIR   writes ncu-sandboxed.json: per case the parsed kernels, the clocks ncu saw,
                the seconds the run took, or why it gave no kernel
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _path import REPO

from evaluation.harness.isolation.sandbox import SandboxSettings
from evaluation.harness.ncu.sandbox import profile_shape
from evaluation.harness.release import load_release

FIXTURE = REPO / "evaluation" / "releases" / "atrex-fixture"
SAMPLES = REPO / "evaluation" / "sample_candidates" / "rms_norm"
SHAPE = "llama8b-prefill-t4096-h4096"
H200_HBM_PEAK = 4.8e12  # evaluation/hardware/H200.yaml, b_peak.hbm


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    operator = load_release(FIXTURE).operator("rms_norm").public
    report = {}
    for case, candidate in (("rms_norm-triton", "triton_native.py"),
                            ("rms_norm-torch-fallback", "torch_fallback.py")):
        profile = profile_shape(operator, (SAMPLES / candidate).read_text(), operator.shape(SHAPE),
                                dsl="triton", settings=SandboxSettings(),
                                hbm_peak_bytes_per_s=H200_HBM_PEAK)
        report[case] = profile.to_dict()
        print(f"{case}: {len(profile.kernels)} kernels in {profile.seconds:.1f} s, clocks "
              f"{profile.clocks}{'; ' + profile.error if profile.error else ''}", flush=True)
        for kernel in profile.kernels:
            print(f"  {str(kernel.get('name'))[:60]:<60} {kernel.get('duration_s')} s, DRAM "
                  f"{kernel.get('dram_read_bytes')} B read, {kernel.get('dram_of_peak')} of "
                  f"peak, limited by {kernel.get('limited_by')}")
    (args.out / "ncu-sandboxed.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
