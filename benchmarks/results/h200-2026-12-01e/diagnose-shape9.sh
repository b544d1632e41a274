#!/usr/bin/env bash
# per_token_group_quant_fp8 shape 9 (stand-in release) alone through the evaluator CLI on the H200,
# with the GPU, host memory and /dev/shm sampled every 4 s and the parent's stacks every 40 s
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site; export PYTHONUNBUFFERED=1
R=.public/atrex-bench-stand-ins
(while true; do date +%T; nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader; nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader; free -g | sed -n 2p; df -h /dev/shm | tail -1; ps -eo pid,rss,pcpu,stat,comm --sort=-rss | head -4; sleep 4; done) > $OUT/monitor.txt 2>&1 &
M=$!
timeout 230 python3 -c "
import faulthandler,sys,runpy
faulthandler.dump_traceback_later(40, repeat=True, file=open('$OUT/stacks.txt','w'))
sys.argv=['evaluation','evaluate','--release','$R','--operator','per_token_group_quant_fp8','--candidate','$R/data/per_token_group_quant_fp8/reference.py','--shapes','9','--timeout','600','--json','$OUT/shape9.json']
runpy.run_module('evaluation', run_name='__main__')
" > $OUT/shape9.log 2>&1; echo rc=$?
kill $M; tail -20 $OUT/shape9.log; grep -c . $OUT/monitor.txt
