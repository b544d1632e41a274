"""Profile a Llama-3.1-8B-shaped decoder stack built from the starter release's references.

Writes two PyTorch profiler Chrome traces (gzip), one prefill step and a few decode steps,
for `manage.py import_traces`:

    python benchmarks/make_llama_trace.py --out evaluation/releases/traces
    python manage.py import_traces evaluation/releases/traces/llama3.1-8b-h200-prefill.json.gz \
        evaluation/releases/traces/llama3.1-8b-h200-decode.json.gz \
        --release atrex-starter --phase prefill --phase decode

The stack has random weights and the shapes of Llama-3.1-8B (hidden 4096, 32 query and 8
KV heads of 128, MLP 14336, vocabulary 128256, 32 layers; meta-llama/Llama-3.1-8B
config.json). Every operator call is the release's own reference.py, run eagerly inside
`record_function("atrex::<operator>")`, which is what the release's trace_rules.json maps.
The few kernels outside those ranges (a `.contiguous()` between two operators) are what
import_traces reports as unattributed.

Runs bare (torch only) on a GPU host; on a CPU it runs with --tiny as a smoke test (a
CPU-only trace has no kernel time, so import_traces would refuse it).
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from _path import REPO
from torch.profiler import ProfilerActivity, profile, record_function

RELEASE = REPO / "evaluation" / "releases" / "atrex-starter"
KEEP_CATEGORIES = {"kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver",
                   "user_annotation", "gpu_user_annotation"}


@dataclass(frozen=True)
class Config:
    hidden: int = 4096
    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128
    intermediate: int = 14336
    vocab: int = 128256
    layers: int = 32
    rope_theta: float = 500000.0
    eps: float = 1e-5
    block_size: int = 16


TINY = Config(hidden=256, heads=4, kv_heads=2, head_dim=64, intermediate=512, vocab=1000,
              layers=2)


def load_models() -> dict[str, Any]:
    """One instance of each reference Model the stack uses, from the release's files."""
    def model(name: str, **init: Any) -> Any:
        path = RELEASE / "data" / name / "reference.py"
        spec = importlib.util.spec_from_file_location(f"starter_{name}", path)
        assert spec is not None and spec.loader is not None
        module: ModuleType = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module.Model(**init)
    return {"model": model}


