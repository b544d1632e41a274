"""The body of `atrex_fixture_kernels`, a stand-in for an open kernel library (FlagGems,
Liger-Kernel): tests install it into a folder of their own with its dist-info
(tests/evaluation/test_library_kernels.py), as a GPU host installs a library's wheel."""

import importlib.util
import tempfile
from pathlib import Path

import torch
import triton
import triton.language as tl


@triton.jit
def fixture_rms_norm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (normed * w).to(out_ptr.dtype.element_ty), mask=mask)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    fixture_rms_norm_kernel[(n_rows,)](x, weight, out, n_cols, eps,
                                       BLOCK=triton.next_power_of_2(n_cols))
    return out


GENERATED = '''
import triton
import triton.language as tl


@triton.jit
def fixture_generated_rms_norm_kernel(x_ptr, w_ptr, out_ptr, n_cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    normed = (x * rstd).to(out_ptr.dtype.element_ty).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, (normed * w).to(out_ptr.dtype.element_ty), mask=mask)
'''


def rms_norm_generated(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """As FlagGems does for its pointwise kernels: the kernel's source is written into a
    cache folder at run time and imported from there."""
    path = Path(tempfile.gettempdir()) / "atrex_fixture_generated.py"
    path.write_text(GENERATED)
    spec = importlib.util.spec_from_file_location("atrex_fixture_generated", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    module.fixture_generated_rms_norm_kernel[(n_rows,)](x, weight, out, n_cols, eps,
                                                        BLOCK=triton.next_power_of_2(n_cols))
    return out
