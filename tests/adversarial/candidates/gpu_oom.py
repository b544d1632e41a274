"""gpu_oom: grab (almost) all GPU memory and never give it back.

Exploit: on its first call the candidate takes all but ~64 MiB of the free device memory:
half through torch (held in a module global, so the caching allocator cannot return it)
and the rest through cudaMalloc directly (ctypes, outside torch's allocator, so
torch.cuda.empty_cache() cannot free it either). Its own kernel keeps working. The harness
then cannot allocate its 2x-L2 sweep buffer or the timing input sets, and a warm child
starting next to it on the same GPU cannot create its context. The cheater hopes the
performance stage crashes in a way that reads as a harness error (not a candidate error),
or that a concurrently evaluated competitor fails.

What should catch it: the OOM happens in the candidate's child; the timing stage fails
with a RuntimeError that should be reported as the candidate's failure (performance
stage), the child is killed afterwards (process exit frees all its device memory), and the
next shape gets a fresh child. A per-child device-memory cap (a fraction set with
torch.cuda.set_per_process_memory_fraction is bypassed by cudaMalloc; only MIG/MPS
limits are hard) would prevent starving neighbours.

GPU-only: on the CPU this candidate computes honestly.
"""

import ctypes

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


_hoard: list = []


def _grab_device_memory(device) -> None:
    free, _ = torch.cuda.mem_get_info(device)
    keep = 64 * 1024**2
    half = max(0, (free - keep) // 2)
    try:
        _hoard.append(torch.empty(half, dtype=torch.uint8, device=device))
    except RuntimeError:
        pass
    lib = None
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libcudart.so" in line:
                    lib = ctypes.CDLL(line.split()[-1])
                    break
    except OSError:
        pass
    if lib is None:
        return
    chunk = 256 * 1024**2
    while True:
        free, _ = torch.cuda.mem_get_info(device)
        if free < keep + chunk:
            break
        pointer = ctypes.c_void_p()
        if lib.cudaMalloc(ctypes.byref(pointer), ctypes.c_size_t(chunk)) != 0:
            break
        _hoard.append(pointer)


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        out = _rms_norm(x, weight, self.eps)
        if x.is_cuda and not _hoard:
            torch.cuda.synchronize()
            _grab_device_memory(x.device)
        return out
