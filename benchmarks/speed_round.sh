#!/bin/bash
# The speed issue's H200 round in one device call: rms_norm on the worker's path under both stop
# rules, the portal's path, the public references, the repeat figures. Writes into $OUT.
# QUICK=1: rms_norm on the worker's and the portal's paths only (no command line, no references).
# REFERENCES=1: only the public unified_attention and fused_moe references, their first 3 shapes,
# on the worker's path and through the portal (ATREX_SHAPE_FILTER keeps the portal's jobs to them).
export HOME=/tmp/home USER=root PYTHONUNBUFFERED=1; mkdir -p $HOME $OUT; [ -d /tmp/site/celery ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl; export PYTHONPATH=/tmp/site:$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt
R=.atrex-bench; C=evaluation/sample_candidates/rms_norm/triton_native.py; MODES=cli,worker; [ -n "$QUICK" ] && MODES=worker
if [ -n "$REFERENCES" ]; then
  for op in unified_attention fused_moe; do
    timeout 110 python3 benchmarks/worker_speed.py --release $R --operator $op --candidate $R/data/$op/reference.py --modes worker --jobs 1 --shapes 3 --json $OUT/worker-$op.json > $OUT/worker-$op.log 2>&1; head -4 $OUT/worker-$op.log
    ATREX_SHAPE_FILTER='[012]' timeout 150 python3 benchmarks/scale_out.py --workers 1 --submissions 1 --release $R --candidate $op=$R/data/$op/reference.py --json $OUT/portal-$op.json > $OUT/portal-$op.log 2>&1; tail -4 $OUT/portal-$op.log
  done
  exit 0
fi
timeout 220 python3 benchmarks/worker_speed.py --release $R --operator rms_norm --candidate $C --modes $MODES --jobs 2 --steps --json $OUT/rms_norm-median.json > $OUT/rms_norm-median.log 2>&1; tail -25 $OUT/rms_norm-median.log
timeout 150 python3 benchmarks/worker_speed.py --release $R --operator rms_norm --candidate $C --modes worker --jobs 2 --steps --stop-rule mean --json $OUT/rms_norm-mean.json > $OUT/rms_norm-mean.log 2>&1; head -8 $OUT/rms_norm-mean.log
timeout 150 python3 benchmarks/scale_out.py --workers 1 --submissions 2 --release $R --candidate rms_norm=$C --json $OUT/portal.json > $OUT/portal.log 2>&1; tail -6 $OUT/portal.log
[ -n "$QUICK" ] || for op in unified_attention fused_moe; do timeout 110 python3 benchmarks/worker_speed.py --release $R --operator $op --candidate $R/data/$op/reference.py --modes cli,worker --jobs 1 --shapes 3 --steps > /tmp/$op.log 2>&1; head -24 /tmp/$op.log; done > $OUT/references.log 2>&1; cat $OUT/references.log | head -50
python3 benchmarks/repeat_figures.py --release $R --operator rms_norm $OUT/rms_norm-median.json $OUT/rms_norm-mean.json 2>&1 | tail -12
