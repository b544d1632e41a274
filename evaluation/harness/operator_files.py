"""Importing an operator's public files and drawing seeded inputs.

Used by both sides: the trusted parent and the sandboxed child draw the same inputs from
the same secret seed, so tensors never cross the process boundary into the child.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch


def import_file(path: Path, module_name: str) -> ModuleType:
    """Import a Python file as a module. @triton.jit needs a real file to read source from."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # seeds every CUDA device too


def make_inputs(input_module: ModuleType, input_kwargs: Mapping[str, Any], seed: int,
                device: torch.device) -> dict[str, torch.Tensor]:
    seed_everything(seed)
    with device:
        inputs = input_module._make_inputs(**input_kwargs)
    if not isinstance(inputs, dict):
        raise TypeError(f"_make_inputs returned {type(inputs).__name__}, expected a dict")
    return inputs


def make_model(model_class: type[torch.nn.Module], init_kwargs: Mapping[str, Any], seed: int,
               device: torch.device) -> torch.nn.Module:
    """Instantiate under a shared seed, so parameters created in __init__ agree on both sides."""
    seed_everything(seed)
    with device:
        model = model_class(**init_kwargs)
    return model.to(device).eval()


def candidate_model_class(module: ModuleType) -> type[torch.nn.Module]:
    """The candidate contract: `Model`, or `ModelNew` as KernelBench spells it. A file that
    defines both (a copy of the reference plus its own version) is judged on `ModelNew`."""
    for name in ("ModelNew", "Model"):
        cls = getattr(module, name, None)
        if isinstance(cls, type) and issubclass(cls, torch.nn.Module):
            return cls
    raise AttributeError("candidate defines no torch.nn.Module subclass named Model or ModelNew")


def tensor_bytes(tensors: Mapping[str, Any]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values() if isinstance(t, torch.Tensor))
