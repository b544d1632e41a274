"""`atrex_fixture_kernels.hooks`: a library module that, while imported, adds an audit hook
and an import finder, as some installed libraries do (on the H200, importing Liger-Kernel's
ops under Python 3.12 left both). `add_hook_later` adds one when called, not imported."""

import sys


def _audit(event: str, args: tuple[object, ...]) -> None:
    pass


class FixtureFinder:
    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        return None


sys.addaudithook(_audit)
sys.meta_path.append(FixtureFinder())


def add_hook_later() -> None:
    sys.addaudithook(_audit)
