"""Rotary positions (``model.positions=rope``, RoFormer): relative by construction, applied to q and k before
``attend`` in every q/k attention, refused with a clear error by the mixers that have no q/k. The attention contract
with rope on is checked in tests/test_attention_contract.py (its ``+rope`` layers)."""

from __future__ import annotations

import pytest
import torch

from lra_bench.attention import Attention, get_attention_class, list_attentions
from lra_bench.attention._rope import RotaryPositions
from lra_bench.config.plan import plan
from lra_bench.errors import ConfigError


def scores(q: torch.Tensor, k: torch.Tensor, rope: RotaryPositions, offset: int) -> torch.Tensor:
    return rope(q, offset) @ rope(k, offset).transpose(-2, -1)  # (B, H, N, N)


def test_a_shift_of_every_position_leaves_every_query_key_product_unchanged():
    torch.manual_seed(0)
    rope = RotaryPositions(head_dim=16, seq_len=4096)
    q, k = torch.randn(2, 3, 50, 16), torch.randn(2, 3, 50, 16)
    base = scores(q, k, rope, 0)
    for shift in (1, 7, 1000):
        torch.testing.assert_close(scores(q, k, rope, shift), base, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(base, q @ k.transpose(-2, -1), atol=1e-3), "the rotation must change the scores"


def test_the_product_depends_on_the_distance_only():
    """The same query and key vectors placed at (m, n) and at (m + s, n + s) score the same; at another distance,
    not."""
    torch.manual_seed(1)
    rope = RotaryPositions(head_dim=8, seq_len=64)
    q, k = torch.randn(8), torch.randn(8)
    x = torch.zeros(1, 1, 64, 8)
    at = {}
    for m, n in [(3, 10), (20, 27), (40, 47), (3, 11)]:
        xq, xk = x.clone(), x.clone()
        xq[0, 0, m], xk[0, 0, n] = q, k
        at[(m, n)] = float(rope(xq)[0, 0, m] @ rope(xk)[0, 0, n])
    assert at[(3, 10)] == pytest.approx(at[(20, 27)], abs=1e-5) == pytest.approx(at[(40, 47)], abs=1e-5)
    assert at[(3, 10)] != pytest.approx(at[(3, 11)], abs=1e-3)


def test_rotation_keeps_norms_and_adds_no_state():
    rope = RotaryPositions(head_dim=6, seq_len=32)
    x = torch.randn(2, 2, 32, 6)
    torch.testing.assert_close(rope(x).norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)
    assert rope.state_dict() == {}, "rope must not change the checkpoints' keys"


@pytest.mark.parametrize("name", [n for n in list_attentions() if issubclass(get_attention_class(n), Attention)])
def test_every_qk_attention_builds_with_rope_in_every_layer(smoke_cfg, name):
    model = plan(smoke_cfg(f"attention={name}", "model.positions=rope", "model.depth=2")).model
    assert model.encoder.pos is None, "rope adds nothing to the embeddings"
    assert all(isinstance(b.attn.rotary, RotaryPositions) for b in model.encoder.blocks)
    with torch.no_grad():
        assert model(torch.randint(1, 10, (2, 64))).shape == (2, 10)


@pytest.mark.parametrize("name", [n for n in list_attentions() if not issubclass(get_attention_class(n), Attention)])
def test_mixers_without_queries_and_keys_say_rope_does_not_apply(smoke_cfg, name):
    with pytest.raises(ConfigError, match=f"attention={name} has none .*does not apply"):
        plan(smoke_cfg(f"attention={name}", "model.positions=rope"))


def test_an_odd_head_dimension_is_a_config_error(smoke_cfg):
    with pytest.raises(ConfigError, match="head dimension .* must be even"):
        plan(smoke_cfg("model.positions=rope", "model.dim=30", "model.num_heads=2"))


def test_rope_changes_what_the_encoder_computes_and_trains(smoke_cfg):
    """The rotation reaches the attention: the same weights give other outputs with and without rope."""
    torch.manual_seed(0)
    with_rope = plan(smoke_cfg("model.positions=rope")).model.eval()
    plain = plan(smoke_cfg("model.positions=rope")).model.eval()
    for block in plain.encoder.blocks:
        block.attn.rotary = None
    x = torch.randint(1, 10, (2, 64))
    with torch.no_grad():
        assert not torch.allclose(with_rope(x), plain(x), atol=1e-5)
