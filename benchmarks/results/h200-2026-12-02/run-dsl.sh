#!/usr/bin/env bash
# One H200 call, 2026-12-02 (issues 25 and 26). Run from the checkout's root with
# .cute/cute312.tar.xz carried: nvidia-cutlass-dsl 4.2.1's cp312 wheel unpacked and
# xz-compressed (43 MB, one call; the wheel itself is 62 MB). Then:
# 1. the output bomb again, now returning its output on the GPU (hostile_host_check.py);
# 2. a direct smoke run of the CuTe DSL and Gluon samples, no sandbox (diagnostics);
# 3. every DSL sample through the sandboxed evaluator (benchmarks/dsl_samples.py).
set -x
export PYTHONUNBUFFERED=1 HOME=/tmp/home USER=root
mkdir -p "$HOME" /tmp/cute
tar -C /tmp/cute -xJf .cute/cute312.tar.xz || exit 1
export PYTHONPATH=/tmp/cute/nvidia_cutlass_dsl/python_packages:/tmp/cute:$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c "import importlib.metadata as m; print('cutlass-dsl', m.version('nvidia-cutlass-dsl'), 'cuda-bindings', m.version('cuda-bindings'), 'triton', m.version('triton'))"
timeout 90 python3 benchmarks/hostile_host_check.py --release .atrex-bench --operator rms_norm \
  --cases output_bomb --json "$OUT/hostile-bomb.json" 2>&1 | grep -v -i warn | tail -8
timeout 120 python3 - <<'PY' 2>&1 | tail -40
import importlib.util, time, torch, traceback
def load(path):
    spec = importlib.util.spec_from_file_location("m", path); m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); return m
S = "evaluation/sample_candidates/"
x = torch.randn(64, 4096, dtype=torch.bfloat16, device="cuda"); w = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
ref_rms = (x.float() * torch.rsqrt(x.float().square().mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)
g = torch.randn(64, 2 * 3072, dtype=torch.bfloat16, device="cuda")
ref_silu = (torch.nn.functional.silu(g[:, :3072].float()).to(g.dtype) * g[:, 3072:])
a = torch.randn(48, 144, dtype=torch.float16, device="cuda"); b = torch.randn(144, 80, dtype=torch.float16, device="cuda")
ref_mm = (a.float() @ b.float()).to(a.dtype)
for name, args, ref in [("rms_norm/gluon_native.py", (x, w), ref_rms), ("rms_norm/cute_native.py", (x, w), ref_rms),
                        ("silu_and_mul/gluon_native.py", (g,), ref_silu), ("silu_and_mul/cute_native.py", (g,), ref_silu),
                        ("gemm_fp16/gluon_native.py", (a, b), ref_mm), ("gemm_fp16/cute_native.py", (a, b), ref_mm),
                        ("gemm_fp16/cute_torch_matmul.py", (a, b), ref_mm)]:
    try:
        t = time.perf_counter(); model = load(S + name).Model().cuda() if "rms" not in name else load(S + name).Model(1e-6)
        out = model(*args); torch.cuda.synchronize(); first = time.perf_counter() - t
        err = (out.float() - ref.float()).abs().max().item()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            model(*args); torch.cuda.synchronize()
        names = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
        print(f"SMOKE {name}: max err {err:.4g}, first call {first:.2f} s, kernels {names[:3]}")
    except Exception:
        print(f"SMOKE {name}: FAILED"); traceback.print_exc(limit=4)
PY
python3 benchmarks/dsl_samples.py --public-release .atrex-bench --json "$OUT/dsl-samples.json" \
  --md "$OUT/dsl-samples.md" --deadline-s 420 2>&1 | grep -v -i warn | tail -40
dmesg 2>/dev/null | grep -i -E "seccomp|audit" | tail -5
