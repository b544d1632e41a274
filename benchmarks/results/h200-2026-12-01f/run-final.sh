#!/usr/bin/env bash
# After the first measurement run: the host-bound section again, its two timings alternating
# (measurement_report.py --host-bound-into), and the GPU-only adversarial cases with the new
# timing code (benchmarks/adversarial_gpu.py). Run from the checkout's root with the public
# release in .atrex-bench/ and the first run's JSON in .baseline-state/measurement-1.json.
set -x
export PYTHONUNBUFFERED=1 HOME=/tmp/home USER=root
mkdir -p "$HOME"
python3 benchmarks/measurement_report.py --public-release .atrex-bench \
  --host-bound-into .baseline-state/measurement-1.json --json "$OUT/measurement.json" \
  --doc "$OUT/measurement.md" --deadline-s 150 2>&1 | grep -v -i warn | tee "$OUT/host-bound.log"
python3 benchmarks/adversarial_gpu.py --out "$OUT/integrity-gpu.md" --deadline-s 150 \
  --cases side_stream,forge_marker,cache_id_version,cache_fingerprint,batch_and_skip,persisting_l2,timing_path_switch,warmup_detect,call_count_skip,gpu_oom,huge_host_alloc \
  2>&1 | grep -v -i warn | tee "$OUT/adversarial.log"
