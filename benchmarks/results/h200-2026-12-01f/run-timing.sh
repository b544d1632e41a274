#!/usr/bin/env bash
# The timing definition of 2026-12-02 on the GPU host: the harness through its sandbox on
# a graph-replayed Triton candidate and an eager public reference, then the measurement
# report (capture refusal, host-bound references, single kernels against ncu, the rest).
# Run from the checkout's root with the public release copied to .atrex-bench/.
set -x
export PYTHONUNBUFFERED=1 HOME=/tmp/home USER=root
mkdir -p "$HOME"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv
python3 -c "import torch; p = torch.cuda.get_device_properties(0); print(p, getattr(p, 'pci_bus_id', None), getattr(p, 'uuid', None))"
timeout 150 python3 -m evaluation evaluate --release evaluation/releases/atrex-fixture \
  --operator rms_norm --candidate evaluation/sample_candidates/rms_norm/triton_native.py \
  --shapes 'llama8b-decode-t1-h4096,llama8b-prefill-t4096-h4096' --json "$OUT/sanity-graph.json"
timeout 150 python3 -m evaluation evaluate --release .atrex-bench --hardware H20 \
  --operator mla_decode_attention --candidate .atrex-bench/data/mla_decode_attention/reference.py \
  --shapes 0 --json "$OUT/sanity-eager.json"
python3 benchmarks/measurement_report.py --public-release .atrex-bench --json "$OUT/measurement.json" \
  --doc "$OUT/measurement.md" --skip scored,cli --deadline-s "${DEADLINE:-430}" --reserve-s 60 \
  2>&1 | tee "$OUT/measurement.log"
