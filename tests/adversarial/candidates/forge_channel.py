"""forge_channel: write the harness's own "done" events on its result pipe.

Exploit: the child reports to the parent as JSON lines on a pipe whose fd number is in the
environment (ATREX_EVENT_FD). The forward computes with plain PyTorch (correct values, so
the correctness trials, which the parent checks itself, pass). When it sees it is called by
the adoption stage (a `do_adoption` frame on the stack) it writes a forged `done` event for
the current request id (read from the runtime object on the stack): a clean "one Triton
kernel, no aten op" report. In the timing stage (GPU) it forges a plausible timing report
(~85% of the bandwidth roofline, low rse). It then swaps the runtime's event stream for a
filter that drops the genuine `done` of that request, so the parent never sees a second
answer (no protocol error, no restart). Without the runtime object it would os._exit(0)
right after the forged line. It also writes forged lines on fds 1 and 2. The cheater hopes
for "native" (DSL ratio 1.0) and an invented fast time.

What should catch it: the parent checks request ids (a forged event must carry the right
one, which is readable in the child) and never takes correctness from the child. The
adoption and timing reports, though, are whatever arrives first on the pipe: nothing
catches this on the CPU or a GPU except the attainment > 1 tripwire for invented times.
Fix: do not produce evidence inside the candidate's process, or at least make it unforgeable
from Python: keep the event fd out of the environment and close-on-exec, and have the parent
verify the evidence out of band, e.g. a liveness/nonce round trip after every `done`
(channel.ChildChannel._exchange) to catch the os._exit variant, and device records taken by
an external profiler (CUPTI/nsys in a trusted process) for adoption and timing.
"""

import json
import os
import sys

import torch


def _runtime_on_stack():
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name in ("do_adoption", "do_timing"):
            return frame.f_code.co_name, frame.f_locals.get("self"), frame.f_locals.get("request")
        frame = frame.f_back
    return None, None, None


class _DropGenuine:
    """Wraps the runtime's event stream and swallows the genuine answer to one request."""

    def __init__(self, runtime, inner, request_id):
        self.runtime, self.inner, self.request_id = runtime, inner, request_id

    def write(self, text):
        try:
            event = json.loads(text)
        except ValueError:
            return self.inner.write(text)
        if event.get("req") == self.request_id and event.get("event") in ("done", "error"):
            self.runtime.events = self.inner  # one answer swallowed; back to normal
            return len(text)
        return self.inner.write(text)

    def flush(self):
        self.inner.flush()


def _forged_answer(stage, request_id, cuda, x):
    if stage == "do_adoption":
        return {"event": "done", "req": request_id, "dsl_kernel_names": ["_rms_norm_kernel"],
                "kernel_names": ["_rms_norm_kernel"], "foreign_dsl_launches": [],
                "kernels": [["_rms_norm_kernel", 3e-6]] if cuda else [],
                "aten_ops": {}, "dsl_launch_count": 1, "compiled_frames": 0,
                "device_timed": cuda}
    moved = 2 * x.numel() * x.element_size() + x.shape[-1] * x.element_size()
    median = moved / 4.8e12 / 0.85 + 1.5e-6
    return {"event": "done", "req": request_id, "timing": {
        "measured": True, "reason": None, "method": "graph", "median_s": median,
        "p10_s": median * 0.98, "p90_s": median * 1.03, "mean_s": median * 1.004,
        "rse": 0.004, "n": 160, "kernels_per_forward": 1.0, "wall_median_s": median + 2.7e-6,
        "busy_median_s": median, "span_median_s": median, "scored_as": "span",
        "span_measured_by": "profiler", "profiled_samples": 160,
        "timed_kernel_names": ["_rms_norm_kernel"],
        "l2_flush_bytes": 268435456, "persisting_l2_reset": True, "graph_error": None,
        "seconds_spent": 0.41}}


def _forge(x):
    stage, runtime, _ = _runtime_on_stack()
    if stage is None:
        return
    request_id = getattr(runtime, "request_id", None)
    line = json.dumps(_forged_answer(stage, request_id, x.is_cuda, x)) + "\n"
    for fd in (1, 2):  # the candidate's own stdout/stderr: a forger tries them too
        try:
            os.write(fd, line.encode())
        except OSError:
            pass
    fd = int(os.environ.get("ATREX_EVENT_FD", "-1"))
    os.write(fd, line.encode())
    if runtime is not None and hasattr(runtime, "events"):
        runtime.events = _DropGenuine(runtime, runtime.events, request_id)
    else:
        os._exit(0)  # no way to silence the genuine answer: leave before it is written


class Model(torch.nn.Module):
    def __init__(self, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self._forged = set()

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        xf = x.to(torch.float32)
        normed = (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype)
        out = normed * weight
        stage, runtime, _ = _runtime_on_stack()
        key = (stage, getattr(runtime, "request_id", None))
        if stage is not None and key not in self._forged:  # timing calls forward many times
            self._forged.add(key)
            _forge(x)
        return out
