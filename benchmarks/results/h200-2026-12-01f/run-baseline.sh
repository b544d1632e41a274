#!/usr/bin/env bash
# The public Atrex-Bench's PyTorch-eager baseline under the timing definition of 2026-12-02,
# through the portal's real stack (benchmarks/public_baseline.py). Run from the checkout's
# root with .whl/ (scripts/device-wheels) and the public release in .atrex-bench/ carried.
#   first run:  run-baseline.sh 1            (imports the release, carries over the graph-
#                                             timed operators of the 2026-12-01 run)
#   later runs: run-baseline.sh N STATE_DB   (goes on from a returned database)
set -x
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 HOME=/tmp/home USER=root
mkdir -p "$HOME" /tmp/state
run=$1
if [ -n "$2" ]; then
  cp "$2" /tmp/state/db.sqlite3
  args=()
else
  args=(--release .atrex-bench --carry-from benchmarks/results/h200-2026-12-01d/state.sqlite3)
fi
python3 benchmarks/public_baseline.py "${args[@]}" --state /tmp/state \
  --deadline-s "${DEADLINE:-470}" --json "$OUT/baseline-run$run.json" 2>&1 | tee "$OUT/baseline-run$run.log"
cp /tmp/state/db.sqlite3 "$OUT/state.sqlite3"
for log in /tmp/state/logs/*.log; do tail -c 300000 "$log" > "$OUT/run$run-$(basename "$log")"; done
