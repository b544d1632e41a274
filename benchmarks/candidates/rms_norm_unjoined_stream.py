"""rms_norm in Triton on a side stream the forward never joins back (issue 43, a sloppy but
honest candidate): correct eagerly; a CUDA graph captured on the current stream misses its
kernel, so the evaluator must time it eagerly and say why. Derived from
evaluation/sample_candidates/rms_norm/triton_native.py."""

import torch
import triton
import triton.language as tl


@triton.jit
def _rms_norm_kernel(
    x_ptr, w_ptr, out_ptr, x_row_stride, out_row_stride, n_cols, eps,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    # Round to bf16 before the weight multiply, as the reference (vLLM) does.
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * out_row_stride + cols, (normed * w).to(out_ptr.dtype.element_ty),
             mask=mask)


def _num_warps(block: int) -> int:
    # About 8 elements per thread keeps loads vectorised without spilling.
    return max(1, min(16, block // 256))


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        n_rows, n_cols = x.shape
        out = torch.empty_like(x)
        block = triton.next_power_of_2(n_cols)
        # The kernel on a stream of its own, never joined back: right in every eager call
        # (the harness synchronizes the device before it reads), outside any CUDA graph
        # captured on the current stream.
        side = _side_stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            _rms_norm_kernel[(n_rows,)](
                x, weight, out, x.stride(0), out.stride(0), n_cols, self.eps,
                BLOCK=block, num_warps=_num_warps(block),
            )
        return out


_SIDE: list = []


def _side_stream() -> torch.cuda.Stream:
    if not _SIDE:
        _SIDE.append(torch.cuda.Stream())
    return _SIDE[0]