class Stack:
    def __init__(self, cfg: Config, device: torch.device, max_tokens: int) -> None:
        make = load_models()["model"]
        self.cfg = cfg
        self.rms_norm = make("rms_norm", eps=cfg.eps)
        self.add_norm = make("fused_add_rms_norm", eps=cfg.eps)
        self.linear = make("linear_bf16")
        self.rope = make("rotary_embedding_neox", head_size=cfg.head_dim,
                         rotary_dim=cfg.head_dim)
        self.prefill_attention = make("varlen_prefill_attention",
                                      scale=1 / math.sqrt(cfg.head_dim))
        self.decode_attention = make("paged_decode_attention", scale=1 / math.sqrt(cfg.head_dim))
        self.silu_and_mul = make("silu_and_mul")
        self.cache_write = make("reshape_and_cache")
        self.sampler = make("topk_topp_filter")
        bf16 = dict(device=device, dtype=torch.bfloat16)
        scale = 0.02
        self.layers = [{
            "in_norm": torch.ones(cfg.hidden, **bf16), "post_norm": torch.ones(cfg.hidden, **bf16),
            "qkv": scale * torch.randn((cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim,
                                       cfg.hidden, **bf16),
            "o": scale * torch.randn(cfg.hidden, cfg.heads * cfg.head_dim, **bf16),
            "gate_up": scale * torch.randn(2 * cfg.intermediate, cfg.hidden, **bf16),
            "down": scale * torch.randn(cfg.hidden, cfg.intermediate, **bf16),
        } for _ in range(cfg.layers)]
        self.final_norm = torch.ones(cfg.hidden, **bf16)
        self.lm_head = scale * torch.randn(cfg.vocab, cfg.hidden, **bf16)
        inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, cfg.head_dim, 2, device=device,
                                                          dtype=torch.float64) / cfg.head_dim))
        angles = torch.arange(max_tokens, device=device, dtype=torch.float64)[:, None] * inv_freq
        self.cos_sin = torch.cat((angles.cos(), angles.sin()), dim=-1).float()

    def step(self, x: torch.Tensor, positions: torch.Tensor, caches: list[dict[str, Any]],
             slots: torch.Tensor, attention: Any, last_tokens: torch.Tensor) -> torch.Tensor:
        """One forward over the step's tokens; returns the filtered logits of `last_tokens`."""
        cfg = self.cfg
        q_size, kv_size = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
        residual = None
        for layer, cache in zip(self.layers, caches, strict=True):
            if residual is None:
                with record_function("atrex::rms_norm"):
                    residual, h = x, self.rms_norm(x, layer["in_norm"])
            else:
                with record_function("atrex::fused_add_rms_norm"):
                    out = self.add_norm(x, residual, layer["in_norm"])
                    h, residual = out["out"], out["residual"]
            with record_function("atrex::linear_bf16"):
                qkv = self.linear(h, layer["qkv"])
            q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
            with record_function("atrex::rotary_embedding_neox"):
                rotated = self.rope(positions, q.contiguous(), k.contiguous(), self.cos_sin)
            q, k = rotated["query"], rotated["key"]
            k = k.view(-1, cfg.kv_heads, cfg.head_dim)
            v = v.contiguous().view(-1, cfg.kv_heads, cfg.head_dim)
            with record_function("atrex::reshape_and_cache"):  # in place, as in serving
                self.cache_write(k, v, cache["k"], cache["v"], slots)
            attended = attention(q.view(-1, cfg.heads, cfg.head_dim), k, v, cache)
            with record_function("atrex::linear_bf16"):
                x = self.linear(attended.reshape(-1, q_size), layer["o"])
            with record_function("atrex::fused_add_rms_norm"):
                out = self.add_norm(x, residual, layer["post_norm"])
                h, residual = out["out"], out["residual"]
            with record_function("atrex::linear_bf16"):
                gate_up = self.linear(h, layer["gate_up"])
            with record_function("atrex::silu_and_mul"):
                h = self.silu_and_mul(gate_up)
            with record_function("atrex::linear_bf16"):
                x = self.linear(h, layer["down"])
        with record_function("atrex::fused_add_rms_norm"):
            h = self.add_norm(x, residual, self.final_norm)["out"]
        with record_function("atrex::linear_bf16"):
            logits = self.linear(h[last_tokens].contiguous(), self.lm_head)
        rows = logits.shape[0]
        k = torch.full((rows,), 50, device=logits.device, dtype=torch.int64)
        p = torch.full((rows,), 0.9, device=logits.device, dtype=torch.float32)
        with record_function("atrex::topk_topp_filter"):
            return self.sampler(logits.float(), k, p)


def caches_for(cfg: Config, blocks: int, device: torch.device) -> list[dict[str, Any]]:
    shape = (blocks, cfg.block_size, cfg.kv_heads, cfg.head_dim)
    return [{"k": torch.zeros(shape, device=device, dtype=torch.bfloat16),
             "v": torch.zeros(shape, device=device, dtype=torch.bfloat16)}
            for _ in range(cfg.layers)]


def prefill(stack: Stack, seqs: int, length: int, device: torch.device) -> Any:
    cfg = stack.cfg
    tokens = seqs * length
    blocks = -(-tokens // cfg.block_size)
    caches = caches_for(cfg, blocks, device)
    cu = torch.arange(0, tokens + 1, length, device=device, dtype=torch.int32)
    positions = torch.arange(length, device=device).repeat(seqs)
    slots = torch.arange(tokens, device=device)
    last = cu[1:].long() - 1

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: Any) -> torch.Tensor:
        with record_function("atrex::varlen_prefill_attention"):
            return stack.prefill_attention(q, k, v, cu)

    x = torch.randn(tokens, cfg.hidden, device=device, dtype=torch.bfloat16)
    return lambda: stack.step(x, positions, caches, slots, attention, last)


