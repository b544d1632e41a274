"""Which interpreter hooks importing a module adds, and from where (a GPU host's libraries).

For each module named: the audit hooks and sys.monitoring callbacks added while it is
imported (with the frames that added them) and the finders it leaves on sys.meta_path. The
child's integrity check (evaluation/harness/isolation/integrity.py) allows those an installed
library adds while imported; this shows which libraries do.

Usage: python benchmarks/hook_census.py liger_kernel.ops.rms_norm flag_gems ...
"""

from __future__ import annotations

import importlib
import sys
import traceback

ADDED: list[tuple[str, str]] = []


def audit(event: str, args: tuple[object, ...]) -> None:
    if event in ("sys.addaudithook", "sys.monitoring.register_callback"):
        ADDED.append((event, "".join(traceback.format_stack(sys._getframe(1), limit=8))))


def main() -> None:
    sys.addaudithook(audit)
    import torch  # noqa: F401  (as the child has it before the candidate)
    import torch._dynamo  # noqa: F401
    for name in sys.argv[1:]:
        ADDED.clear()
        finders = list(sys.meta_path)
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a census: say it and go on
            print(f"{name}: import failed: {exc}")
            continue
        new = [f for f in sys.meta_path if f not in finders]
        print(f"{name}: {len(ADDED)} hook(s) added, {len(new)} finder(s) left: "
              f"{[type(f).__module__ + '.' + type(f).__qualname__ for f in new]}")
        for event, stack in ADDED:
            print(f"  {event} from:\n{stack}")


if __name__ == "__main__":
    main()
