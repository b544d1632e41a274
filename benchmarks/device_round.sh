#!/bin/bash
# The H200 rounds of issues 40, 43, 44 and 45 (2026-12-05), one device call per stage, writing
# into $OUT. Carry .whl (scripts/device-wheels), .atrex-bench (the public release), and per
# stage: A .old (the harness before issue 40: git archive 17166aa evaluation benchmarks/_path.py
# benchmarks/worker_speed.py) and .libwhl (flag-gems, liger-kernel, fla-core, einops,
# sqlalchemy wheels); C .cute (nvidia-cutlass-dsl 4.2.1 unpacked, tar.xz) alone.
#   STAGE=A: rms_norm on the worker's path, the harness before issue 40 and now, in one call
#            (S_op before and after, seconds per shape, where they go), then the library ladder.
#   STAGE=B: .libwhl too: which hooks importing the libraries adds, the ladder again (after the
#            FlagGems and Liger-Kernel fixes), `atrex loop` on the GPU, the warm pool.
#   STAGE=L: `atrex loop` on the GPU alone (LOOP_S seconds).
#   STAGE=D: .libwhl too: the public release's torch.compile baseline and the PyTorch
#            reference on the same shapes, merged into the recorded ladder (library_ladder.py).
#   STAGE=C: forwards launching outside the capturing stream, CuTe DSL included; eager fidelity
#            (carry .atrex-eager, the release's six operators it times, not .atrex-bench).
export HOME=/tmp/home USER=root PYTHONUNBUFFERED=1; mkdir -p $HOME $OUT
if [ -d .whl ]; then
  [ -d /tmp/site/celery ] || python3 -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH=/tmp/site:$PWD
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $OUT/gpu.txt
R=$PWD/.atrex-bench; C=evaluation/sample_candidates/rms_norm/triton_native.py
for STEP in ${STAGE//,/ }; do  # STAGE=D,L: one after the other in one call
case "$STEP" in
A)
  timeout 200 python3 benchmarks/worker_speed.py --release $R --operator rms_norm --candidate $C \
    --modes worker --jobs 2 --steps --json $OUT/rms_norm-after.json > $OUT/rms_norm-after.log 2>&1
  tail -42 $OUT/rms_norm-after.log
  (cd .old && PYTHONPATH=/tmp/site:$PWD timeout 90 python3 benchmarks/worker_speed.py --release $R \
    --operator rms_norm --candidate $C --modes worker --jobs 2 --json $OUT/rms_norm-before.json \
    > $OUT/rms_norm-before.log 2>&1); tail -4 $OUT/rms_norm-before.log
  python3 benchmarks/repeat_figures.py --release $R --operator rms_norm $OUT/rms_norm-before.json \
    $OUT/rms_norm-after.json > $OUT/repeat.log 2>&1; cat $OUT/repeat.log
  python3 -m pip install -q --no-deps --no-index .libwhl/*.whl 2>&1 | tail -2
  LADDER_S=$((530 - SECONDS - 50))  # what is left of the call, less the ladder's own wind-down
  timeout $((LADDER_S + 50)) python3 benchmarks/library_ladder.py --release $R --json $OUT/ladder.json \
    --deadline-s $LADDER_S --max-shapes ${LADDER_SHAPES:-8} > $OUT/ladder.log 2>&1; tail -40 $OUT/ladder.log
  ;;
B)
  python3 -m pip install -q --no-deps --no-index .libwhl/*.whl 2>&1 | tail -2
  python3 benchmarks/hook_census.py liger_kernel.ops.fused_add_rms_norm liger_kernel.ops.rms_norm \
    flag_gems > $OUT/hook-census.log 2>&1; tail -12 $OUT/hook-census.log
  timeout $((${LADDER_S:-220} + 45)) python3 benchmarks/library_ladder.py --release $R --json $OUT/ladder.json \
    --deadline-s ${LADDER_S:-220} --max-shapes ${LADDER_SHAPES:-8} --compile-shapes 1 > $OUT/ladder.log 2>&1
  grep -v -i warn $OUT/ladder.log | tail -24
  timeout ${LOOP_S:-200} python3 benchmarks/loop_gpu.py --release $R --rounds 6 --out $OUT/loop > $OUT/loop.log 2>&1
  tail -20 $OUT/loop.log; tar -C $OUT -czf $OUT/loop.tar.gz loop && rm -rf $OUT/loop  # 8 files come back
  [ -n "$WARM_POOL" ] && timeout 60 python3 benchmarks/warm_pool_speed.py --release $R --operator rms_norm \
    --candidate $C --jobs 1 --json $OUT/warm-pool.json > $OUT/warm-pool.log 2>&1 && tail -4 $OUT/warm-pool.log
  ;;
C)
  # into the host's Python, where the sandboxed child sees it (its .pth adds python_packages)
  tar -C "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" -xJf .cute/*.tar.xz
  python3 -c "import cutlass, cutlass.cute; print('cutlass', cutlass.__file__)" 2>&1 | tail -2
  timeout 200 python3 benchmarks/capture_check.py --json $OUT/capture.json > $OUT/capture.log 2>&1; tail -8 $OUT/capture.log
  # the eager forwards' operators only (.atrex-eager: the public release's six folders; the
  # CuTe DSL wheel leaves no room under the 64 MiB a call carries for the whole release)
  END=${C_END_S:-560}
  timeout $((END - SECONDS)) python3 benchmarks/eager_fidelity.py --public-release $PWD/.atrex-eager \
    --json $OUT/eager.json --deadline-s $((END - 50 - SECONDS)) --probes ${PROBES:-fresh,audit,dynamo} \
    --evaluations ${EVALUATIONS:-new,new,new,old} --probe-rounds ${PROBE_ROUNDS:-1} --triton-probes-only > $OUT/eager.log 2>&1; grep -v -i warn $OUT/eager.log | tail -60
  ;;
L)
  # `atrex loop` alone (issue 45), streaming its rounds under $OUT/loop as they happen
  timeout ${LOOP_S:-500} python3 benchmarks/loop_gpu.py --release $R --rounds ${ROUNDS:-6} --out $OUT/loop > $OUT/loop.log 2>&1
  tail -30 $OUT/loop.log; tar -C $OUT -czf $OUT/loop.tar.gz loop && rm -rf $OUT/loop  # 8 files come back
  ;;
D)
  # the public release's torch.compile baseline (issue 44), the PyTorch reference on the same
  # shapes beside it, continued from the recorded ladder where that ran on this kind of card
  python3 -m pip install -q --no-deps --no-index .libwhl/*.whl 2>&1 | tail -2
  END=${D_END_S:-560}
  # the recorded ladder's rows ran on an H200: on another card the libraries run again too
  if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
    CONTINUE="--merge ${MERGE:-benchmarks/results/h200-library-ladder/ladder.json} --compile-only"
  else CONTINUE="--max-shapes ${LADDER_SHAPES:-8}"; fi
  timeout $((END - SECONDS)) python3 benchmarks/library_ladder.py --release $R --json $OUT/ladder.json \
    $CONTINUE --with-reference \
    --compile-shapes ${COMPILE_SHAPES:-2} --deadline-s $((END - 60 - SECONDS)) > $OUT/ladder.log 2>&1
  grep -v -i warn $OUT/ladder.log | tail -50
  ;;
esac
done
