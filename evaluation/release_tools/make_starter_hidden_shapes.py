"""The atrex-starter release's hidden tier, drawn from a secret the admin holds.

Part of the trusted import (evaluation/catalog/hidden_tier.py calls `generate` on a temporary
copy of the release): nothing here writes into the repository, and no hidden shape is
tracked there. The rules are public and part of the release (data/hidden_tier.json): per
operator, two or three shapes of the same models and layers as its public hot shapes (the
same provenance, init arguments and every size but one), each made from a named public shape
by changing the one size that varies in production (tokens, batch, M, the sequence lengths)
and the sizes that follow from it; its id is made the way the public ids are. The values are
the secret part: each is drawn from HMAC-SHA256(secret, operator, template, draw), uniformly
over the rule's range (decode 1-256; prefill 512-8192 in steps of 64; per sequence for the
varlen attention), never a public shape's call. Deterministic given the secret: the same
secret gives the same tier, so importing again changes nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from evaluation.release_tools.make_fixture_roofline import Kwargs, Work, operator_roofline
from evaluation.release_tools.starter_work import attention_cache, gemm_moe, norms_quant

GENERATOR = "atrex-starter/1"  # data/hidden_tier.json's "generator"
WORK_MODELS: Mapping[str, Callable[[Kwargs, Kwargs], Work]] = {
    **norms_quant.WORK_MODELS, **attention_cache.WORK_MODELS, **gemm_moe.WORK_MODELS}

# The kwarg that varies in production, per operator, and the letter the ids give it.
VARYING = {"linear_bf16": ("m", "m"), "fp8_block_scaled_gemm": ("m", "m"),
           "paged_decode_attention": ("batch", "b"), "topk_topp_filter": ("batch", "b")}
MAX_DRAWS = 64  # per hidden shape: a draw that repeats a public call is drawn again


class HiddenTierError(ValueError):
    """data/hidden_tier.json cannot be applied to the release: says which rule and why."""


@dataclass(frozen=True)
class Rule:
    """One hidden shape: made from public shape `template`, its varying size drawn from
    low..high in steps of `step` (`count` of them for the varlen attention's sequences)."""

    template: str
    low: int
    high: int
    step: int = 1
    count: int | None = None

    @property
    def choices(self) -> int:
        return (self.high - self.low) // self.step + 1


def parse_rules(document: Any) -> dict[str, list[Rule]]:
    """data/hidden_tier.json's rules, checked; HiddenTierError otherwise."""
    if not isinstance(document, dict) or document.get("generator") != GENERATOR:
        found = document.get("generator") if isinstance(document, dict) else None
        raise HiddenTierError(f"generator {found!r}: this portal generates {GENERATOR!r}")
    operators = document.get("operators")
    if not isinstance(operators, dict) or not operators:
        raise HiddenTierError("operators: expected an object of operator -> rules")
    rules: dict[str, list[Rule]] = {}
    for operator, entries in operators.items():
        if not isinstance(entries, list) or not entries:
            raise HiddenTierError(f"operators.{operator}: expected a list of rules")
        rules[str(operator)] = [_rule(entry, f"operators.{operator}[{i}]")
                                for i, entry in enumerate(entries)]
    return rules


def _rule(entry: Any, where: str) -> Rule:
    if not isinstance(entry, dict) or not isinstance(entry.get("from"), str):
        raise HiddenTierError(f"{where}: expected {{\"from\": public shape id, ...}}")
    count = entry.get("count")
    rule = Rule(entry["from"], _positive(entry.get("low"), f"{where}.low"),
                _positive(entry.get("high"), f"{where}.high"),
                _positive(entry.get("step", 1), f"{where}.step"),
                None if count is None else _positive(count, f"{where}.count"))
    if rule.high < rule.low:
        raise HiddenTierError(f"{where}: high is below low")
    return rule


def _positive(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise HiddenTierError(f"{where}: must be a positive integer (got {value!r})")
    return value


def draw(secret: bytes, label: str, choices: int) -> int:
    """0 <= n < choices from the secret and `label` alone (64 bits reduced: the bias is below
    2^-50 for every range here)."""
    digest = hmac.new(secret, label.encode(), hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") % choices


def drawn_value(secret: bytes, operator: str, rule: Rule, attempt: int) -> int | list[int]:
    def one(part: int) -> int:
        label = f"{GENERATOR}/{operator}/{rule.template}/{attempt}/{part}"
        return rule.low + rule.step * draw(secret, label, rule.choices)

    if rule.count is None:
        return one(0)
    return [one(part) for part in range(rule.count)]


def hidden_shape(operator: str, template_id: str, template: Mapping[str, Any],
                 value: int | list[int]) -> tuple[str, dict[str, Any]]:
    """The hidden shape made from `template` with its varying size set to `value`."""
    inputs = dict(template["input_kwargs"])
    if operator == "varlen_prefill_attention":
        lengths = list(value) if isinstance(value, list) else [value]
        inputs["seq_lens"] = lengths
        new_id = re.sub(r"-t\d+-n\d+-", f"-t{sum(lengths)}-n{len(lengths)}-", template_id)
    else:
        if isinstance(value, list):
            raise HiddenTierError(f"{operator}/{template_id}: count is for seq_lens only")
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
    return new_id, {"init_kwargs": template.get("init_kwargs") or {}, "input_kwargs": inputs}


def operator_hidden_shapes(operator: str, rules: list[Rule], public: Mapping[str, Any],
                           secret: bytes) -> dict[str, Any]:
    """One operator's hidden shapes in shapes.json's format: each a call no public shape
    makes, under an id no public shape has."""
    hidden: dict[str, Any] = {}
    calls = [dict(spec["input_kwargs"]) for spec in public.values()]
    for rule in rules:
        if rule.template not in public:
            raise HiddenTierError(f"operators.{operator}: {rule.template!r} is not a public "
                                  "shape of the operator")
        for attempt in range(MAX_DRAWS):
            value = drawn_value(secret, operator, rule, attempt)
            new_id, shape = hidden_shape(operator, rule.template, public[rule.template], value)
            if new_id not in public and new_id not in hidden \
                    and shape["input_kwargs"] not in calls:
                hidden[new_id] = shape
                calls.append(shape["input_kwargs"])
                break
        else:
            raise HiddenTierError(f"operators.{operator}: {rule.template}: no new call in "
                                  f"{MAX_DRAWS} draws (is the range wider than the public "
                                  "shapes'?)")
    return hidden


def generate(rules: Mapping[str, list[Rule]], public_shapes: Mapping[str, Mapping[str, Any]],
             secret: bytes) -> dict[str, dict[str, Any]]:
    """operator -> its hidden shapes (shapes.json's format), for every operator with rules."""
    unknown = sorted(set(rules) - set(public_shapes))
    if unknown:
        raise HiddenTierError(f"operators.{unknown[0]}: no such operator in the release")
    return {operator: operator_hidden_shapes(operator, operator_rules, public_shapes[operator],
                                             secret)
            for operator, operator_rules in sorted(rules.items())}


def roofline_entries(operator: str, shapes: Mapping[str, Any],
                     peaks: Mapping[str, Any]) -> dict[str, Any]:
    """W, Q and SOL per hardware of the hidden shapes: roofline.json's "shapes" entries, made
    by the same work model and arithmetic as the public shapes' (make_starter_roofline.py)."""
    model = WORK_MODELS.get(operator)
    if model is None:
        raise HiddenTierError(f"operators.{operator}: no work model for its W and Q")
    return dict(operator_roofline(shapes, model, peaks)["shapes"])
