"""Device memory shared by the two sides of an evaluation.

The trusted parent and the sandboxed child run on one GPU, each with its own caching
allocator: memory one process freed but keeps cached is memory the other cannot get. Both
hand their cache back after each stage, and both allocate in expandable segments, which
keep a large shape's blocks from fragmenting the cache (an H200 run of a public fp8 MoE
shape failed asking 28 GiB with 49 GiB "reserved but unallocated").

Imports torch only inside its functions: the sandbox module, which is torch-free, reads
the allocator setting from here for the child's environment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

CUDA_ALLOCATOR_SETTINGS = "expandable_segments:True"  # the child's PYTORCH_CUDA_ALLOC_CONF


def configure_cuda_allocator() -> None:
    """Expandable segments for this process's CUDA allocations from now on."""
    import torch

    # torch 2.11 warns that the CUDA-specific setter is deprecated for the accelerator one;
    # older releases have only the former
    setter = getattr(torch._C, "_accelerator_setAllocatorSettings", None) \
        or getattr(torch.cuda.memory, "_set_allocator_settings", None)
    if setter is not None and torch.cuda.is_available():
        setter(CUDA_ALLOCATOR_SETTINGS)


def release_cached_memory(device: torch.device) -> None:
    """Hand this process's cached, unused device memory back to the GPU."""
    import torch

    if device.type == "cuda":
        torch.cuda.empty_cache()


def is_out_of_memory(exc: BaseException) -> bool:
    """A CUDA allocation failure (torch.OutOfMemoryError, or the RuntimeError older torch
    raised): the process's CUDA context is still usable afterwards."""
    import torch

    error = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    if error is not None and isinstance(exc, error):
        return True
    return isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc)
