"""The FlexAttention kernel of the sparse variants (local, strided, global, longformer, bigbird) against their
blocked reference kernel: same outputs, same attended (query, key) pairs, same attention dropout semantics.

FlexAttention runs eagerly on CPU (forward only: torch has no FlexAttention backward on CPU) with the same block
mask and mask_mod as the compiled CUDA kernel; one slow test runs the compiled kernel on CPU.
"""

from __future__ import annotations

import math
import sys

import pytest
import torch
import torch.nn.functional as F

from lra_bench.attention import get_attention_class
from lra_bench.attention._flex import (
    BLOCK_SIZE,
    block_pattern_classes,
    dropped,
    evaluate_classes,
    flex_pattern_attention,
)
from lra_bench.attention._sparse import SparsePatternAttention
from lra_bench.errors import ConfigError

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")
DIM, HEADS = 32, 4
SETTINGS = [
    ("local", {"block_size": 8, "num_neighbor_blocks": 1}),
    ("local", {"block_size": 50}),  # LRA's block: does not divide the 128-token tile
    ("strided", {"stride": 5}),
    ("strided", {"stride": 17, "merged": True}),
    ("global", {"num_global": 5}),
    ("longformer", {"window": 6, "dilations": [1, 2], "num_global": 2}),
    ("longformer", {"window": 64, "dilations": [1, 3], "num_global": 0}),
    ("bigbird", {"block_size": 4, "num_global_blocks": 1, "num_rand_blocks": 2}),
    ("bigbird", {"block_size": 64}),  # LRA's setting
    ("bigbird", {"block_size": 48, "num_global_blocks": 0, "num_rand_blocks": 1}),
]
IDS = [f"{name}-{'-'.join(f'{k}{v}' for k, v in knobs.items())}" for name, knobs in SETTINGS]


def build(name: str, seq_len: int = 400, attn_dropout: float = 0.0, **knobs) -> SparsePatternAttention:
    torch.manual_seed(0)
    return get_attention_class(name)(dim=DIM, num_heads=HEADS, seq_len=seq_len, dropout=0.0,
                                     attn_dropout=attn_dropout, **knobs)


