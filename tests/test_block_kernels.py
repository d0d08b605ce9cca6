"""The block kernels of the sparse variants (``attention/_blocks.py``): one softmax, no mask when no key is invalid
(the fast path chosen from the batch's padding), the logsumexp only when a caller combines partial attentions."""

from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

import lra_bench.attention.sinkhorn as sinkhorn_module
from lra_bench.attention._blocks import masked_attention, masked_attention_with_shared
from lra_bench.attention.base import get_attention_class


class Calls(TorchFunctionMode):
    """The names of the torch functions called inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.names.append(getattr(func, "__name__", str(func)))
        return func(*args, **(kwargs or {}))


def reference(q, k, v, valid, scale):
    scores = (q @ k.transpose(-2, -1)) * scale
    scores = scores.masked_fill(~valid, float("-inf")) if valid is not None else scores
    return scores.softmax(-1) @ v, scores.logsumexp(-1)


def test_all_valid_keys_take_no_mask_and_match_the_reference():
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 3, 5, 16, 8, dtype=torch.float64) for _ in range(3))  # (B, H, blocks, L, D)
    everything = torch.ones(2, 1, 5, 1, 16, dtype=torch.bool)
    want, want_lse = reference(q, k, v, None, 0.3)
    for valid in (None, everything):
        with Calls() as calls:
            out, lse = masked_attention(q, k, v, valid, 0.3)
        assert lse is None and not any("masked_fill" in name for name in calls.names)
        assert calls.names.count("softmax") == 1 and "logsumexp" not in calls.names
        torch.testing.assert_close(out, want)
    out, lse = masked_attention(q, k, v, everything, 0.3, need_lse=True)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(lse, want_lse)


def test_invalid_keys_are_removed():
    torch.manual_seed(1)
    q, k, v = (torch.randn(2, 3, 4, 10, 8, dtype=torch.float64) for _ in range(3))
    valid = torch.rand(2, 1, 4, 1, 10) > 0.3
    valid[..., 0] = True  # every query keeps a key
    out, lse = masked_attention(q, k, v, valid, 0.5, need_lse=True)
    want, want_lse = reference(q, k, v, valid, 0.5)
    torch.testing.assert_close(out, want)
    torch.testing.assert_close(lse, want_lse)


def test_shared_keys_without_padding_take_no_mask():
    torch.manual_seed(2)
    q, k, v = (torch.randn(2, 2, 3, 4, 8, dtype=torch.float64) for _ in range(3))  # (B, H, blocks, Lq, D)
    ks, vs = (torch.randn(2, 2, 5, 8, dtype=torch.float64) for _ in range(2))  # (B, H, G, D)
    with Calls() as calls:
        out = masked_attention_with_shared(q, k, v, torch.ones(1, dtype=torch.bool), ks, vs,
                                           torch.ones(2, 5, dtype=torch.bool), 0.4)
    assert not any("masked_fill" in name for name in calls.names)
    keys = torch.cat([k, ks[:, :, None].expand(-1, -1, 3, -1, -1)], dim=-2)  # every block sees the shared keys
    values = torch.cat([v, vs[:, :, None].expand(-1, -1, 3, -1, -1)], dim=-2)
    torch.testing.assert_close(out, reference(q, keys, values, None, 0.4)[0])


@pytest.mark.parametrize("mask", [False, True])  # no mask, and a mask with no padding
def test_sinkhorn_fast_path_equals_its_masked_path(monkeypatch, mask):
    torch.manual_seed(3)
    layer = get_attention_class("sinkhorn")(dim=32, num_heads=2, seq_len=128, dropout=0.0, block_size=16,
                                            attn_dropout=0.0).double().eval()
    x = torch.randn(2, 128, 32, dtype=torch.float64)
    m = torch.ones(2, 128, dtype=torch.bool) if mask else None
    fast = layer(x, m)
    monkeypatch.setattr(sinkhorn_module, "all_valid", lambda valid: False)
    torch.testing.assert_close(fast, layer(x, m))
