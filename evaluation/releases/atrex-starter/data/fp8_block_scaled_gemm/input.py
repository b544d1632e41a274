import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
SCALE_EPS = 1e-10  # floor on a group's absolute maximum, as the framework's quantiser uses


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _make_inputs(m: int, n: int, k: int, block_n: int, block_k: int) -> dict[str, torch.Tensor]:
    """Realistic fp8 operands: random bf16 tensors quantised the way the framework does it.

    Activations: unit-scale bf16 values quantised per token and group of block_k columns
    (dynamic per-token-group quantisation: scale = max(|x|) / 448, q = clamp(x / scale)).
    Weights: a trained-looking bf16 projection (std K^-1/2) quantised per block_n x block_k
    tile (scale = tile max(|w|) / 448), as in DeepSeek-V3's fp8 checkpoint (weight_block_size
    [128, 128]). Partial last blocks are quantised over the elements that exist.
    """
    kg, ng = _ceil_div(k, block_k), _ceil_div(n, block_n)

    x = torch.randn(m, k, dtype=torch.bfloat16).to(torch.float32)
    x_pad = torch.zeros(m, kg * block_k)
    x_pad[:, :k] = x
    x_groups = x_pad.view(m, kg, block_k)
    a_scale = x_groups.abs().amax(dim=-1).clamp_min(SCALE_EPS) / FP8_MAX
    a = (x_groups / a_scale[:, :, None]).clamp(-FP8_MAX, FP8_MAX).view(m, kg * block_k)[:, :k]

    w = (torch.randn(n, k) * k**-0.5).to(torch.bfloat16).to(torch.float32)
    w_pad = torch.zeros(ng * block_n, kg * block_k)
    w_pad[:n, :k] = w
    w_tiles = w_pad.view(ng, block_n, kg, block_k)
    b_scale = w_tiles.abs().amax(dim=(1, 3)).clamp_min(SCALE_EPS) / FP8_MAX
    b = (w_tiles / b_scale[:, None, :, None]).clamp(-FP8_MAX, FP8_MAX)
    b = b.view(ng * block_n, kg * block_k)[:n, :k]

    return {
        "a": a.contiguous().to(FP8),
        "a_scale": a_scale.contiguous(),
        "b": b.contiguous().to(FP8),
        "b_scale": b_scale.contiguous(),
    }
