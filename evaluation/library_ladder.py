"""The expert ladder: open kernel libraries' adapters for a release's operators.

Each adapter (`evaluation/library_candidates/<package>/<operator>.py`) is the operator's
`Model` calling one library. They are evaluated on a GPU like any candidate
(`benchmarks/library_ladder.py`, through the harness) and stored as unranked baseline rows
named by package and version, the best per operator as a "best open kernel" row
(`leaderboard/ladder.py`). Django-free: the GPU-host script uses it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ADAPTERS_DIR = Path(__file__).resolve().parent / "library_candidates"
# distribution name -> (the folder of its adapters, how pages name it)
PACKAGES = {
    "flag-gems": ("flag_gems", "FlagGems"),
    "liger-kernel": ("liger_kernel", "Liger-Kernel"),
    "fla-core": ("fla_core", "fla-core"),
}
# Operators of the public Atrex-Bench an installed library covers but no adapter here calls
# yet, and why (the ladder says so rather than leaving them out silently).
NOT_YET = {
    "flag-gems": {
        "fused_moe": "FlagGems' fused MoE wants vLLM's weight layout and routing arguments; "
                     "no adapter yet",
        "moe_align_block_size": "no adapter yet", "moe_sum_reduce": "no adapter yet",
        "moe_topk_gating_softmax": "no adapter yet",
        "per_token_group_quant_fp8": "no adapter yet", "reshape_and_cache": "no adapter yet",
        "mla_decode_attention": "no adapter yet",
        "chunk_gated_delta_rule_state": "no adapter yet"},
    "liger-kernel": {"mrope": "no adapter yet", "fused_moe": "no adapter yet"},
    "fla-core": {"chunk_delta_rule_output": "no adapter yet",
                 "chunk_gated_delta_rule_state": "no adapter yet",
                 "gated_delta_rule_update": "no adapter yet",
                 "causal_conv1d": "no adapter yet"},
    "quack-kernels": {"*": "needs nvidia-cutlass-dsl >= 4.7, which the GPU host lacks"},
}


@dataclass(frozen=True)
class Adapter:
    package: str  # the distribution, as pip names it
    operator: str
    path: Path

    @property
    def label(self) -> str:
        return PACKAGES[self.package][1]

    def source(self) -> str:
        return self.path.read_text()


def adapters(operators: Iterable[str] | None = None,
             packages: Iterable[str] | None = None) -> list[Adapter]:
    """Every adapter, by package then operator; only those of `operators` / `packages`."""
    wanted_ops = set(operators) if operators is not None else None
    wanted_packages = set(packages) if packages is not None else set(PACKAGES)
    found = []
    for package, (folder, _) in PACKAGES.items():
        if package not in wanted_packages:
            continue
        for path in sorted((ADAPTERS_DIR / folder).glob("*.py")):
            if wanted_ops is None or path.stem in wanted_ops:
                found.append(Adapter(package=package, operator=path.stem, path=path))
    return found


def package_of_label(label: str) -> str | None:
    """The distribution a page's label names ("FlagGems" -> "flag-gems")."""
    return next((p for p, (_, name) in PACKAGES.items() if name == label), None)
