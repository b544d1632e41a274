import torch

# Per-row sampling parameters of a mixed batch; k == vocab / p == 1.0 mean "disabled".
_TOP_K_VALUES = (10, 20, 40, 50, 100, 200, 1000)
_HEAD_TOKENS = 64  # at most this many strongly preferred tokens per row
_MIN_GAP_PROB = 1e-3  # the kept set ends at a token of at least this probability


def _make_inputs(batch: int, vocab_size: int) -> dict[str, torch.Tensor]:
    """Logits shaped like an LM head's, and per-row k and p whose kept set is unambiguous.

    Logits are continuous (no ties, almost surely): N(0, 2^2) for the vocabulary plus, on 1..64
    random tokens per row, a boost N(mu, 3^2) with mu ~ U(10, 15) per row, so the top token
    holds typically 20-99% of the mass. k is disabled (= vocab) on a quarter of the rows, else
    one of _TOP_K_VALUES; p is disabled (= 1.0) on a quarter of the rows, else drawn from
    U(0.6, 0.98) and then moved inside the gap it falls in: with the kept tokens' masses
    S_{j-1} < p <= S_j (top-k renormalised, descending order), p ends at least pi_j / 4 away
    from both S_{j-1} and S_j, where pi_j >= 1e-3 (if p fell in a region of smaller
    probabilities it moves up to the last token with pi >= 1e-3). Any fp32 evaluation order
    (ascending or descending cumsum, fused softmax) therefore keeps the same tokens.
    """
    logits = 2.0 * torch.randn(batch, vocab_size)
    heads = torch.randint(1, _HEAD_TOKENS + 1, (batch, 1))
    mu = 10.0 + 5.0 * torch.rand(batch, 1)
    boost = (mu + 3.0 * torch.randn(batch, _HEAD_TOKENS)) \
        * (torch.arange(_HEAD_TOKENS).unsqueeze(0) < heads)
    # Distinct boosted tokens per row, written with scatter_ (not scatter_add_ over random,
    # possibly repeated ids: CUDA's atomic adds make that nondeterministic, and the harness
    # rebuilds the inputs from the same seed on both sides of the comparison).
    boosted = torch.argsort(torch.rand(batch, vocab_size), dim=1)[:, :_HEAD_TOKENS]
    logits.scatter_(1, boosted, logits.gather(1, boosted) + boost)

    choices = torch.tensor(_TOP_K_VALUES)
    k = choices[torch.randint(0, len(_TOP_K_VALUES), (batch,))].clamp(max=vocab_size)
    k = torch.where(torch.rand(batch) < 0.25, torch.full_like(k, vocab_size), k)
    target = 0.6 + 0.38 * torch.rand(batch, dtype=torch.float64)
    disabled = torch.rand(batch) < 0.25

    # Masses of the top-k-renormalised distribution, in float64, largest first.
    ranked = torch.sort(logits, dim=-1, descending=True).values
    ranked = ranked.masked_fill(ranked < ranked.gather(1, (k - 1).unsqueeze(1)), float("-inf"))
    probs = torch.softmax(ranked.to(torch.float64), dim=-1)
    upto = torch.cumsum(probs, dim=-1)
    rank = (upto < target.unsqueeze(1)).sum(-1).clamp(max=vocab_size - 1)
    last_big = (probs >= _MIN_GAP_PROB).sum(-1) - 1
    rank = torch.minimum(rank, last_big).clamp(min=0).unsqueeze(1)
    width = probs.gather(1, rank).squeeze(1)
    below = upto.gather(1, rank).squeeze(1) - width
    p = torch.minimum(torch.maximum(target, below + width / 4), below + 3 * width / 4)
    p = torch.where(disabled, torch.ones_like(p), p)
    return {"logits": logits, "k": k.to(torch.int64), "p": p.to(torch.float32)}
