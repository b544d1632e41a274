"""Write roofline.json for every operator of the atrex-starter release.

Usage: python evaluation/release_tools/make_starter_roofline.py

W and Q of each shape come from the operator's work function in starter_work/ (one module
per family; each module's docstring documents its formulas, counting the bytes an ideal
kernel touches: only the KV blocks a decode step reads, only the cache slots a write
touches, only the experts a MoE layer hits). SOL per hardware profile is computed with the
harness's own roofline arithmetic, exactly as for the fixture release
(make_fixture_roofline.py, whose counting conventions apply here too): the files declare
`"compute_overlap": "max"`, so tensor-core and CUDA-core work overlap and SOL is a lower
bound. Deterministic: a test checks the committed files equal a regeneration.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from evaluation.release_tools.make_fixture_roofline import (  # noqa: E402
    Kwargs,
    Work,
    write_release_rooflines,
)
from evaluation.release_tools.starter_work import attention_cache, gemm_moe, norms_quant  # noqa: E402

STARTER_RELEASE = Path(__file__).resolve().parents[1] / "releases" / "atrex-starter"
WORK_MODELS: Mapping[str, Callable[[Kwargs, Kwargs], Work]] = {
    **norms_quant.WORK_MODELS, **attention_cache.WORK_MODELS, **gemm_moe.WORK_MODELS}


def main() -> None:
    for path in write_release_rooflines(STARTER_RELEASE, WORK_MODELS):
        print(f"wrote {path.relative_to(STARTER_RELEASE)}")


if __name__ == "__main__":
    main()