def decode(stack: Stack, batch: int, context: int, device: torch.device) -> Any:
    cfg = stack.cfg
    per_seq = -(-(context + 1) // cfg.block_size)
    caches = caches_for(cfg, batch * per_seq, device)
    tables = torch.randperm(batch * per_seq, device=device, dtype=torch.int32).view(batch, per_seq)
    lens = torch.full((batch,), context + 1, device=device, dtype=torch.int32)
    positions = torch.full((batch,), context, device=device, dtype=torch.int64)
    block = tables[:, context // cfg.block_size].long()
    slots = block * cfg.block_size + context % cfg.block_size

    def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cache: Any) -> torch.Tensor:
        with record_function("atrex::paged_decode_attention"):
            return stack.decode_attention(q, cache["k"], cache["v"], tables, lens)

    x = torch.randn(batch, cfg.hidden, device=device, dtype=torch.bfloat16)
    last = torch.arange(batch, device=device)
    return lambda: stack.step(x, positions, caches, slots, attention, last)


def profiled(run: Any, steps: int, device: torch.device, path: Path) -> dict[str, Any]:
    with torch.no_grad():
        run()  # warm-up: allocator, cuBLAS handles, autotuned kernels
        if device.type == "cuda":
            torch.cuda.synchronize()
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA]
                                               if device.type == "cuda" else [])
        started = time.perf_counter()
        with profile(activities=activities) as prof:
            for _ in range(steps):
                run()
            if device.type == "cuda":
                torch.cuda.synchronize()
        wall = time.perf_counter() - started
    raw = path.with_suffix("")  # the profiler writes plain JSON; keep what attribution needs
    prof.export_chrome_trace(str(raw))
    doc = json.loads(raw.read_text())
    raw.unlink()
    events = [e for e in doc.get("traceEvents", []) if e.get("cat") in KEEP_CATEGORIES
              or e.get("ph") == "M"]
    doc["traceEvents"] = events
    path.write_bytes(gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), 9))
    kernels = [e for e in events if e.get("cat") == "kernel"]
    return {"file": path.name, "steps": steps, "wall_s": round(wall, 3),
            "kernels": len(kernels), "kernel_ms": round(sum(e["dur"] for e in kernels) / 1e3, 2),
            "bytes": path.stat().st_size}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=RELEASE.parent / "traces")
    parser.add_argument("--prefill-seqs", type=int, default=4)
    parser.add_argument("--prefill-len", type=int, default=2048)
    parser.add_argument("--decode-batch", type=int, default=64)
    parser.add_argument("--context", type=int, default=2048)
    parser.add_argument("--decode-steps", type=int, default=4)
    parser.add_argument("--tiny", action="store_true", help="small dims (CPU smoke test)")
    parser.add_argument("--tag", default="h200")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg = TINY if args.tiny else Config()
    if args.tiny:
        args.prefill_seqs, args.prefill_len, args.decode_batch, args.context = 2, 32, 4, 40
    torch.manual_seed(0)
    stack = Stack(cfg, device, max_tokens=max(args.prefill_len, args.context) + 1)
    args.out.mkdir(parents=True, exist_ok=True)
    name = "llama3.1-8b" if not args.tiny else "tiny"
    report = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "torch": torch.__version__, "config": cfg.__dict__,
        "prefill": {"seqs": args.prefill_seqs, "len": args.prefill_len,
                    **profiled(prefill(stack, args.prefill_seqs, args.prefill_len, device), 1,
                               device, args.out / f"{name}-{args.tag}-prefill.json.gz")},
        "decode": {"batch": args.decode_batch, "context": args.context,
                   **profiled(decode(stack, args.decode_batch, args.context, device),
                              args.decode_steps, device,
                              args.out / f"{name}-{args.tag}-decode.json.gz")},
    }
    print(json.dumps(report, indent=1))
    if device.type == "cuda":
        weights_preview(args.out, name, args.tag)


def weights_preview(out: Path, name: str, tag: str) -> None:
    """The weights import_traces will derive (same code, no database), for the docs."""
    from evaluation.traces import combine_traces, parse_rules, read_trace, trace_shares

    rules_doc = json.loads((RELEASE / "data" / "trace_rules.json").read_text())
    operators = [p.name for p in (RELEASE / "data").iterdir() if p.is_dir()]
    rules = parse_rules(rules_doc, operators, "trace_rules.json")
    shares = [trace_shares(read_trace(out / f"{name}-{tag}-{phase}.json.gz"), rules,
                           name=f"{name}-{tag}-{phase}.json.gz", phase=phase)
              for phase in ("prefill", "decode")]
    weights, report = combine_traces(shares)
    (out / f"{name}-{tag}-weights.json").write_text(json.dumps(weights, indent=1) + "\n")
    print(json.dumps({"weights": weights, "unattributed_share": report["unattributed_share"],
                      "share_by_phase": report["share_by_phase"],
                      "traces": report["traces"]}, indent=1))


if __name__ == "__main__":
    main()
