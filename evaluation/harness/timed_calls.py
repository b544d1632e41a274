"""What keeps the timed calls honest: fresh input contents before each one, and spot checks.

A timing loop calls the forward many times on a few fixed buffers (CUDA-graph replay needs
fixed addresses). Left alone, that is the loop cheaters optimise for: cache the output by
data_ptr, id/_version or a fingerprint of the inputs, do the work of the next calls in
this one and skip them, or behave only while the correctness trials watch. Two defences,
both run in the child around every timed call (timing.measure_forward on a GPU, a few
unmeasured calls on a CPU):

- FreshInputs: before each call the buffers get new contents, drawn by the operator's own
  input.py from a seed drawn just then from the OS (so it cannot be known before the
  previous call has returned), copied in place (same addresses, a bumped version). Where a
  new draw does not fit the buffers (input.py makes seed-dependent shapes or scalars), the
  buffers are restored from pristine copies of their own draws instead, and the report
  says so (`fresh_inputs: false`).
- TimedCallChecks: after each call, with a small probability drawn only after the call has
  returned, its outputs (and any inputs it changed) are saved with the seed of the contents
  it was given; the parent recomputes the reference from that seed and compares, as for a
  correctness trial. If no call was picked, the last one is checked.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

Inputs = dict[str, Any]


@dataclass
class TimedCall:
    """One call to the candidate's forward inside the timing stage."""

    sample: int
    seed: int  # the seed the contents of `inputs` were drawn from
    inputs: Mapping[str, Any]  # the buffers the forward was given
    before: Mapping[str, torch.Tensor]  # their contents before the call
    result: object
    # Checked whatever the draw says (within max_checks): the timing stage picks one of the
    # profiled samples an eager forward's scored time is bounded by (timing.measure_forward).
    must_check: bool = False


class FreshInputs:
    """New contents for the timing buffers before every call (see the module docstring)."""

    def __init__(self, draw: Callable[[int], Inputs], buffers: Sequence[Inputs],
                 buffer_seeds: Sequence[int]) -> None:
        if len(buffers) != len(buffer_seeds) or not buffers:
            raise ValueError("one seed per buffer set, at least one set")
        self._draw = draw
        self.buffers = buffers
        self._buffer_seeds = list(buffer_seeds)
        probe = draw(secrets.randbits(63))
        self.fresh = all(same_layout(probe, b) for b in buffers)
        del probe
        self._pristine: list[dict[str, torch.Tensor]] | None = None if self.fresh else [
            {k: v.clone() for k, v in b.items() if isinstance(v, torch.Tensor)} for b in buffers]

    def refill(self, index: int) -> tuple[int, dict[str, torch.Tensor]]:
        """Give buffer set `index` new contents; return their seed and a copy of them."""
        buffers = self.buffers[index]
        if self._pristine is None:
            seed = secrets.randbits(63)
            source = {k: v for k, v in self._draw(seed).items() if isinstance(v, torch.Tensor)}
        else:
            seed = self._buffer_seeds[index]
            source = self._pristine[index]
        with torch.no_grad():
            for name, tensor in buffers.items():
                if isinstance(tensor, torch.Tensor):
                    tensor.copy_(source[name])
        return seed, source


def same_layout(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether contents drawn as `a` can be copied into the buffers `b` and mean the same."""
    if a.keys() != b.keys():
        return False
    for name, value in a.items():
        other = b[name]
        if isinstance(value, torch.Tensor) or isinstance(other, torch.Tensor):
            if not (isinstance(value, torch.Tensor) and isinstance(other, torch.Tensor)
                    and value.shape == other.shape and value.dtype == other.dtype
                    and value.device == other.device):
                return False
        else:
            try:
                if type(value) is not type(other) or bool(value != other):
                    return False
            except Exception:  # noqa: BLE001 - an uncomparable scalar: treat as different
                return False
    return True


class TimedCallChecks:
    """Picks timed calls to check after they returned, and saves what the parent needs."""

    def __init__(self, save: Callable[[TimedCall], dict[str, Any]], probability: float,
                 max_checks: int) -> None:
        if not 0.0 < probability <= 1.0 or max_checks < 1:
            raise ValueError("check probability in (0, 1] and at least one check")
        self._save = save
        self._threshold = int(probability * 2**32)
        self._max = max_checks
        self._latest: TimedCall | None = None
        self._latest_saved = False
        self.saved: list[dict[str, Any]] = []

    def after(self, call: TimedCall) -> None:
        self._latest, self._latest_saved = call, False
        if len(self.saved) < self._max and (call.must_check
                                            or secrets.randbits(32) < self._threshold):
            self._record(call)
            self._latest_saved = True

    def finish(self) -> list[dict[str, Any]]:
        """The saved checks; the last call is checked when no call was picked."""
        if not self.saved and self._latest is not None and not self._latest_saved:
            self._record(self._latest)
        self._latest = None  # the outputs it holds can be freed
        return self.saved

    def _record(self, call: TimedCall) -> None:
        entry = self._save(call)
        self.saved.append({**entry, "seed": call.seed, "sample": call.sample})
