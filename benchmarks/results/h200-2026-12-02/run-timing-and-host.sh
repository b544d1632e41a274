#!/usr/bin/env bash
# One H200 call, 2026-12-02 (issues 24 and 26). Run from the checkout's root with .whl/
# (scripts/device-wheels) and the public release in .atrex-bench/ carried.
# 1. the host-bound section under the eager rule without the upper bound, its harness and
#    uninstrumented timings alternating (measurement_report.py --host-bound-into);
# 2. five eager operators of the public baseline evaluated again through the portal's stack,
#    the other 25 carried over from the run of 2026-12-01 (eager ones re-derived), to set the
#    re-derivation beside a fresh run (public_baseline.py --evaluate-again);
# 3. hostile candidates against the GPU worker's path as root, sandbox and syscall filter on,
#    on two public rms_norm shapes, each followed by an honest job (hostile_host_check.py).
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HOME=/tmp/home USER=root
mkdir -p "$HOME"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
F=benchmarks/results/h200-2026-12-01f
timeout 170 python3 benchmarks/measurement_report.py --public-release .atrex-bench \
  --host-bound-into $F/measurement-1.json --json "$OUT/measurement.json" \
  --doc "$OUT/measurement.md" --deadline-s 150 2>&1 | grep -v -i warn | tee "$OUT/host-bound.log"
timeout 200 python3 benchmarks/public_baseline.py --release .atrex-bench --state /tmp/state \
  --carry-from $F/state.sqlite3 --rederive-eager \
  --evaluate-again attention_forward,chunk_delta_rule_output,mla_decode_attention,paged_attention_decode,reshape_and_cache \
  --deadline-s 170 --json "$OUT/baseline-check.json" 2>&1 | tee "$OUT/baseline-check.log"
cp /tmp/state/db.sqlite3 "$OUT/baseline-check.sqlite3"
timeout 200 python3 benchmarks/hostile_host_check.py --release .atrex-bench --operator rms_norm \
  --cases output_bomb,tmpfs_fill,fork_bomb,denied_syscall,cpu_mode_switch \
  --json "$OUT/hostile-host-check.json" 2>&1 | grep -v -i warn | tee "$OUT/hostile-host-check.log"
dmesg 2>/dev/null | grep -i -E "seccomp|oom" | tail -5
