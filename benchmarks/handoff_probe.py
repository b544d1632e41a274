"""Can a call's outputs cross from the sandboxed child to the trusted side without files?

Before the shared output area (harness/isolation/output_area.py) the child copied each output to host
memory, wrote it to a file in its scratch tmpfs and the parent read it back: on the H200 that is ~100 ms for a
151 MB output, of which the copy engine's share is ~6 ms (transfer_cost.py). Two ways round
the file, probed here across the same boundary the sandbox draws (unshare --mount --net
--pid, the project's seccomp filter installed in the child):

1. A shared, sealed memory file: the parent makes a memfd of a fixed size and seals it
   against shrinking and growing (a child that truncated a file the parent has mapped would
   kill the parent with SIGBUS), both sides map it and register the mapping with CUDA
   (cudaHostRegister: page-locked, so both copies run at the copy engine's speed), the
   child copies device -> mapping, the parent mapping -> device. No CPU copy at all.
2. CUDA IPC (torch's reduce_tensor): the parent opens the child's device memory and copies
   it device to device. Often refused across PID namespaces.

Each prints what it cost (median ms and GB/s per size) or why it failed; the parent checks
every byte arrived (a checksum computed on the device on both sides).

Usage (on a GPU host, as root for unshare): python benchmarks/handoff_probe.py [--repeat 10]
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import mmap
import os
import pickle
import statistics
import subprocess
import sys
import time

import _path  # noqa: F401 (the repository root on sys.path)
import torch

SIZES_MB = (8, 22, 151)  # the public rms_norm's median, mean and largest output (bf16)
# --mount-proc: a /proc of the new PID namespace, as the jail mounts one. Without it the
# child's CUDA initialisation failed on the H200 (error 304, 2026-12-03: results/h200-2026-12-03/
# handoff_probe.log); with it the probe has not been run yet.
UNSHARE = ("unshare", "--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc",
           "--")


def register(view: torch.Tensor) -> float:
    """Page-lock a mapping for CUDA; the seconds it took."""
    started = time.perf_counter()
    torch.cuda.check_error(torch.cuda.cudart().cudaHostRegister(view.data_ptr(), view.numel(), 0))
    return time.perf_counter() - started


def checksum(tensor: torch.Tensor) -> int:
    return int(tensor.view(torch.int32).sum(dtype=torch.int64).item())


def sealed_memfd(nbytes: int) -> int:
    fd = os.memfd_create("atrex-outputs", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, nbytes)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS,
                fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def mapped(fd: int, nbytes: int) -> tuple[mmap.mmap, torch.Tensor]:
    region = mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    return region, torch.frombuffer(region, dtype=torch.uint8)


def child(fd: int, nbytes: int, repeat: int) -> None:
    """In the sandbox: fill the shared mapping from the device, one size after another."""
    from evaluation.harness.isolation import syscall_filter

    syscall_filter.install()
    try:
        os.ftruncate(fd, 0)
        print("seal: truncation ALLOWED (unsafe)", flush=True)
    except OSError as exc:
        print(f"seal: truncation refused ({exc.strerror})", flush=True)
    _, view = mapped(fd, nbytes)
    # pageable first (what harness/isolation/output_area.py does), then with both mappings registered
    for mode in ("pageable", "registered"):
        if mode == "registered":
            print(f"child register {register(view) * 1e3:.1f} ms", flush=True)
        print(f"mode {mode}", flush=True)
        sys.stdin.readline()  # the parent has switched too
        for megabytes in SIZES_MB:
            size = megabytes * 10**6
            source = torch.randint(-2**31, 2**31 - 1, (size // 4,), dtype=torch.int32,
                                   device="cuda")
            source_bytes = source.view(torch.uint8)
            samples = []
            for _ in range(repeat + 1):
                torch.cuda.synchronize()
                started = time.perf_counter()
                view[:size].copy_(source_bytes)  # returns once the bytes are there
                samples.append(time.perf_counter() - started)
                print(f"ready {size} {checksum(source)}", flush=True)
                sys.stdin.readline()  # the parent has read it
            print(f"child d2h {megabytes} {statistics.median(samples[1:]) * 1e3:.3f} {mode}",
                  flush=True)
    # CUDA IPC: hand over a device tensor, keep it alive until the parent is done with it
    source = torch.randint(-2**31, 2**31 - 1, (SIZES_MB[-1] * 10**6 // 4,), dtype=torch.int32,
                           device="cuda")
    from torch.multiprocessing.reductions import reduce_tensor

    try:
        rebuild, args = reduce_tensor(source)
        print("ipc " + base64.b64encode(pickle.dumps((rebuild, args))).decode()
              + f" {checksum(source)}", flush=True)
    except Exception as exc:  # noqa: BLE001 - a probe reports whatever failed
        print(f"ipc-failed {type(exc).__name__}: {exc}", flush=True)
    sys.stdin.readline()


def parent(repeat: int) -> None:
    nbytes = max(SIZES_MB) * 10**6
    fd = sealed_memfd(nbytes)
    _, view = mapped(fd, nbytes)
    process = subprocess.Popen(
        [*UNSHARE, sys.executable, __file__, "--child", str(fd), "--repeat", str(repeat)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, pass_fds=(fd,))
    assert process.stdin is not None and process.stdout is not None
    h2d: dict[int, list[float]] = {}
    bad = 0
    for line in process.stdout:
        words = line.split()
        if words[0] == "ready":
            size, expected = int(words[1]), int(words[2])
            target = torch.empty(size, dtype=torch.uint8, device="cuda")
            torch.cuda.synchronize()
            started = time.perf_counter()
            target.copy_(view[:size])
            torch.cuda.synchronize()
            h2d.setdefault(size, []).append(time.perf_counter() - started)
            bad += checksum(target) != expected
            process.stdin.write("next\n")
            process.stdin.flush()
        elif words[0] == "mode":
            if words[1] == "registered":
                print(f"parent register {register(view) * 1e3:.1f} ms ({nbytes / 1e6:.0f} MB)")
            h2d.clear()
            process.stdin.write("next\n")
            process.stdin.flush()
        elif words[0] == "child" and words[1] == "d2h":
            megabytes, ms = int(words[2]), float(words[3])
            size = megabytes * 10**6
            parent_ms = statistics.median(h2d[size][1:]) * 1e3
            print(f"memfd {words[4]:10s} {megabytes:4d} MB  child D2H {ms:7.3f} ms "
                  f"({size / ms / 1e6:5.1f} GB/s)  parent H2D {parent_ms:7.3f} ms "
                  f"({size / parent_ms / 1e6:5.1f} GB/s)")
        elif words[0] == "ipc":
            try:
                rebuild, args = pickle.loads(base64.b64decode(words[1]))
                started = time.perf_counter()
                shared = rebuild(*args)
                copy = shared.clone()
                torch.cuda.synchronize()
                took = time.perf_counter() - started
                same = checksum(copy) == int(words[2])
                print(f"cuda ipc across the namespace: works, open+copy {took * 1e3:.2f} ms, "
                      f"bytes {'identical' if same else 'DIFFER'}")
                del shared
            except Exception as exc:  # noqa: BLE001
                print(f"cuda ipc across the namespace: fails ({type(exc).__name__}: {exc})")
            process.stdin.write("done\n")
            process.stdin.flush()
        else:
            print(line.rstrip())
    print(f"memfd checksums: {'all identical' if not bad else f'{bad} DIFFER'}"
          f" (exit {process.wait()})")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        child(args.child, max(SIZES_MB) * 10**6, args.repeat)
    else:
        parent(args.repeat)


if __name__ == "__main__":
    main()
