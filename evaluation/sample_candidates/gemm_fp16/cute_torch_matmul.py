"""Dishonest: declared CuTe DSL, but the product is `torch.matmul` (cuBLAS); a CuTe DSL
kernel only casts its fp32 result to fp16. Expected on a GPU: correct outputs, verdict
mixed (a small DSL ratio), the cuBLAS kernels named as vendor work."""

import cuda.bindings.driver as cuda
import cutlass
import cutlass.cute as cute
import torch
from cutlass.cute.runtime import from_dlpack

THREADS = 256


@cute.kernel
def cast_kernel(src: cute.Tensor, dst: cute.Tensor, n: cutlass.Int32, total: cutlass.Int32):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    index = bidx * THREADS + tidx
    if index < total:
        dst[index // n, index % n] = src[index // n, index % n].to(dst.element_type)


@cute.jit
def cast(src: cute.Tensor, dst: cute.Tensor, n: cutlass.Int32, total: cutlass.Int32,
         blocks: cutlass.Int32, stream: cuda.CUstream):
    cast_kernel(src, dst, n, total).launch(grid=(blocks, 1, 1), block=(THREADS, 1, 1),
                                           stream=stream)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self._compiled: dict[tuple[object, ...], object] = {}

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        product = torch.matmul(a.to(torch.float32), b.to(torch.float32))
        out = torch.empty(product.shape, dtype=a.dtype, device=a.device)
        total = product.numel()
        args = (from_dlpack(product), from_dlpack(out), product.shape[1], total,
                (total + THREADS - 1) // THREADS,
                cuda.CUstream(torch.cuda.current_stream().cuda_stream))
        key = tuple(product.shape)
        if key not in self._compiled:
            self._compiled[key] = cute.compile(cast, *args)
        self._compiled[key](*args)
        return out
