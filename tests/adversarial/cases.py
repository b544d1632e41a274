"""What the adversarial tests share: the settings a case runs under, and the cases that
attack the host rather than the measurement (test_host_escapes.py runs them)."""

from __future__ import annotations

import dataclasses

from evaluation.harness.isolation.sandbox import SandboxSettings
from tests.evaluation.helpers import TEST_SETTINGS

# Small scratch mounts keep the fill case quick; every other case fits in them many times.
CASE_SANDBOX = SandboxSettings(scratch_bytes=512 * 2**20, private_tmpfs_bytes=64 * 2**20)
FAST = dataclasses.replace(TEST_SETTINGS, compile_timeout_s=15.0, call_timeout_s=15.0,
                           sandbox=CASE_SANDBOX)
HOST_CASES = ("read_checkout", "plant_links", "unix_sockets", "outlive_worker")
