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
# ROUND=2: ncu itself inside the namespaces, the target under another uid:
#   net-lo     unshare --net -- (loopback up) ncu -- python
#   pid-in     unshare --pid --mount-proc -- ncu -- python
#   uid-target ncu -- setpriv (uid 60001) python, its output shown
#   all-in     unshare --mount --net --pid --mount-proc -- (private /tmp, /dev/shm, loopback
#              up) ncu -- setpriv (uid 60001, no new privileges) python with the syscall filter
# Round 1 on the H200 (2026-12-03): plain, mount and seccomp counted the kernel; net and pid
# hung until the 120 s timeout (ncu outside, its target inside); uid ended with error code 6.
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
printf 'import runpy, sys\nsys.path.insert(0, "%s")\nfrom evaluation.harness.isolation.syscall_filter import install\ninstall()\nrunpy.run_path("%s")\n' "$PWD" "$K" > $S
NCUOPTS=(--clock-control none --nvtx --nvtx-include atrex_profiled/ --metrics gpu__time_duration.sum,dram__bytes_read.sum --csv --print-units base)
run() {
  local name=$1; shift
  timeout 90 "$NCU" "${NCUOPTS[@]}" --log-file "$L/$name.csv" "$@" > "$L/$name.out" 2>&1
  report $name $?
}
report() {
  local rows; rows=$(grep -c gpu__time_duration "$L/$1.csv" 2>/dev/null)
  echo "$1: rc=$2, kernel rows in ncu's log: ${rows:-0}; target said: $(grep -o 'kernel ran' "$L/$1.out" | head -1)" | tee -a "$OUT/probe.txt"
  [ "${rows:-0}" -gt 0 ] || { tail -4 "$L/$1.csv" "$L/$1.out" 2>/dev/null | cut -c1-300 >> "$OUT/probe.txt"; }
}
L=/var/tmp/atrex-ncu-probe; rm -rf $L; mkdir -p $L; chmod 777 $L
LO="$PY -c 'import fcntl, socket, struct; s = socket.socket(); fcntl.ioctl(s, 0x8914, struct.pack(\"16sH22x\", b\"lo\", 0x1 | 0x40))'"
if [ "${ROUND:-1}" = 2 ]; then
  U=(env HOME=/var/tmp/probe-home USER=probe setpriv --reuid=60001 --regid=60001 --clear-groups --no-new-privs --)
  mkdir -p /var/tmp/probe-home && chmod 777 /var/tmp/probe-home
  timeout 90 unshare --net --fork -- /bin/sh -c "$LO && exec $NCU ${NCUOPTS[*]} --log-file $L/net-lo.csv $PY $K" > $L/net-lo.out 2>&1; report net-lo $?
  timeout 90 unshare --pid --fork --mount-proc -- $NCU "${NCUOPTS[@]}" --log-file $L/pid-in.csv $PY $K > $L/pid-in.out 2>&1; report pid-in $?
  run uid-target "${U[@]}" "$PY" $K
  timeout 120 unshare --mount --net --pid --fork --mount-proc -- /bin/sh -c "mount -t tmpfs none /tmp && mount -t tmpfs none /dev/shm && $LO && exec $NCU ${NCUOPTS[*]} --log-file $L/all-in.csv ${U[*]} $PY $S" > $L/all-in.out 2>&1; report all-in $?
  exit 0
fi
run plain "$PY" $K
run net unshare --net --fork -- "$PY" $K
run mount unshare --mount --fork -- /bin/sh -c "mount -t tmpfs none /tmp && mount -t tmpfs none /dev/shm && exec $PY $K"
mkdir -p /var/tmp/probe-home && chmod 777 /var/tmp/probe-home
run uid env HOME=/var/tmp/probe-home USER=probe setpriv --reuid=60001 --regid=60001 --clear-groups --no-new-privs -- "$PY" $K
run pid unshare --pid --fork --mount-proc -- "$PY" $K
run seccomp "$PY" $S
