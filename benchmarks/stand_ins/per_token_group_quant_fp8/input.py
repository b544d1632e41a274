# Written for this project, not the public release's: the public Atrex-Bench as available
# here (alibaba/atrex-bench @ 2aa0fa3c) lacks data/per_token_group_quant_fp8/input.py. This
# generator follows the operator's own files: shapes.json's input_kwargs (token_count,
# hidden_size), metadata.json's input_dtypes (x: bf16) and reference.py's forward(x), with x
# drawn as the release's sibling quantisation operators draw theirs (standard normal). No
# device is named: the harness calls this under its device (cuda on the GPU host, so the same
# as the siblings' device="cuda"), which lets the CPU check run it too.
import torch


def _make_inputs(token_count: int, hidden_size: int) -> dict[str, torch.Tensor]:
    return {"x": torch.randn(token_count, hidden_size, dtype=torch.bfloat16)}