def masks(n: int) -> torch.Tensor:
    """(3, N) True = real: no padding, right padding, random holes (position 0 real)."""
    m = torch.ones(3, n, dtype=torch.bool)
    m[1, n - n // 3:] = False
    m[2] = torch.rand(n, generator=torch.Generator().manual_seed(3)) > 0.3
    m[2, 0] = True
    return m


def at_real(t: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return t[mask[:, None, :, None].expand_as(t)]


@pytest.mark.parametrize("n", [37, 300])  # inside one tile; several tiles with a partial last one
@pytest.mark.parametrize(("name", "knobs"), SETTINGS, ids=IDS)
def test_flex_equals_blocked_and_attends_the_same_pairs(name, knobs, n):
    layer = build(name, **knobs).eval()
    mask = masks(n)
    q, k = torch.randn(2, 3, HEADS, n, n).unbind(0)  # head dim = N, so that V = I reads the probabilities
    eye = torch.eye(n).expand(3, HEADS, n, n)  # out = P @ I = P: row i holds query i's attention weights
    with torch.no_grad():
        p_blocked = layer.attend_blocked(q, k, eye, mask)
        p_flex = layer.attend_flex(q, k, eye, mask, compiled=False)
    real = mask[:, None, :, None].expand_as(p_blocked)  # real query rows
    assert torch.equal((p_blocked > 0) & real, (p_flex > 0) & real), "different attended (query, key) pairs"
    # fp32, two summation orders over 300-long dot products and block-wise softmax: differences up to ~2e-5 relative
    # were seen (1 element in 844,800, depending on the threads); a wrong pattern, scale or mask is off by >> 1e-4
    torch.testing.assert_close(at_real(p_flex, mask), at_real(p_blocked, mask), atol=1e-5, rtol=1e-4)
    assert ((p_flex > 0) <= mask[:, None, None, :]).all(), "a padded key was attended"
    if n == 300 and knobs.get("block_size") != 64:  # the pattern really is sparse (BigBird's is dense at 5 blocks)
        assert (p_flex[0] == 0).any()


@pytest.mark.parametrize(("name", "knobs"), SETTINGS[::3], ids=IDS[::3])
def test_kernel_knob_routes_the_whole_layer(name, knobs):
    x, mask = torch.randn(3, 150, DIM), masks(150)
    layer = build(name, kernel="blocked", **knobs).eval()
    flex = build(name, kernel="flex", **knobs).eval()
    flex.load_state_dict(layer.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(flex(x, mask)[mask], layer(x, mask)[mask], atol=1e-5, rtol=1e-5)
    wide = get_attention_class(name)(dim=4 * 16, num_heads=4, seq_len=400, dropout=0.0, **knobs)  # head dim 16
    assert wide.kernel_for("cuda") == "flex" and wide.kernel_for("cpu") == "blocked"
    assert build(name, **knobs).kernel_for("cuda") == "blocked"  # head dim 8: compiled FlexAttention rejects it
    assert layer.kernel_for("cuda") == "blocked" and flex.kernel_for("cpu") == "flex"
    wide.require_compiled_flex()
    with pytest.raises(ConfigError, match="power of two >= 16, got model.dim / model.num_heads = 8"):
        flex.require_compiled_flex()


def test_unknown_kernel_and_bad_dropout_fail_clearly():
    with pytest.raises(ConfigError, match="kernel='triton' is not one of auto, blocked, flex"):
        build("local", kernel="triton")
    with pytest.raises(ConfigError, match="attn_dropout"):
        build("bigbird", attn_dropout=1.0)


def dense_classes(pattern: torch.Tensor, block: int) -> torch.Tensor:
    """Tile classes by brute force from a dense (H, N, N) pattern; a tile reaching past N is never full."""
    h, n, _ = pattern.shape
    nb = math.ceil(n / block)
    padded = F.pad(pattern, (0, nb * block - n, 0, nb * block - n), value=False)
    classes = torch.zeros(h, nb, nb, dtype=torch.int8)
    for i in range(nb):
        for j in range(nb):
            tile = padded[:, i * block:(i + 1) * block, j * block:(j + 1) * block]
            classes[:, i, j] = tile.flatten(1).any(1).to(torch.int8) + tile.flatten(1).all(1).to(torch.int8)
    return classes


@pytest.mark.parametrize("coarse", [4, 50, 64, 128, 200])
@pytest.mark.parametrize("n", [100, 300, 513])
def test_tile_classes_from_elements_and_from_coarse_blocks_are_exact(coarse, n):
    nc = math.ceil(n / coarse)
    attended = torch.rand(2, nc, nc, generator=torch.Generator().manual_seed(coarse + n)) > 0.6  # (H, nc, nc)
    pos = torch.arange(n)

    def pattern_mod(h, q, k):
        return attended[h, torch.clamp(q // coarse, max=nc - 1), k // coarse]

    dense = pattern_mod(torch.arange(2)[:, None, None], pos[None, :, None], pos[None, None, :])  # (H, N, N)
    want = dense_classes(dense, BLOCK_SIZE)
    assert torch.equal(evaluate_classes(pattern_mod, 2, n, torch.device("cpu")), want)
    assert torch.equal(block_pattern_classes(attended, coarse, n), want)


def test_evaluate_classes_in_many_chunks(monkeypatch):
    import lra_bench.attention._flex as flex_module

    def pattern_mod(h, q, k):
        return ((q - k).abs() <= 40 * (h + 1)) | (k % 97 == 0)

    n = 700
    whole = evaluate_classes(pattern_mod, 3, n, torch.device("cpu"))
    monkeypatch.setattr(flex_module, "_CHUNK_ELEMENTS", 1)  # one tile row per chunk
    assert torch.equal(evaluate_classes(pattern_mod, 3, n, torch.device("cpu")), whole)
    pos = torch.arange(n)
    assert torch.equal(whole, dense_classes(pattern_mod(torch.arange(3)[:, None, None], pos[:, None], pos), BLOCK_SIZE))


@pytest.mark.parametrize(("name", "knobs"), SETTINGS, ids=IDS)
def test_flex_attention_dropout_is_dropout_on_the_probabilities(name, knobs):
    """Output = (P ⊙ keep / (1-p)) V, P the softmax over the whole pattern: read through V = I (the output is then
    P ⊙ keep / (1-p) itself), then checked against P without dropout and against real values."""
    p, n = 0.3, 150
    layer = build(name, attn_dropout=p, **knobs).train()
    mask = masks(n)
    q, k, v = torch.randn(3, 3, HEADS, n, n).unbind(0)  # head dim N, so that V = I fits
    eye = torch.eye(n).expand(3, HEADS, n, n)
    seed = torch.tensor(12345)

    def attend(values, **kw):
        torch.manual_seed(0)  # the same random blocks (BigBird in training) in every call
        with torch.no_grad():
            return layer.attend_flex(q, k, values, mask, compiled=False, **kw)

    dropped_probs, out = attend(eye, seed=seed), attend(v, seed=seed)  # (B, H, N, N), (B, H, N, N)
    layer.attn_drop.p = 0.0
    probs = attend(eye)
    rows = mask[:, None, :, None].expand_as(probs)  # real query rows
    torch.testing.assert_close(at_real(out, mask), at_real(dropped_probs @ v, mask), atol=1e-4, rtol=1e-4)
    kept = (dropped_probs > 0) & rows
    attended = (probs > 0) & rows
    assert (kept <= attended).all(), "dropout added a pair"
    torch.testing.assert_close(dropped_probs[kept] * (1 - p), probs[kept], atol=1e-6, rtol=1e-4)
    assert abs(1 - kept.sum() / attended.sum() - p) < 0.03, "dropped fraction"


def test_dropout_decisions_are_uniform_independent_and_seeded():
    shape = [torch.arange(s).view([-1 if d == a else 1 for d in range(4)]) for a, s in enumerate((2, 4, 256, 256))]
    drop = dropped(torch.tensor(7), 0.1, *shape).float()  # (2, 4, 256, 256)
    assert abs(drop.mean().item() - 0.1) < 0.005
    for dim in (1, 2, 3):  # neighbouring heads, queries, keys are uncorrelated
        a, b = drop.narrow(dim, 1, drop.shape[dim] - 1), drop.narrow(dim, 0, drop.shape[dim] - 1)
        assert abs(torch.corrcoef(torch.stack([a.flatten(), b.flatten()]))[0, 1].item()) < 0.02
    assert abs(drop[0].mean() - drop[1].mean()) < 0.01 and not torch.equal(drop[0], drop[1])
    assert not torch.equal(drop, dropped(torch.tensor(8), 0.1, *shape).float())
    assert torch.equal(drop, dropped(torch.tensor(7), 0.1, *shape).float())


def test_training_redraws_the_dropout_mask_and_eval_has_none():
    layer = build("local", attn_dropout=0.5, block_size=32).train()
    q, k, v = torch.randn(3, 1, HEADS, 64, 8).unbind(0)
    with torch.no_grad():
        a, b = (layer.attend_flex(q, k, v, None, compiled=False) for _ in range(2))
        assert not torch.allclose(a, b)
        layer.eval()
        torch.testing.assert_close(layer.attend_flex(q, k, v, None, compiled=False),
                                   layer.attend_blocked(q, k, v, None), atol=1e-6, rtol=1e-5)


def test_bigbird_training_redraws_random_blocks_in_the_flex_tiles():
    layer = build("bigbird", seq_len=2048, block_size=64, num_global_blocks=0, num_rand_blocks=3).train()
    cpu = torch.device("cpu")
    assert not torch.equal(layer.flex_pattern(2048, cpu)[1], layer.flex_pattern(2048, cpu)[1])
    layer.eval()
    assert torch.equal(layer.flex_pattern(2048, cpu)[1], layer.flex_pattern(2048, cpu)[1])


def test_rows_without_keys_are_zero_not_nan():
    q, k, v = torch.randn(3, 1, 2, 40, 8).unbind(0)
    mask = torch.zeros(1, 40, dtype=torch.bool)
    mask[0, :10] = True

    def local(h, qi, ki):
        return qi // 20 == ki // 20

    classes = evaluate_classes(local, 1, 40, torch.device("cpu"))
    out = flex_pattern_attention(q, k, v, local, classes, mask, 0.0, compiled=False)
    assert torch.isfinite(out).all() and (out[:, :, 20:] == 0).all()
    want = F.scaled_dot_product_attention(q[:, :, :10], k[:, :, :10], v[:, :, :10])
    torch.testing.assert_close(out[:, :, :10], want, atol=1e-6, rtol=1e-5)


@pytest.mark.slow
def test_compiled_kernel_equals_eager_with_dropout():
    """torch.compile(flex_attention) on CPU (the CUDA path minus the device): the hashed dropout compiles."""
    layer = build("bigbird", attn_dropout=0.2, block_size=64).train()
    q, k, v = torch.randn(3, 2, HEADS, 300, 8).unbind(0)
    mask, seed = masks(300)[1:], torch.tensor(777)
    with torch.no_grad():
        torch.manual_seed(1)
        eager = layer.attend_flex(q, k, v, mask, compiled=False, seed=seed)
        torch.manual_seed(1)  # the same random blocks
        compiled = layer.attend_flex(q, k, v, mask, compiled=True, seed=seed)
    torch.testing.assert_close(at_real(compiled, mask), at_real(eager, mask), atol=1e-5, rtol=1e-5)


def load_check_script(monkeypatch):
    from tests.conftest import load_tool

    return load_tool(monkeypatch, "check_flex_paths")


def test_device_check_script_passes_and_catches_a_wrong_kernel(monkeypatch, capsys):
    """tools/check_flex_paths.py (the first thing to run on the GPU machine), eager on CPU."""
    script = load_check_script(monkeypatch)
    monkeypatch.setattr(sys, "argv", ["check_flex_paths.py", "--n", "200", "--batch", "2", "--dim", "32",
                                      "--no-compile", "--device", "cpu"])
    assert script.main() == 0
    assert capsys.readouterr().out.count(" ok") == len(script.VARIANTS)
    broken = SparsePatternAttention.attend_flex
    monkeypatch.setattr(SparsePatternAttention, "attend_flex", lambda self, q, k, v, mask, compiled, seed=None:
                        broken(self, q, k, v, mask, compiled, seed) * 1.01)
    assert script.main() == 1
    assert "FAIL" in capsys.readouterr().out


def test_compiled_kernel_head_dims():
    from lra_bench.attention._flex import compiled_kernel_supports

    assert [d for d in range(1, 300) if compiled_kernel_supports(d)] == [16, 32, 64, 128, 256]


def tile_classes_of(block_mask) -> torch.Tensor:
    """(B', H', nq, nk) int8 tile classes read back from a BlockMask: 1 = partial, 2 = full, 0 = skipped."""
    def dense(num: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        nk = block_mask.kv_indices.shape[-1]
        listed = torch.arange(idx.shape[-1]) < num[..., None]  # (B', H', nq, nk): the first num entries count
        out = torch.zeros(*idx.shape[:-1], nk, dtype=torch.int8)
        return out.scatter_(-1, idx.long(), listed.to(torch.int8))

    partial = dense(block_mask.kv_num_blocks, block_mask.kv_indices)
    full = dense(block_mask.full_kv_num_blocks, block_mask.full_kv_indices)
    assert not (partial.bool() & full.bool()).any(), "a tile listed as both partial and full"
    return partial + 2 * full


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize("n", [512, 700])  # a multiple of the tile (full tiles possible), and not
@pytest.mark.parametrize(("name", "knobs"), SETTINGS, ids=IDS)
def test_the_kernel_visits_every_attended_pair_and_full_tiles_are_full(name, knobs, n, padded):
    """Eager FlexAttention evaluates mask_mod on every pair and ignores the tiles, so outputs cannot check them:
    the BlockMask the compiled kernel follows is checked against the dense pattern here, without and with dropout."""
    from lra_bench.attention._flex import pattern_block_mask

    layer = build(name, seq_len=n, **knobs).eval()
    mask = masks(n) if padded else None
    pattern_mod, classes = layer.flex_pattern(n, torch.device("cpu"))
    pos = torch.arange(n)
    attended = pattern_mod(torch.arange(HEADS)[:, None, None], pos[:, None], pos).expand(HEADS, n, n)  # (H, N, N)
    attended = attended[None] if mask is None else attended[None] & mask[:, None, None, :]  # (B or 1, H, N, N)
    nb = -(-n // BLOCK_SIZE)
    pad = nb * BLOCK_SIZE - n
    grid = F.pad(attended, (0, pad, 0, pad)).view(*attended.shape[:2], nb, BLOCK_SIZE, nb, BLOCK_SIZE)
    any_pair = grid.any(5).any(3)  # (B or 1, H, nb, nb)
    in_range = torch.arange(nb) * BLOCK_SIZE + BLOCK_SIZE <= n
    all_pairs = grid.all(5).all(3) & in_range[:, None] & in_range[None, :]

    got = tile_classes_of(pattern_block_mask(pattern_mod, classes, mask, n, 0.0, None))
    got = got.expand(any_pair.shape[0], HEADS, nb, nb)
    assert ((got > 0) | ~any_pair).all(), "an attended pair in a skipped tile"
    assert (~(got == 2) | all_pairs).all(), "a full tile holds a pair that is not attended"
    assert torch.equal(got == 2, all_pairs), "a full tile was left partial (slower, still exact)"
    if mask is None:
        assert torch.equal(got > 0, any_pair), "a tile without attended pairs is visited"
    else:  # padding is folded in per key block: a visited tile may hold only padded keys of the pattern (rare)
        assert ((got > 0) <= (classes > 0)[None].expand_as(got)).all(), "a tile outside the pattern is visited"

    doubled = tile_classes_of(pattern_block_mask(pattern_mod, classes, mask, n, 0.1, torch.tensor(3)))
    doubled = doubled.expand(any_pair.shape[0], HEADS, nb, 2 * nb)
    for copy in (doubled[..., :nb], doubled[..., nb:]):  # kept pairs, dropped pairs: the same tiles, all partial
        assert torch.equal(copy, (got > 0).to(torch.int8))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "knobs"), SETTINGS, ids=IDS)
def test_compiled_kernel_follows_its_tiles_for_every_setting(name, knobs):
    """torch.compile(flex_attention) on CPU honours the BlockMask (eager does not): compiled == blocked, N = 300
    (a partial last tile), padded batch and no mask (batch dim 1)."""
    layer = build(name, **knobs).eval()
    q, k, v = torch.randn(3, 3, HEADS, 300, 16).unbind(0)
    for mask in (masks(300), None):
        with torch.no_grad():
            want = layer.attend_blocked(q, k, v, mask)
            got = layer.attend_flex(q, k, v, mask, compiled=True)
        rows = mask if mask is not None else torch.ones(3, 300, dtype=torch.bool)
        torch.testing.assert_close(at_real(got, rows), at_real(want, rows), atol=1e-5, rtol=1e-5)


def test_flex_kernel_cannot_train_on_cpu_and_says_so():
    layer = build("local", kernel="flex", block_size=8).train()
    x = torch.randn(2, 40, DIM, requires_grad=True)
    with pytest.raises(ConfigError, match="no FlexAttention backward there, so it cannot train; use attention.kernel"):
        layer(x, None)
    with torch.no_grad():
        assert layer(x, None).shape == x.shape  # forward only is fine (the tests' reference path)
