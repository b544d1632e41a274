"""What keeps the timed calls honest: fresh contents the parent chose, and checks it picked.

A timing loop calls the forward many times on a few fixed buffers (CUDA-graph replay needs
fixed addresses). Left alone, that is the loop cheaters optimise for: cache the output by
data_ptr, id/_version or a fingerprint of the inputs, do the work of the next calls in
this one and skip them, or behave only while the correctness trials watch. The defences
run in the child between two timed calls (timing.measure_forward on a GPU, a few
unmeasured calls on a CPU), in this order (`TimedCallFlow.before`):

1. The child's state is checked (the `guard`: the integrity fingerprint's cheap part and
   every hook the candidate could have left to run inside the harness's calls; child.py).
2. The child asks the parent, over its own channel, what happens next: whether the call
   that just returned is checked, and the seed of the next call's contents. Both are drawn
   by the trusted parent after that call returned: nothing in the child (whatever the
   candidate patched there: `secrets`, `random`, the generators) chooses or predicts them.
3. A checked call's outputs (and any inputs it changed) are saved and handed over; the
   parent judges them against the reference for the seed *it* gave, and compares a few
   bytes of the contents the call was given with its own draw of that seed.
4. The buffers get the new contents, drawn by the operator's input.py from that seed and
   copied in place (same addresses, a bumped version) with Python's dispatch off. Where a
   new draw does not fit the buffers (input.py makes seed-dependent shapes or scalars), the
   buffers are restored from pristine copies of their own draws instead, and the report
   says so (`fresh_inputs: false`).

On a GPU the device's own records then say whether anything but this ran between two
samples (timing_records.check_gaps).
"""

from __future__ import annotations

import contextlib
import gc
import secrets
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import torch

Inputs = dict[str, Any]
# The child's question to the parent and the parent's answer (child_timing.TimingRequests._ask)
Ask = Callable[[dict[str, Any]], Mapping[str, Any]]
INPUT_SAMPLE_ELEMENTS = 64  # elements of each input the parent compares with its own draw


class FlowError(Exception):
    """The parent's answers do not follow the protocol (or a check failed on the way)."""


@dataclass
class TimedCall:
    """One call to the candidate's forward inside the timing stage."""

    sample: int
    seed: int  # the seed the contents of `inputs` were drawn from
    inputs: Mapping[str, Any]  # the buffers the forward was given
    before: Mapping[str, torch.Tensor]  # their contents before the call
    result: object


class FreshInputs:
    """New contents for the timing buffers before every call (see the module docstring)."""

    def __init__(self, draw: Callable[[int], Inputs], buffers: Sequence[Inputs],
                 buffer_seeds: Sequence[int]) -> None:
        if len(buffers) != len(buffer_seeds) or not buffers:
            raise ValueError("one seed per buffer set, at least one set")
        self._draw = draw
        self.buffers = buffers
        self.buffer_seeds = list(buffer_seeds)
        # whether a draw of another seed fits the buffers (the probe's contents are unused)
        probe = draw(self.buffer_seeds[-1] + 1)
        self.fresh = all(same_layout(probe, b) for b in buffers)
        del probe
        self._pristine: list[dict[str, torch.Tensor]] | None = None if self.fresh else [
            {k: v.clone() for k, v in b.items() if isinstance(v, torch.Tensor)} for b in buffers]

    def refill(self, index: int, seed: int) -> tuple[int, dict[str, torch.Tensor]]:
        """Give buffer set `index` the contents of `seed` (its own pristine contents where
        draws do not fit); return the seed they come from and a copy of them."""
        buffers = self.buffers[index]
        with no_python_dispatch():
            if self._pristine is None:
                source = {k: v for k, v in self._draw(seed).items() if isinstance(v, torch.Tensor)}
            else:
                seed = self.buffer_seeds[index]
                source = self._pristine[index]
            with torch.no_grad():
                for name, tensor in buffers.items():
                    if isinstance(tensor, torch.Tensor):
                        tensor.copy_(source[name])
        return seed, source


@contextlib.contextmanager
def no_python_dispatch() -> Iterator[None]:
    """Tensor subclasses' and modes' __torch_dispatch__ off (the guard has already found
    the mode stacks empty; this holds even for a mode it could not see)."""
    with torch._C._DisableTorchDispatch():
        yield


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No collection while the harness draws: a collection runs the finalizers of whatever
    the candidate left in reference cycles, in the middle of the harness's work."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


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


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two tensors hold the same bytes (a changed input, NaNs included)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8)))


def rehearse_gap(draw: Callable[[int], Inputs], seed: int) -> Callable[[Callable[[], None]], None]:
    """The harness's work between two timed calls, done by the trusted side on its own
    tensors so the device can record which kernels that work launches (timing.gap_allowance):
    returns a function that runs it, calling `divide()` between the draw and a check's save."""
    buffers = {k: v for k, v in draw(seed).items() if isinstance(v, torch.Tensor)}

    def run(divide: Callable[[], None]) -> None:
        source = {k: v for k, v in draw(seed + 1).items() if isinstance(v, torch.Tensor)}
        with torch.no_grad():  # FreshInputs.refill
            for name, tensor in buffers.items():
                tensor.copy_(source[name])
        divide()
        for name, tensor in source.items():  # a checked call's save (child_core._save_call)
            bitwise_equal(tensor, buffers[name])
        input_sample(source)
    return run


