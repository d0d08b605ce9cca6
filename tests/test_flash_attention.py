"""``flash``: which kernel path runs, and every path equals softmax attention at real positions.

The FlexAttention path (CUDA, padded batches) is run eagerly on CPU here: slow, but the same block mask and
mask_mod as the compiled kernel.
"""

from __future__ import annotations

import logging

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask

import lra_bench.attention.flash as flash_module
from lra_bench.attention._flex import BLOCK_SIZE, flex_key_padding_attention, key_padding_block_mask
from lra_bench.attention.flash import FlashAttention
from lra_bench.attention.softmax import SoftmaxAttention
from lra_bench.errors import ConfigError

DIM, HEADS = 32, 4
EAGER_FLEX = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")


def padded_mask(lengths: list[int], n: int) -> torch.Tensor:
    mask = torch.arange(n)[None, :] < torch.tensor(lengths)[:, None]  # (B, N) True = real
    return mask


def layers(attn_dropout: float = 0.0) -> tuple[FlashAttention, SoftmaxAttention]:
    torch.manual_seed(0)
    flash = FlashAttention(DIM, HEADS, seq_len=400, dropout=0.0, attn_dropout=attn_dropout)
    soft = SoftmaxAttention(DIM, HEADS, seq_len=400, dropout=0.0, attn_dropout=attn_dropout)
    soft.load_state_dict(flash.state_dict())
    return flash, soft


