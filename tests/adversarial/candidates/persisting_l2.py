"""persisting_l2: pin our inputs in a persisting-L2 carve-out so timed runs hit in L2.

Exploit: through the CUDA runtime (ctypes, the libcudart torch already loaded) the
candidate raises the persisting-L2 limit to the device maximum
(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize)) and sets an access-policy window on
the current stream covering `x` and `weight` with hitRatio 1 and hitProp = persisting
(cudaStreamSetAttribute(cudaStreamAttributeAccessPolicyWindow)). Lines of the window then
survive other traffic, including an L2 sweep that streams through normal lines, so every
timed sample after the first reads its inputs from L2 instead of HBM. Kernel nodes captured
into a CUDA graph keep the window as a node attribute. The cheater hopes for a memory-bound
kernel timed at L2 bandwidth (several times HBM).

What should catch it: the timing stage calls cudaCtxResetPersistingL2Cache before every
sample (timing_host.persisting_l2_resetter) and then sweeps L2, so persisting lines are demoted
and evicted before each measurement; it also records persisting_l2_reset in the report.
A stricter harness would also reset cudaLimitPersistingL2CacheSize to 0 before timing.

GPU-only: on the CPU there is no CUDA runtime; the candidate computes honestly.
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


_CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
_CUDA_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1
_CUDA_ACCESS_PROPERTY_STREAMING = 1
_CUDA_ACCESS_PROPERTY_PERSISTING = 2
_CUDA_DEV_ATTR_MAX_PERSISTING_L2_CACHE_SIZE = 108


class _AccessPolicyWindow(ctypes.Structure):
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t),
                ("hitRatio", ctypes.c_float), ("hitProp", ctypes.c_int),
                ("missProp", ctypes.c_int)]


class _StreamAttrValue(ctypes.Union):  # cudaLaunchAttributeValue: 64 bytes in CUDA 12
    _fields_ = [("accessPolicyWindow", _AccessPolicyWindow), ("pad", ctypes.c_char * 64)]


def _cudart():
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                if "libcudart.so" in line:
                    return ctypes.CDLL(line.split()[-1])
    except OSError:
        pass
    return None


class _Carveout:
    def __init__(self) -> None:
        self.lib = _cudart() if torch.cuda.is_available() else None
        self.limit_set = False

    def pin(self, tensors) -> None:
        if self.lib is None:
            return
        lib = self.lib
        if not self.limit_set:
            size = ctypes.c_int(0)
            lib.cudaDeviceGetAttribute(ctypes.byref(size),
                                       _CUDA_DEV_ATTR_MAX_PERSISTING_L2_CACHE_SIZE,
                                       torch.cuda.current_device())
            lib.cudaDeviceSetLimit(_CUDA_LIMIT_PERSISTING_L2_CACHE_SIZE,
                                   ctypes.c_size_t(size.value))
            self.limit_set = True
        start = min(t.data_ptr() for t in tensors)
        end = max(t.data_ptr() + t.numel() * t.element_size() for t in tensors)
        value = _StreamAttrValue()
        value.accessPolicyWindow = _AccessPolicyWindow(
            start, end - start, 1.0, _CUDA_ACCESS_PROPERTY_PERSISTING,
            _CUDA_ACCESS_PROPERTY_STREAMING)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        lib.cudaStreamSetAttribute(stream, _CUDA_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW,
                                   ctypes.byref(value))


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self._carveout = _Carveout()

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        self._carveout.pin((x, weight))
        return _rms_norm(x, weight, self.eps)
