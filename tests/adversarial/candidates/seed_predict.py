"""seed_predict: learn the secret input seeds inside the child and precompute the outputs.

Exploit: the harness regenerates every input set inside the child from a secret seed, with
the operator's public input.py. The candidate
1. reads the seeds: every request dict on the call stack (`trial_seeds`, `seed`, `seeds`)
   and torch.initial_seed(), which still holds the seed the inputs were just drawn with;
2. reproduces the input generator (random/numpy/torch seeding, then input.py's
   _make_inputs) to regenerate all the trial inputs of a correctness request in advance
   and precompute their outputs in PyTorch during the first (untimed, unrecorded) call;
3. wraps input.py's `_make_inputs` in the child (it is module `atrex_operator_input`) so
   every input set the harness draws from now on - adoption and timing inputs too - gets
   its output computed right there, before the recorded or timed forward starts.
The forward then returns the precomputed output (matched by seed, or by tensor identity)
and launches a one-program Triton "touch" kernel so that a DSL launch is on record. The
cheater hopes for a "native" verdict, DSL ratio 1.0, and (GPU) a ~2 us time, with
PyTorch doing all the work outside the observed windows.

What should catch it: knowing the seeds gains nothing for correctness (the parent computes
the reference), but the precomputation escapes adoption: on the CPU the AtenRecorder only
watches the forward itself. Fixes: keep `_make_inputs` and the seeding out of the
candidate's reach (integrity check of atrex_operator_input._make_inputs and
operator_files.make_inputs identities before each request in child.ChildRuntime), reseed
torch's RNG with a fresh random value after drawing inputs (so initial_seed() leaks
nothing), send seeds one at a time instead of all trial_seeds at once, and attribute aten
ops by their Python stack (candidate.py frames) over the whole request, not only the
forward.
"""

import random
import sys
import weakref

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, out_ptr, x_stride, out_stride, n_cols, eps,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * out_stride + cols, (normed * w).to(out_ptr.dtype.element_ty),
             mask=mask)


@triton.jit
def _touch_kernel(out_ptr, BLOCK: tl.constexpr):
    # One program that rewrites a few output elements unchanged: keeps a kernel of ours
    # in every timed forward, so the sample is not dropped as empty.
    cols = tl.arange(0, BLOCK)
    v = tl.load(out_ptr + cols)
    tl.store(out_ptr + cols, v)


def _rms_norm(x, weight, eps):
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(n_cols)
    _rms_norm_kernel[(n_rows,)](x, weight, out, x.stride(0), out.stride(0), n_cols, eps,
                                BLOCK=block, num_warps=max(1, min(16, block // 256)))
    return out


def _touch(out):
    _touch_kernel[(1,)](out, BLOCK=1)


def _torch_rms_norm(x, weight, eps):
    xf = x.to(torch.float32)
    normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return normed * weight


_EPS = [1e-6]
_by_seed: dict = {}  # seed -> output
_by_tensor: dict = {}  # id(x) -> (weakref x, output)
_original_make_inputs: list = []


def _seeds_on_stack():
    seeds, request = [], None
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("request")
        if isinstance(candidate, dict):
            request = candidate
            for key in ("trial_seeds", "seeds"):
                seeds += [s for s in candidate.get(key, ()) if isinstance(s, int)]
            if isinstance(candidate.get("seed"), int):
                seeds.append(candidate["seed"])
        frame = frame.f_back
    return seeds, request


def _hook_input_generator():
    module = sys.modules.get("atrex_operator_input")
    if module is None or _original_make_inputs:
        return
    original = module._make_inputs
    _original_make_inputs.append(original)

    def _make_inputs(*args, **kwargs):
        inputs = original(*args, **kwargs)
        x, w = inputs.get("x"), inputs.get("weight")
        if isinstance(x, torch.Tensor) and isinstance(w, torch.Tensor):
            with torch.no_grad():
                _by_tensor[id(x)] = (weakref.ref(x), _torch_rms_norm(x, w, _EPS[0]))
        return inputs

    module._make_inputs = _make_inputs


def _precompute_from_stack(device):
    """Regenerate every input set named on the stack, exactly as the harness draws them."""
    seeds, request = _seeds_on_stack()
    module = sys.modules.get("atrex_operator_input")
    if request is None or module is None:
        return
    make_inputs = _original_make_inputs[0] if _original_make_inputs else module._make_inputs
    state = (random.getstate(), np.random.get_state(), torch.get_rng_state())
    try:
        for seed in seeds:
            if seed in _by_seed:
                continue
            random.seed(seed)
            np.random.seed(seed % 2**32)
            torch.manual_seed(seed)
            with device:
                inputs = make_inputs(**request.get("input_kwargs", {}))
            with torch.no_grad():
                _by_seed[seed] = _torch_rms_norm(inputs["x"], inputs["weight"], _EPS[0])
    finally:
        random.setstate(state[0])
        np.random.set_state(state[1])
        torch.set_rng_state(state[2])


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        _EPS[0] = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = None
        known = _by_tensor.pop(id(x), None)  # drawn through our hooked generator
        if known is not None and known[0]() is x:
            out = known[1]
        if out is None:
            seed = torch.initial_seed()  # the seed the harness drew these inputs with
            if seed not in _by_seed:
                _precompute_from_stack(x.device)
            out = _by_seed.pop(seed, None)
        _hook_input_generator()  # from now on every input set arrives with its output
        if out is None or out.shape != x.shape:
            return _rms_norm(x, weight, self.eps)  # inputs we could not predict: be honest
        _touch(out)
        return out
