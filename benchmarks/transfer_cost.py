"""What handing one call's outputs from the sandboxed child to the trusted side costs, piece by
piece, on a GPU host: the device-to-host copy (pageable or page-locked memory), writing the
file, reading it back and the host-to-device copy, for output sizes of the public rms_norm
(median 8 MB, mean 22 MB, largest 151 MB of bf16).

Usage (on a GPU host): python benchmarks/transfer_cost.py [--dir /dev/shm] [--repeat 10]

The harness wrote outputs to files in the child's scratch folder (a tmpfs) and the parent
read them, before the shared output area (harness/isolation/output_area.py); this measures each piece
apart so the step table's `save_outputs` and `output_read` could be explained.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import torch


def timed(run: Callable[[], object], repeat: int) -> float:
    """Median seconds of `run` over `repeat` calls (after one warm-up)."""
    run()
    samples = []
    for _ in range(repeat):
        torch.cuda.synchronize()
        started = time.perf_counter()
        run()
        torch.cuda.synchronize()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def costs_of(megabytes: int, folder: str, repeat: int) -> tuple[int, list[float]]:
    """The pieces' median seconds for one output of `megabytes` (bf16)."""
    gpu = torch.randn(megabytes * 10**6 // 2, device="cuda", dtype=torch.bfloat16)
    nbytes = gpu.numel() * 2
    pageable = gpu.to("cpu")
    pinned = torch.empty_like(pageable).pin_memory()
    path = os.path.join(folder, "out.bin")

    def write() -> None:
        with open(path, "wb") as handle:
            handle.write(pageable.view(torch.uint8).numpy().data)

    def read_into(buffer: torch.Tensor) -> Callable[[], None]:
        def read() -> None:
            view = buffer.view(torch.uint8).numpy().data
            with open(path, "rb", buffering=0) as handle:
                filled = 0
                while filled < nbytes:
                    filled += handle.readinto(view[filled:])
        return read

    write()
    costs = [timed(lambda: gpu.to("cpu"), repeat), timed(lambda: pinned.copy_(gpu), repeat),
             timed(write, repeat), timed(read_into(torch.empty_like(pageable)), repeat),
             timed(read_into(pinned), repeat), timed(lambda: pageable.to("cuda"), repeat),
             timed(lambda: pinned.to("cuda"), repeat)]
    os.remove(path)
    return nbytes, costs


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default=None, help="where the files go (default: $TMPDIR)")
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(dir=args.dir)
    print(f"files in {folder}; medians of {args.repeat}; ms (GB/s)")
    print(f"{'MB':>6} {'D2H page':>14} {'D2H pinned':>14} {'write':>14} {'read page':>14} "
          f"{'read pinned':>14} {'H2D page':>14} {'H2D pinned':>14}")
    for megabytes in (8, 22, 151):
        nbytes, costs = costs_of(megabytes, folder, args.repeat)
        print(f"{nbytes / 1e6:6.0f} " + " ".join(
            f"{c * 1e3:7.2f} ({nbytes / c / 1e9:4.1f})" for c in costs), flush=True)
    os.rmdir(folder)


if __name__ == "__main__":
    main()
