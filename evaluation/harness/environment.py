"""The environment a result was measured in: GPU, driver, CUDA, torch and DSL versions, clocks.

Read by the trusted parent, never by the candidate's process: a result's environment is
what the host says, not what candidate code could make it say. Clocks come from NVML
(`libnvidia-ml`, the driver's own library, called through ctypes: no package to install on
a GPU host); where it cannot be loaded (a CPU machine) the clocks are None. The same GPU
is found by its PCI bus id, so CUDA_VISIBLE_DEVICES' renumbering does not matter.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import platform
from typing import Any

import torch

from .libraries import declared_libraries

NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2
NVML_SUCCESS = 0


def describe(device: torch.device, dsl: str) -> dict[str, Any]:
    """What does not change during an evaluation: the GPU, driver, CUDA, torch and DSL, and
    the host's CPU (an eager forward's scored time holds the host's launch gaps: host-bound
    references scored up to 1.9x apart on two H200 hosts, docs/baselines.md)."""
    cuda = device.type == "cuda"
    return {
        "gpu": torch.cuda.get_device_name(device) if cuda else None,
        "driver": _driver_version() if cuda else None,
        "cuda": torch.version.cuda if cuda else None,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "host_cpu": host_cpu(),
        "dsl": dsl,
        "dsl_version": dsl_version(dsl),
        # the kernel libraries this host declares, with the versions installed here
        "libraries": declared_libraries(),
    }


def host_cpu() -> str | None:
    """The host CPU's model name (/proc/cpuinfo on Linux), None where it cannot be read."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()[:120] or None
    except OSError:
        pass
    return platform.processor()[:120] or None


def dsl_version(dsl: str) -> str | None:
    """The installed version of the package a DSL comes from (Gluon ships inside Triton)."""
    if dsl == "cute":  # read from its metadata: importing CuTe DSL takes a second
        try:
            return importlib.metadata.version("nvidia-cutlass-dsl")
        except importlib.metadata.PackageNotFoundError:
            return None
    module = {"triton": "triton", "gluon": "triton"}.get(dsl)
    if module is None:
        return None
    try:
        imported = __import__(module)
    except ImportError:
        return None
    return str(getattr(imported, "__version__", "")) or None


def clocks(device: torch.device) -> dict[str, int | None]:
    """The GPU's current SM and memory clocks in MHz (None where NVML cannot say)."""
    nvml = _nvml()
    handle = _handle(nvml, device) if nvml is not None and device.type == "cuda" else None
    if nvml is None or handle is None:
        return {"sm_mhz": None, "memory_mhz": None}
    return {"sm_mhz": _clock(nvml, handle, NVML_CLOCK_SM),
            "memory_mhz": _clock(nvml, handle, NVML_CLOCK_MEM)}


@functools.cache
def _nvml() -> ctypes.CDLL | None:
    try:
        library = ctypes.CDLL("libnvidia-ml.so.1")
        if library.nvmlInit_v2() != NVML_SUCCESS:
            return None
    except (OSError, AttributeError):
        return None
    return library


def _handle(nvml: ctypes.CDLL, device: torch.device) -> ctypes.c_void_p | None:
    """NVML's handle of the GPU torch calls `device`: by PCI bus id, else by UUID."""
    props = torch.cuda.get_device_properties(device)
    handle = ctypes.c_void_p()
    keys: list[tuple[str, bytes]] = []
    if hasattr(props, "pci_bus_id"):
        domain, bus, slot = (int(getattr(props, f"pci_{part}_id", 0))
                             for part in ("domain", "bus", "device"))
        keys.append(("nvmlDeviceGetHandleByPciBusId_v2",
                     f"{domain:08x}:{bus:02x}:{slot:02x}.0".encode()))
    if getattr(props, "uuid", None) is not None:
        keys.append(("nvmlDeviceGetHandleByUUID", f"GPU-{props.uuid}".encode()))
    for function, key in keys:
        try:
            if getattr(nvml, function)(key, ctypes.byref(handle)) == NVML_SUCCESS:
                return handle
        except AttributeError:
            continue
    return None


def _clock(nvml: ctypes.CDLL, handle: ctypes.c_void_p, kind: int) -> int | None:
    value = ctypes.c_uint()
    if nvml.nvmlDeviceGetClockInfo(handle, kind, ctypes.byref(value)) != NVML_SUCCESS:
        return None
    return int(value.value)


def _driver_version() -> str | None:
    nvml = _nvml()
    if nvml is None:
        return None
    buffer = ctypes.create_string_buffer(96)
    if nvml.nvmlSystemGetDriverVersion(buffer, len(buffer)) != NVML_SUCCESS:
        return None
    return buffer.value.decode(errors="replace") or None
