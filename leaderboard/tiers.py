"""The tiers a board ranks in: what a kernel may lean on and still earn its attainment.

The open Atrex Kernel Agent names three tiers of work (Fast, Performance, Ultra); the portal's
attribution of each shape (native / mixed / library, evaluation/harness/adoption.py) maps
onto them:

- explicit DSL (the agent's Ultra): the work runs in the team's own kernels in the declared
  DSL; only `native` shapes earn attainment. The default: what every board ranked before.
- self-authored core (Performance): the team's own kernels carry the core computation, with
  other work beside them; `mixed` shapes earn too.
- libraries allowed (Fast): declared, reproducible kernel libraries may do the work
  (FlagGems, Liger-Kernel, fla-core, named by package and version); `library` shapes earn too.

Fallbacks (PyTorch, vendor libraries, torch.compile, another DSL) earn in no tier. A release
says the widest tier it ranks (`Release.ranked_tier`): its boards score every shape under that
tier's rule. A submission's own tier is the narrowest one holding every shape that earned
(`submission_tier`), and a board filtered to a tier shows the submissions within it, ranked
among themselves. As the tiers nest, a submission's score is the same under its own tier's
rule and under any wider one: one stored score serves every filter.

Pure: no Django.
"""

from __future__ import annotations

from dataclasses import dataclass

NATIVE, MIXED, LIBRARY = "native", "mixed", "library"
EXPLICIT_DSL, SELF_AUTHORED, LIBRARIES = "explicit-dsl", "self-authored", "libraries"


@dataclass(frozen=True)
class Tier:
    name: str
    label: str
    agent_tier: str  # the Atrex Kernel Agent's name for it
    earns: frozenset[str]  # the verdicts whose correct shapes earn attainment
    meaning: str


TIERS = {t.name: t for t in (
    Tier(EXPLICIT_DSL, "Explicit DSL", "Ultra", frozenset({NATIVE}),
         "only the team's own kernels in the declared DSL earn (verdict native)"),
    Tier(SELF_AUTHORED, "Self-authored core", "Performance", frozenset({NATIVE, MIXED}),
         "the team's own kernels carry the core computation, other work beside them "
         "(native and mixed earn)"),
    Tier(LIBRARIES, "Libraries allowed", "Fast", frozenset({NATIVE, MIXED, LIBRARY}),
         "declared open kernel libraries may do the work, named by package and version "
         "(native, mixed and library earn)"),
)}
ORDER = (EXPLICIT_DSL, SELF_AUTHORED, LIBRARIES)  # narrowest first
DEFAULT = EXPLICIT_DSL
CHOICES = [(name, f"{TIERS[name].label} ({TIERS[name].agent_tier})") for name in ORDER]


def earning_verdicts(tier: str) -> frozenset[str]:
    return TIERS[tier].earns


def submission_tier(*, native: int, mixed: int, library: int) -> str | None:
    """The narrowest tier holding every correct shape that can earn: None when none can
    (every shape failed or fell back)."""
    if library:
        return LIBRARIES
    if mixed:
        return SELF_AUTHORED
    if native:
        return EXPLICIT_DSL
    return None


def within(tier: str) -> list[str]:
    """The tiers a board filtered to `tier` shows: it and the narrower ones."""
    return list(ORDER[:ORDER.index(tier) + 1])


def offered(ranked_tier: str) -> list[str]:
    """The filters a release's boards offer: the tiers up to the widest it ranks."""
    return within(ranked_tier)
