"""Write data/<op>/hidden_shapes.json for every operator of the atrex-starter release.

Usage: python evaluation/release_tools/make_starter_hidden_shapes.py
       (then make_starter_roofline.py, which gives the hidden shapes their W and Q too)

The hidden tier (docs/starter-release.md, "The hidden tier"): per operator, two or three
shapes of the same models and layers as its public hot shapes (the same provenance, init
arguments and every size but one), at a token count, batch or sequence mix the public tier
does not list and within its ranges (decode 1-256, prefill 512-32768). A kernel that works
for the operator works for them; one hard-coded to the public shapes does not. Each is made
from a public shape by changing the one size that varies in production (tokens, batch, M, the
sequence lengths) and the sizes that follow from it; its id is made the way the public ids
are. Deterministic: a test checks the committed files equal a regeneration.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

STARTER_RELEASE = Path(__file__).resolve().parents[1] / "releases" / "atrex-starter"

# operator -> (public shape to start from, the new token count / batch / M / sequence lengths)
PICKS: dict[str, list[tuple[str, Any]]] = {
    "rms_norm": [("llama3.1-8b-decode-t64-h4096", 24),
                 ("llama3.1-8b-prefill-t8192-h4096", 3072),
                 ("qwen3-30b-a3b-decode-t32-h2048", 96)],
    "fused_add_rms_norm": [("llama3.1-8b-decode-t32-h4096", 96),
                           ("llama3.1-8b-prefill-t4096-h4096", 6144)],
    "fp8_per_token_quant": [("llama3.1-8b-decode-t64-h4096", 48),
                            ("llama3.1-8b-decode-t64-h14336", 160)],
    "per_token_group_fp8_quant": [("deepseek-v3-decode-t64-h7168", 96),
                                  ("deepseek-v3-prefill-t4096-h7168", 3072)],
    "silu_and_mul": [("llama3.1-8b-decode-t64-d14336", 24),
                     ("llama3.1-8b-prefill-t4096-d14336", 2560)],
    "topk_softmax_gating": [("mixtral-8x7b-decode-t128-e8-k2", 48),
                            ("mixtral-8x7b-prefill-t4096-e8-k2", 3072)],
    "fused_moe_bf16": [("mixtral-8x7b-decode-t64", 24),
                       ("mixtral-8x7b-prefill-t2048", 1536)],
    "moe_align_block_size": [("mixtral-8x7b-decode-t64-b16", 96),
                             ("qwen3-30b-a3b-prefill-t8192-b64", 6144)],
    "linear_bf16": [("llama3.1-8b-decode-gateup-m128-n28672-k4096", 48),
                    ("llama3.1-8b-decode-down-m256-n4096-k14336", 96)],
    "fp8_block_scaled_gemm": [("deepseek-v3-decode-q_b-m64-n24576-k1536", 24),
                              ("deepseek-v3-prefill-o-m2048-n7168-k16384", 3072)],
    "paged_decode_attention": [("llama3.1-8b-decode-b32-h32-kv8-ctx4096", 48),
                               ("qwen3-30b-a3b-decode-b64-h32-kv4-ctx8192", 24)],
    "topk_topp_filter": [("llama3.1-8b-decode-b32-v128256", 48),
                         ("llama3.1-8b-decode-b256-v128256", 96)],
    "rotary_embedding_neox": [("llama3.1-8b-decode-t64-h32-kv8", 96),
                              ("llama3.1-8b-prefill-t8192-s2-h32-kv8", 6144)],
    "reshape_and_cache": [("llama3.1-8b-decode-t64-kv8-d128", 96),
                          ("qwen3-8b-prefill-t2048-s4-kv8-d128", 3072)],
    "varlen_prefill_attention": [("llama3.1-8b-prefill-t2048-n4-h32-kv8", [731, 212, 905, 488]),
                                 ("qwen3-30b-a3b-prefill-t4096-n1-h32-kv4", [6144])],
}

# The kwarg that varies in production, per operator, and the letter the ids give it.
VARYING = {"linear_bf16": ("m", "m"), "fp8_block_scaled_gemm": ("m", "m"),
           "paged_decode_attention": ("batch", "b"), "topk_topp_filter": ("batch", "b")}


def hidden_shape(operator: str, template_id: str, template: dict[str, Any],
                 value: Any) -> tuple[str, dict[str, Any]]:
    """The hidden shape made from `template` with its varying size set to `value`."""
    inputs = dict(template["input_kwargs"])
    if operator == "varlen_prefill_attention":
        inputs["seq_lens"] = list(value)
        new_id = re.sub(r"-t\d+-n\d+-", f"-t{sum(value)}-n{len(value)}-", template_id)
    else:
        key, letter = VARYING.get(operator, ("num_tokens", "t"))
        decode = "-decode-" in template_id
        inputs[key] = value
        if "num_seqs" in inputs and decode:
            inputs["num_seqs"] = value  # a decode step: one token per sequence
        if operator == "reshape_and_cache":
            # the public shapes' pool: 1.25 x the blocks the sequences fill, plus 8
            per_seq = math.ceil(inputs["num_tokens"] / inputs["num_seqs"] / inputs["block_size"])
            inputs["num_blocks"] = int(1.25 * per_seq * inputs["num_seqs"]) + 8
        new_id = re.sub(rf"-{letter}\d+(?=-|$)", f"-{letter}{value}", template_id, count=1)
    if new_id == template_id:
        raise SystemExit(f"{operator}/{template_id}: the id did not change")
    return new_id, {"init_kwargs": template.get("init_kwargs") or {}, "input_kwargs": inputs}


def write_hidden_shapes(release: Path = STARTER_RELEASE) -> list[Path]:
    written = []
    for operator, picks in sorted(PICKS.items()):
        directory = release / "data" / operator
        public = json.loads((directory / "shapes.json").read_text())
        hidden: dict[str, Any] = {}
        for template_id, value in picks:
            new_id, shape = hidden_shape(operator, template_id, public[template_id], value)
            if new_id in public or new_id in hidden:
                raise SystemExit(f"{operator}: {new_id} is already a shape")
            hidden[new_id] = shape
        out = directory / "hidden_shapes.json"
        out.write_text(json.dumps(hidden, indent=2) + "\n")
        written.append(out)
    return written


def main() -> None:
    for path in write_hidden_shapes():
        print(f"wrote {path.relative_to(STARTER_RELEASE)}")


if __name__ == "__main__":
    main()