@EAGER_FLEX
@pytest.mark.parametrize("n", [37, 300])  # below one block; several blocks with a partial last one
def test_flex_padded_path_equals_sdpa_path_and_softmax(n):
    flash, soft = layers()
    flash.eval(), soft.eval()
    mask = padded_mask([n, n // 2, 5], n)
    mask[0, 10:20] = False  # a hole: not only right padding
    x = torch.randn(3, n, DIM)
    q, k, v = (torch.randn(3, HEADS, n, DIM // HEADS) for _ in range(3))
    keep = mask | ~mask.any(dim=-1, keepdim=True)
    flex = flash.attend_flex(q, k, v, keep, compiled=False)
    sdpa = flash.attend(q, k, v, mask)  # CPU: SDPA with the (B, 1, 1, N) mask
    torch.testing.assert_close(flex[mask[:, None, :, None].expand_as(flex)],
                               sdpa[mask[:, None, :, None].expand_as(sdpa)], atol=1e-5, rtol=1e-5)
    # the whole layer through the flex path, against softmax
    flash.attend = lambda q, k, v, m: flash.attend_flex(q, k, v, m | ~m.any(-1, keepdim=True), compiled=False)
    with torch.no_grad():  # torch has no FlexAttention backward on CPU
        torch.testing.assert_close(flash(x, mask)[mask], soft(x, mask)[mask], atol=1e-5, rtol=1e-5)


@EAGER_FLEX
def test_block_mask_from_block_counts_equals_create_block_mask():
    n = 3 * BLOCK_SIZE + 17
    keep = padded_mask([n, BLOCK_SIZE, BLOCK_SIZE + 1, 3], n)
    keep[0, 5:BLOCK_SIZE + 5] = False  # block 0 partial, block 1 partial
    keep[1, :] = False
    keep[1, 2 * BLOCK_SIZE:3 * BLOCK_SIZE] = True  # only a middle block: full
    ours = key_padding_block_mask(keep)
    dense = create_block_mask(lambda b, h, q, kv: keep[b, kv], keep.shape[0], None, n, n, device="cpu")
    assert torch.equal(ours.to_dense(), dense.to_dense())  # the same blocks visited
    # full blocks skip the mask_mod; create_block_mask marks every block of the last, partial query block
    # partial (rows past N), which changes nothing at real rows
    assert ours.full_kv_num_blocks[:, 0].tolist() == [[1] * 4, [1] * 4, [1] * 4, [0] * 4]
    assert ours.kv_num_blocks[:, 0].tolist() == [[3] * 4, [0] * 4, [1] * 4, [1] * 4]
    q, k, v = (torch.randn(4, 2, n, 8) for _ in range(3))
    torch.testing.assert_close(flex_key_padding_attention(q, k, v, keep | ~keep.any(-1, keepdim=True), compiled=False),
                               F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :]))


def test_dispatch_no_mask_when_unpadded_and_never_a_dense_mask(monkeypatch):
    calls = []
    real_sdpa = F.scaled_dot_product_attention

    def spy(q, k, v, attn_mask=None, dropout_p=0.0):
        calls.append(None if attn_mask is None else tuple(attn_mask.shape))
        return real_sdpa(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p)

    monkeypatch.setattr(flash_module.F, "scaled_dot_product_attention", spy)
    flash, _ = layers()
    x = torch.randn(2, 50, DIM)
    flash(x, None)
    flash(x, torch.ones(2, 50, dtype=torch.bool))
    flash(x, padded_mask([50, 20], 50))
    assert calls == [None, None, (2, 1, 1, 50)]


def test_padded_kernel_choice():
    assert FlashAttention(DIM, HEADS, seq_len=10, dropout=0.0).padded_kernel("cuda", 0.0) == "sdpa"  # head dim 8
    flash = FlashAttention(4 * 16, HEADS, seq_len=10, dropout=0.0)  # head dim 16
    assert flash.padded_kernel("cuda", 0.0) == "flex"
    assert flash.padded_kernel("cuda", 0.1) == "sdpa"  # FlexAttention has no attention dropout
    assert flash.padded_kernel("cpu", 0.0) == "sdpa"  # the fused CPU flash kernel takes the (B, 1, 1, N) mask
    flash.flex_padded = False
    assert flash.padded_kernel("cuda", 0.0) == "sdpa"


def test_all_true_mask_equals_no_mask_and_softmax():
    flash, soft = layers()
    flash.eval(), soft.eval()
    x = torch.randn(2, 64, DIM)
    ones = torch.ones(2, 64, dtype=torch.bool)
    torch.testing.assert_close(flash(x, ones), flash(x, None))
    torch.testing.assert_close(flash(x, ones), soft(x, ones), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("padded", [False, True])
def test_attention_dropout_only_in_training(padded):
    flash, soft = layers(attn_dropout=0.5)
    x = torch.randn(2, 40, DIM)
    mask = padded_mask([40, 25], 40) if padded else None
    flash.train()
    assert not torch.allclose(flash(x, mask), flash(x, mask)), "dropout must be active in training"
    flash.eval(), soft.eval()
    rows = mask if mask is not None else torch.ones(2, 40, dtype=torch.bool)
    torch.testing.assert_close(flash(x, mask)[rows], soft(x, mask)[rows], atol=1e-5, rtol=1e-5)


def test_out_of_range_attn_dropout_fails_clearly():
    with pytest.raises(ConfigError, match="attn_dropout"):
        FlashAttention(DIM, HEADS, seq_len=10, dropout=0.0, attn_dropout=1.0)


def test_dropout_on_a_cpu_warns_once_with_its_cost_and_the_setting(monkeypatch, caplog):
    """Training with attention dropout on a CPU falls back to the unfused kernel: one warning per run (process)
    naming the cost and the setting that avoids it; none in eval or without dropout; Table 2's CPU footnote."""
    from lra_bench.reports.efficiency import FLASH_CPU_NOTE, flash_note

    monkeypatch.setattr(FlashAttention, "warned", False)
    x = torch.randn(2, 16, 32)
    quiet = FlashAttention(dim=32, num_heads=2, seq_len=16, dropout=0.0, attn_dropout=0.0).train()
    dropping = FlashAttention(dim=32, num_heads=2, seq_len=16, dropout=0.0, attn_dropout=0.1)
    with caplog.at_level(logging.WARNING, logger="lra_bench.attention.flash"):
        quiet(x)
        dropping.eval()(x)
        assert not caplog.records
        dropping.train()(x)
        dropping(x)
        FlashAttention(dim=32, num_heads=2, seq_len=16, dropout=0.0, attn_dropout=0.2).train()(x)
    assert len(caplog.records) == 1
    text = caplog.records[0].getMessage()
    assert "attn_dropout=0.1" in text and "math kernel" in text and "attention.attn_dropout=0.0" in text
    cells = pd.DataFrame({"attention": ["flash", "softmax"]})
    assert flash_note(cells, {"device": "cpu-x86_64-1threads"}) == FLASH_CPU_NOTE
    assert flash_note(cells, {"device": "NVIDIA H200"}) == ""
    assert flash_note(cells.iloc[1:], {"device": "cpu-x86_64-1threads"}) == ""
