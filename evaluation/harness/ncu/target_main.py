"""The three steps of a profile run inside the sandbox (evaluation/harness/ncu/sandbox.py):

    python -I target_main.py up -- CMD...          root, inside the jail's namespaces: the
                                                   network namespace's loopback up (ncu's
                                                   front-end and its target talk over it),
                                                   then exec CMD (setpriv to the sandbox uid)
    python -I target_main.py ncu -- NCU...         the sandbox uid: the syscall filter, then
                                                   exec ncu (its whole tree inherits both)
    python -I target_main.py target                ncu's target: the candidate's forward on
                                                   the shape in WORK/shape.json, twice to warm
                                                   up, then once inside the profiled NVTX range

Nothing here is trusted with a result: ncu's front-end writes its log, and the parent reads
and parses it once the whole tree is gone. Imports no Django.
"""

import json
import os
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parents[3])
sys.path += [p for p in os.environ.pop("ATREX_CHILD_SYS_PATH", "").split(os.pathsep) if p]

SIOCSIFFLAGS, IFF_UP, IFF_RUNNING = 0x8914, 0x1, 0x40


def loopback_up() -> None:
    import fcntl
    import socket
    import struct

    with socket.socket() as sock:  # struct ifreq: the name, the flags, padding to 40 bytes
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", IFF_UP | IFF_RUNNING))


def run_target() -> None:
    import torch

    from evaluation.harness.ncu.profile import NVTX_RANGE
    from evaluation.harness.operator_files import (
        candidate_model_class,
        import_file,
        make_inputs,
        make_model,
    )

    work = Path.cwd()
    shape = json.loads((work / "shape.json").read_text())
    device = torch.device("cuda")
    inputs_module = import_file(work / "operator" / "input.py", "atrex_profile_input")
    candidate = import_file(work / "candidate.py", "atrex_profile_candidate")
    model = make_model(candidate_model_class(candidate), shape["init_kwargs"], 0, device)
    inputs = make_inputs(inputs_module, shape["input_kwargs"], 1, device)
    with torch.no_grad():
        for _ in range(2):  # compiles, autotunes: outside the range
            model(**inputs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(NVTX_RANGE)
        model(**inputs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()


def main() -> None:
    step, rest = sys.argv[1], sys.argv[3:] if sys.argv[2:3] == ["--"] else sys.argv[2:]
    if step == "up":
        loopback_up()
        os.execv(rest[0], rest)
    elif step == "ncu":
        if os.environ.pop("ATREX_SYSCALL_FILTER", "") == "1":
            from evaluation.harness.isolation import syscall_filter

            syscall_filter.install()
        os.execv(rest[0], rest)
    elif step == "target":
        run_target()
    else:
        sys.exit(f"unknown step {step!r}")


if __name__ == "__main__":
    main()
