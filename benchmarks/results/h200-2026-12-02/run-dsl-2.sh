#!/usr/bin/env bash
# Second DSL call, 2026-12-02: the CuTe DSL cases again after crediting device kernels by the
# names the candidate's own source compiled (dsl.credit_compiled), and the public rms_norm in
# CuTe DSL over all 56 shapes. Carry .cute/ and .atrex-bench/ as for run-dsl.sh.
set -x
export PYTHONUNBUFFERED=1 HOME=/tmp/home USER=root
mkdir -p "$HOME" /tmp/cute
[ -d /tmp/cute/nvidia_cutlass_dsl ] || tar -C /tmp/cute -xJf .cute/cute312.tar.xz || exit 1
export PYTHONPATH=/tmp/cute/nvidia_cutlass_dsl/python_packages:/tmp/cute:$PWD
python3 benchmarks/dsl_samples.py --public-release .atrex-bench \
  --cases "rms_norm cute,silu_and_mul cute,gemm_fp16 cute,gemm_fp16 cute calling torch.matmul,silu_and_mul Triton file declared CuTe DSL,public rms_norm cute" \
  --json "$OUT/dsl-samples-cute.json" --md "$OUT/dsl-samples-cute.md" --deadline-s 330 2>&1 \
  | grep -v -i warn | tail -12
