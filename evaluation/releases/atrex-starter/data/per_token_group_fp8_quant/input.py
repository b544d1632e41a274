import torch


def _make_inputs(num_tokens: int, hidden_size: int) -> dict[str, torch.Tensor]:
    """Activations entering a block-quantised fp8 linear layer or MoE GEMM.

    `hidden_size` must be a multiple of the group size (128). Token scales vary
    (log-normal) and about 1% of the channels are outlier channels eight times larger than
    the rest, as in LLM activations, so group maxima (and scales) differ within a row.
    """
    row_scale = torch.exp(0.5 * torch.randn(num_tokens, 1))
    channel_scale = torch.where(torch.rand(hidden_size) < 0.01, 8.0, 1.0)
    x = torch.randn(num_tokens, hidden_size) * row_scale * channel_scale
    return {"x": x.to(torch.bfloat16)}
