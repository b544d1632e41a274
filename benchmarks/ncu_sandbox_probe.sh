#!/bin/bash
# Can Nsight Compute count a process that runs in the sandbox's namespaces? (issue: hardware
# counters in profile mode). On a GPU host as root; writes into $OUT. Each variant runs one
# elementwise kernel inside the NVTX range the profile mode uses, under ncu with the clocks
# left alone, and says whether ncu saw the kernel:
#   plain      ncu -- python
#   net        ncu -- unshare --net --fork -- python        (the sandbox's own network)
#   mount      ncu -- unshare --mount --fork -- (private /tmp and /dev/shm) python
#   uid        ncu -- setpriv --reuid 60001 ... python      (a uid with no passwd entry)
#   pid        ncu -- unshare --pid --fork --mount-proc -- python
#   seccomp    ncu -- python with the sandbox's syscall filter installed first
set -u
mkdir -p "$OUT"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU ($($NCU --version | tail -1))" | tee "$OUT/probe.txt"
grep -i profiling /proc/driver/nvidia/params | tee -a "$OUT/probe.txt"
PY=$(command -v python3)
K=/var/tmp/atrex_probe_kernel.py; S=/var/tmp/atrex_probe_seccomp.py
cat > $K <<'PY'
import torch
x = torch.ones(1 << 22, device="cuda")
(x * 2).sum().item()
torch.cuda.nvtx.range_push("atrex_profiled")
y = x * 3
torch.cuda.synchronize()
torch.cuda.nvtx.range_pop()
print("kernel ran")
PY
printf 'import runpy, sys\nsys.path.insert(0, "%s")\nfrom evaluation.harness.syscall_filter import install\ninstall()\nrunpy.run_path("%s")\n' "$PWD" "$K" > $S
NCUOPTS=(--clock-control none --nvtx --nvtx-include atrex_profiled/ --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --print-units base)
run() {
  local name=$1; shift
  timeout 120 "$NCU" "${NCUOPTS[@]}" --log-file "$OUT/$name.csv" "$@" > "$OUT/$name.out" 2>&1
  local rc=$?
  local rows; rows=$(grep -c gpu__time_duration "$OUT/$name.csv" 2>/dev/null)
  echo "$name: rc=$rc, kernel rows in ncu's log: ${rows:-0}; target said: $(grep -o 'kernel ran' "$OUT/$name.out" | head -1); $(grep -m1 -i 'error\|warn' "$OUT/$name.out" "$OUT/$name.csv" 2>/dev/null | cut -c1-220)" | tee -a "$OUT/probe.txt"
}
run plain "$PY" $K
run net unshare --net --fork -- "$PY" $K
run mount unshare --mount --fork -- /bin/sh -c "mount -t tmpfs none /tmp && mount -t tmpfs none /dev/shm && exec $PY $K"
mkdir -p /var/tmp/probe-home && chmod 777 /var/tmp/probe-home
run uid env HOME=/var/tmp/probe-home USER=probe setpriv --reuid=60001 --regid=60001 --clear-groups --no-new-privs -- "$PY" $K
run pid unshare --pid --fork --mount-proc -- "$PY" $K
run seccomp "$PY" $S
