"""How the timing stage launches a forward: replayed from a CUDA graph where the graph is
trusted, eagerly otherwise (GPU only; runs inside the sandboxed child).

A graph is captured on the capturing stream only. Work a forward launches elsewhere (a
CuTe DSL kernel launched without `stream=` runs on the default stream, a Triton kernel on a
side stream the forward never joins) runs once at capture time and is not in the graph:
its replays would leave that work undone, and every timed call would read stale outputs.
So a graph is trusted only after one replay reproduced what the forward computes eagerly
on the same contents, with the graph's outputs poisoned before the replay
(`graph_mismatch`); a graph that does not is dropped and the forward is timed eagerly,
the shape's report saying why and how to fix it (`graph_error`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

from .compare import as_output_dict, compare_outputs
from .steps import Steps

POISON_BYTE = 0xFF  # NaN in every float format, -1 in signed integers
OUTSIDE_CAPTURE_NOTE = (
    "the CUDA graph captured from this forward did not reproduce its outputs ({detail}): "
    "work launched outside the capturing stream is not in the graph. Timed eagerly. To be "
    "replayed from a graph, launch every kernel on PyTorch's current stream: for CuTe DSL "
    "pass stream=cuda.CUstream(torch.cuda.current_stream().cuda_stream) to the launch; for "
    "Triton, launch on torch.cuda.current_stream() or make it wait on your side stream")


class CudaContextCorrupted(RuntimeError):
    """A failed capture or a sticky error left this process's CUDA context unusable."""


@dataclass
class Launch:
    """Launches input set i and returns that call's outputs."""

    run: Callable[[int], object]
    method: str  # "graph" or "eager"
    graph_error: str | None  # why it is not a graph
    call_s: float  # one warm-up call's seconds


def prepare_launch(forward: Callable[[Mapping[str, torch.Tensor]], object],
                   input_sets: Sequence[Mapping[str, torch.Tensor]], allow_graph: bool,
                   steps: Steps, atol: float, rtol: float) -> Launch:
    """Warm up, then capture and check a graph per input set where allowed (module doc)."""
    torch.cuda.synchronize()
    warm_started = time.perf_counter()
    for inputs in input_sets:  # warm-up: compile and autotune outside capture
        forward(inputs)
    torch.cuda.synchronize()
    steps.add("timing.warmup", time.perf_counter() - warm_started, len(input_sets))
    call_s = (time.perf_counter() - warm_started) / len(input_sets)

    def eager(i: int) -> object:
        return forward(input_sets[i])

    if not allow_graph:
        return Launch(eager, "eager", "graph capture disabled for this shape", call_s)
    try:
        with steps("timing.graph_capture"):
            graphs, outputs = capture_graphs(forward, input_sets)
    except RuntimeError as exc:
        check_context_usable(exc)
        return Launch(eager, "eager", f"{type(exc).__name__}: {exc}".splitlines()[0][:300],
                      call_s)
    with steps("timing.graph_check"):
        problem = _replay_problem(forward, input_sets[0], graphs[0], outputs[0], atol, rtol)
    if problem is not None:
        del graphs, outputs
        return Launch(eager, "eager", OUTSIDE_CAPTURE_NOTE.format(detail=problem), call_s)

    def replay(i: int) -> object:
        graphs[i].replay()
        return outputs[i]  # the graph writes its outputs to the captured tensors

    return Launch(replay, "graph", None, call_s)


def graph_mismatch(eager: object, replayed: object, atol: float, rtol: float) -> str | None:
    """Why a graph's replay is not the forward (None when it reproduced it): its outputs,
    poisoned before the replay, against the eager call's on the same contents."""
    expected, got = as_output_dict(eager), as_output_dict(replayed)
    if expected is None or got is None:
        return "its outputs are not tensors"
    comparison = compare_outputs(got, expected, atol, rtol)
    return None if comparison.passed else comparison.reason


def _replay_problem(forward: Callable[[Mapping[str, torch.Tensor]], object],
                    inputs: Mapping[str, torch.Tensor], graph: torch.cuda.CUDAGraph,
                    captured: object, atol: float, rtol: float) -> str | None:
    """One replay of `graph` against an eager call, both from the same contents of
    `inputs` (restored before each: a forward may update an input in place)."""
    saved = {k: v.clone() for k, v in inputs.items() if isinstance(v, torch.Tensor)}

    def restore() -> None:
        for name, tensor in saved.items():
            inputs[name].copy_(tensor)

    with torch.no_grad():
        eager = _cloned(forward(inputs))
        restore()
        for tensor in (as_output_dict(captured) or {}).values():
            tensor.view(torch.uint8).fill_(POISON_BYTE)
        graph.replay()
        torch.cuda.synchronize()
        problem = graph_mismatch(eager, captured, atol, rtol)
        restore()
    torch.cuda.synchronize()
    return problem


def _cloned(result: object) -> object:
    outputs = as_output_dict(result)
    return result if outputs is None else {k: v.clone() for k, v in outputs.items()}


def capture_graphs(
    forward: Callable[[Mapping[str, torch.Tensor]], object],
    input_sets: Sequence[Mapping[str, torch.Tensor]],
) -> tuple[list[torch.cuda.CUDAGraph], list[object]]:
    graphs, outputs = [], []
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        forward(input_sets[0])  # a side-stream warm-up, as torch.cuda.graphs recommends
    torch.cuda.current_stream().wait_stream(stream)
    for inputs in input_sets:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            outputs.append(forward(inputs))
        graphs.append(graph)
    torch.cuda.synchronize()
    return graphs, outputs


def check_context_usable(cause: BaseException) -> None:
    try:
        torch.cuda.synchronize()
        probe = torch.randn(16, device="cuda")
        float(probe.sum())
    except RuntimeError as exc:
        raise CudaContextCorrupted(f"CUDA context unusable after failed graph capture: {cause}") \
            from exc
