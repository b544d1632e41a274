"""huge_host_alloc: take as much host memory as the sandbox allows and keep it.

Exploit: on its first call the candidate first asks for one 48 GiB tensor (beyond the
child's RLIMIT_AS of 32 GiB on the CPU), and when that is refused it allocates and touches
256 MiB chunks, holding them in a module global for the life of the child, then returns a
correct Triton result so the shape passes. The cheater hopes to push the host into the
OOM killer (which may pick the worker, the broker, or another team's child) or into swap,
and slow or kill evaluations running beside it.

What should catch it: RLIMIT_AS (sandbox.SandboxSettings.cpu_address_space_bytes, 32 GiB,
CPU only) refuses the single huge allocation. The chunked version is only stopped by that
same limit, and 32 GiB is more than this host has (23 GiB RAM, no swap): the limit does not
protect the host. MILDER THAN A REAL ATTACK: the chunk loop stops at CAP_BYTES (3 GiB) so
this test cannot threaten the machine; a real attack has no cap. A cgroup memory.max per
child (or RLIMIT_AS below the host's free memory; on GPU hosts, where RLIMIT_AS cannot be
used, a cgroup) would contain it.
"""

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


CAP_BYTES = 3 * 1024**3  # milder than a real attack: see the docstring
CHUNK_BYTES = 256 * 1024**2
_hoard: list = []
_notes: list = []


def _grab_host_memory() -> None:
    try:
        _hoard.append(torch.empty(48 * 1024**3, dtype=torch.uint8).fill_(1))
        _notes.append("48 GiB granted")
        return
    except (RuntimeError, MemoryError) as exc:
        _notes.append("48 GiB refused: %s" % str(exc).splitlines()[0][:120])
    held = 0
    while held + CHUNK_BYTES <= CAP_BYTES:
        try:
            chunk = torch.empty(CHUNK_BYTES, dtype=torch.uint8)
            chunk.fill_(1)  # touch every page
        except (RuntimeError, MemoryError) as exc:
            _notes.append("chunk refused after %d MiB: %s" % (held >> 20, exc))
            break
        _hoard.append(chunk)
        held += CHUNK_BYTES
    _notes.append("holding %d MiB" % (held >> 20))


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        if not _notes:
            _grab_host_memory()
        return _rms_norm(x, weight, self.eps)
