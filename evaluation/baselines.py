"""The reference baselines: a release's own references, submitted as candidates.

"PyTorch reference" is reference.py as it stands (eager PyTorch); "torch.compile reference"
wraps the same Model in torch.compile. Both are evaluated like any submission and shown
beside the boards, unranked. Django-free: the GPU-host script in benchmarks/ uses it too.
"""

from __future__ import annotations

PYTORCH, TORCH_COMPILE = "pytorch", "torch_compile"
REFERENCE_KINDS = (PYTORCH, TORCH_COMPILE)  # what baseline_source makes from reference.py

_COMPILED = '''

# --- added by the portal: the "torch.compile reference" baseline -------------------------
import torch as _atrex_torch


class ModelNew(Model):
    """The reference, its forward compiled by torch.compile (default mode)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._atrex_compiled = _atrex_torch.compile(super().forward)

    def forward(self, *args, **kwargs):
        return self._atrex_compiled(*args, **kwargs)
'''


def baseline_source(reference_py: str, kind: str) -> str:
    if kind == PYTORCH:
        return reference_py
    if kind == TORCH_COMPILE:
        return reference_py.rstrip("\n") + "\n" + _COMPILED
    raise ValueError(f"unknown baseline {kind!r} (known: {PYTORCH}, {TORCH_COMPILE})")