def input_sample(contents: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """The first bytes of each contiguous input, hex: the parent redraws them from its seed
    and says so when the call was given anything else (a pinned or replaced draw)."""
    sample: dict[str, str] = {}
    for name, tensor in contents.items():
        if isinstance(tensor, torch.Tensor) and tensor.is_contiguous() and tensor.numel():
            head = tensor.detach().reshape(-1)[:INPUT_SAMPLE_ELEMENTS]
            sample[name] = head.cpu().contiguous().view(torch.uint8).numpy().tobytes().hex()
    return sample


class AttributeWatch:
    """The harness's own objects in the timing loop, as they were set up: a candidate can
    reach any of them (gc.get_objects()) and replace a part (the flow's guard, the sweep's
    buffer, the draw) without touching a function the fingerprint covers."""

    def __init__(self) -> None:
        self._watched: list[tuple[str, object, dict[str, int]]] = []

    def add(self, label: str, obj: object, names: Sequence[str]) -> None:
        self._watched.append((label, obj, {n: id(getattr(obj, n)) for n in names}))

    def refresh(self, obj: object, name: str) -> None:
        """The harness changed `obj.name` itself: what it is now is what it must stay."""
        for _, watched, idents in self._watched:
            if watched is obj and name in idents:
                idents[name] = id(getattr(obj, name))

    def changed(self) -> list[str]:
        found = []
        for label, obj, idents in self._watched:
            state = vars(obj)
            found += [f"{label}.{n}" for n, ident in idents.items() if id(state.get(n)) != ident]
            # an instance attribute that hides a method of the object's class
            found += [f"{label}.{n} (on the instance)" for n in state if hasattr(type(obj), n)]
        return found


class Flow(Protocol):
    """What the timing loop (timing.Sampler) does between two calls."""

    @property
    def checks_saved(self) -> int: ...
    def watch(self, label: str, obj: object, names: Sequence[str]) -> None: ...
    def check_every(self, calls: int) -> None: ...

    def before(self, index: int) -> tuple[int, dict[str, torch.Tensor]]: ...
    def after(self, call: TimedCall) -> None: ...
    def pick_one_of_next(self, count: int) -> None: ...
    def settle(self) -> None: ...


class UncheckedFlow:
    """For measuring scripts and tests outside the sandbox: fresh contents from local
    seeds (or none), nothing checked."""

    checks_saved: int = 0

    def __init__(self, fresh: FreshInputs | None = None) -> None:
        self.fresh = fresh

    def watch(self, label: str, obj: object, names: Sequence[str]) -> None:
        pass

    def check_every(self, calls: int) -> None:
        pass

    def before(self, index: int) -> tuple[int, dict[str, torch.Tensor]]:
        if self.fresh is None:
            return 0, {}
        return self.fresh.refill(index, secrets.randbits(63))

    def after(self, call: TimedCall) -> None:
        pass

    def pick_one_of_next(self, count: int) -> None:
        pass

    def settle(self) -> None:
        pass


class TimedCallFlow:
    """The harness's side of the timed calls: what happens between two of them.

    `before(i)` settles the call that returned last (checked or not, as the parent says),
    checks the child's state and gives buffer set i the parent's next contents; `after`
    keeps the call until it is settled; `settle` settles it now (at the end of a profiled
    batch, so a checked call is saved while the device is still recorded); `finish` settles
    the last one (the parent checks it if it checked none) and says how many were checked.
    """

    def __init__(self, fresh: FreshInputs, ask: Ask, save: Callable[[TimedCall], dict[str, Any]],
                 guard: Callable[[bool], None]) -> None:
        self.fresh = fresh
        self._ask = ask
        self._save = save
        self._guard = guard
        self.calls = 0  # calls whose contents the parent gave
        self.thorough_every = 1  # check_every
        self.saved: list[dict[str, Any]] = []
        self._pending: TimedCall | None = None
        self._pending_chance = 0.0
        # A batch one of whose calls must be checked (the profiled one an eager forward's
        # score is bounded by): [calls in it, calls seen, whether one was checked]
        self._must_pick: list[int] | None = None
        self.watched = AttributeWatch()
        self.watched.add("TimedCallFlow", self, ["fresh", "_ask", "_save", "_guard", "watched",
                                                 "saved", "thorough_every"])
        self.watched.add("FreshInputs", fresh, ["_draw", "buffers", "buffer_seeds",
                                                "_pristine", "fresh"])

    def watch(self, label: str, obj: object, names: Sequence[str]) -> None:
        """Another harness object of the loop to check between calls (timing.Sampler)."""
        self.watched.add(label, obj, names)

    def check_every(self, calls: int) -> None:
        """The whole guard before every `calls`-th call, its cheap part before the others.
        A forward replayed from a graph runs no code of the candidate's between calls: only
        something it left installed could, which the cheap part looks for every time."""
        self.thorough_every = max(1, calls)
        self.watched.refresh(self, "thorough_every")

    def check(self, thorough: bool = True) -> None:
        """The guard, after the loop's own objects were found as they were set up."""
        replaced = self.watched.changed()
        if replaced:
            raise FlowError("integrity check failed: the candidate replaced "
                            f"{', '.join(replaced[:8])} in the timing loop")
        self._guard(thorough)

    def before(self, index: int) -> tuple[int, dict[str, torch.Tensor]]:
        self.check(thorough=self.calls % self.thorough_every == 0)
        saved = len(self.saved)
        answer = self._exchange(draw=True)
        seed = answer.get("seed")
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise FlowError("the parent's answer holds no seed for the next call")
        if len(self.saved) > saved:
            self.check()  # a check's save ran harness code on the candidate's outputs
        with gc_paused():
            contents = self.fresh.refill(index, seed)
        self.calls += 1
        return contents

    @property
    def checks_saved(self) -> int:
        return len(self.saved)

    def after(self, call: TimedCall) -> None:
        self._pending = call
        batch = self._must_pick
        self._pending_chance = 0.0
        if batch is not None and batch[1] < batch[0]:
            size, seen, picked = batch
            if not picked:  # each call of the batch equally likely to be the checked one
                self._pending_chance = 1.0 / (size - seen)
            batch[1] = seen + 1

    def pick_one_of_next(self, count: int) -> None:
        """One of the next `count` calls is checked (within the parent's limit)."""
        self._must_pick = [count, 0, 0] if count > 0 else None

    def settle(self) -> None:
        if self._pending is not None:
            self.check()
            self._exchange(draw=False)

    def finish(self) -> list[dict[str, Any]]:
        if self._pending is not None:
            self.check()
            self._exchange(draw=False, last=True)
        self.check()
        return self.saved

    def _exchange(self, *, draw: bool, last: bool = False) -> Mapping[str, Any]:
        pending, self._pending = self._pending, None
        question: dict[str, Any] = {
            "returned": None if pending is None else pending.sample,
            "chance": self._pending_chance, "next": self.calls if draw else None,
            "last": last, "fresh": self.fresh.fresh}
        answer = self._ask(question)
        check = answer.get("check")
        if check is not True and check is not False:
            raise FlowError("the parent's answer says neither check nor not")
        if check:
            if pending is None:
                raise FlowError("the parent picked a call that did not run")
            if self._must_pick is not None:
                self._must_pick[2] = 1
            self.saved.append({**self._save(pending), "seed": pending.seed,
                               "sample": pending.sample})
        return answer


class CallPlan:
    """The parent's side of the timed calls (stages/performance._TimedCallJudge): the seed of each
    call's contents and whether each call is checked, drawn from `draw` (63-bit values from
    the trusted side's seed source) after the call before returned.

    A call is checked with `probability`, or the chance the child's harness asks for (the
    profiled batch one of whose calls must be checked), at most `max_checks` in all; the
    last call is checked if no other was. Questions out of order are a FlowError."""

    def __init__(self, draw: Callable[[], int], probability: float, max_checks: int) -> None:
        if not 0.0 < probability <= 1.0 or max_checks < 1:
            raise ValueError("check probability in (0, 1] and at least one check")
        self._draw = draw
        self.probability, self.max_checks = probability, max_checks
        self.given: list[int] = []  # the seed of each call's contents, in order
        self.settled = 0  # calls whose check was decided
        self.fresh: bool | None = None
        self.picked: list[int] = []

    def answer(self, question: Mapping[str, Any]) -> dict[str, Any]:
        returned, following = question.get("returned"), question.get("next")
        fresh, chance, last = question.get("fresh"), question.get("chance"), question.get("last")
        if not (isinstance(fresh, bool) and (self.fresh is None or fresh == self.fresh)
                and isinstance(chance, int | float) and not isinstance(chance, bool)
                and 0 <= chance <= 1 and isinstance(last, bool)
                and (returned is None or returned == self.settled == len(self.given) - 1)
                and (following is None or following == len(self.given) == self.settled
                     + (returned is not None))):
            raise FlowError("the child's question between two timed calls does not follow "
                            "the protocol")
        self.fresh = fresh
        check = False
        if returned is not None:
            self.settled += 1
            odds = max(self.probability, float(chance))
            check = len(self.picked) < self.max_checks and (
                odds >= 1.0 or self._draw() / 2**63 < odds or (last and not self.picked))
            if check:
                self.picked.append(returned)
        answer: dict[str, Any] = {"check": check}
        if following is not None:
            seed = self._draw()
            self.given.append(seed)
            answer["seed"] = seed
        return answer

    def finished(self) -> bool:
        """Every call that was given contents was settled, and one at least checked."""
        return self.settled == len(self.given) and bool(self.picked)

