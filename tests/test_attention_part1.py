"""Exactness, pattern, complexity and train/eval behaviour of the sparse / exact attention variants (part 1).

Each blocked implementation is checked against a naive reference that builds the boolean N x N pattern at small N
and applies it to a full softmax, or against ``softmax`` itself where a knob setting makes the variant exact.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from einops import rearrange

from lra_bench.attention import get_attention_class
from tests.helpers.intermediates import largest_intermediate

DIM, HEADS, N = 32, 4, 37


def build(name: str, seq_len: int = N, dim: int = DIM, heads: int = HEADS, **knobs):
    torch.manual_seed(0)
    layer = get_attention_class(name)(dim=dim, num_heads=heads, seq_len=seq_len, dropout=0.0, **knobs)
    return layer.eval()


def masks(n: int = N) -> torch.Tensor:
    """(3, N) True = real: no padding, right padding, and arbitrary holes (position 0 real)."""
    m = torch.ones(3, n, dtype=torch.bool)
    m[1, n - 11 :] = False
    g = torch.Generator().manual_seed(3)
    m[2] = torch.rand(n, generator=g) > 0.3
    m[2, 0] = True
    return m


def naive(layer, x: torch.Tensor, mask: torch.Tensor, pattern: torch.Tensor | None) -> torch.Tensor:
    """Full softmax with the layer's weights, restricted to ``pattern`` ((H, N, N) or (N, N), True = attend)."""
    q, k, v = rearrange(layer.qkv(x), "b n (three h d) -> three b h n d", three=3, h=layer.num_heads)
    scores = q @ k.transpose(-2, -1) / math.sqrt(layer.head_dim)  # (B, H, N, N)
    allowed = mask[:, None, None, :]
    if pattern is not None:
        allowed = allowed & pattern
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    y = rearrange(scores.softmax(-1) @ v, "b h n d -> b n (h d)")
    return layer.out(y)


def check_pattern(layer, pattern: torch.Tensor, n: int = N) -> None:
    x = torch.randn(3, n, layer.dim)
    mask = masks(n)
    with torch.no_grad():
        got, want = layer(x, mask), naive(layer, x, mask, pattern)
    torch.testing.assert_close(got[mask], want[mask], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------------ exact settings


def test_flash_equals_softmax():
    soft, flash = build("softmax"), build("flash")
    flash.load_state_dict(soft.state_dict())
    x, mask = torch.randn(3, N, DIM), masks()
    with torch.no_grad():
        torch.testing.assert_close(flash(x, mask)[mask], soft(x, mask)[mask], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(flash(x, None), soft(x, None), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(
    ("name", "knobs"),
    [
        ("local", {"block_size": N}),
        ("local", {"block_size": 10, "num_neighbor_blocks": 4}),
        ("bigbird", {"block_size": 8, "num_global_blocks": 5}),
        ("longformer", {"window": 4, "num_global": N}),
        ("routing", {"num_clusters": 1}),
    ],
)
def test_exact_settings_equal_softmax(name, knobs):
    check_pattern(build(name, **knobs), pattern=None)


@pytest.mark.parametrize("n_hashes", [1, 2])
def test_reformer_one_bucket_equals_shared_qk_softmax(n_hashes):
    layer = build("reformer", n_buckets=1, chunk_len=64, n_hashes=n_hashes)
    x, mask = torch.randn(3, N, DIM), masks()
    with torch.no_grad():
        q, v = rearrange(layer.qv(x), "b n (two h d) -> two b h n d", two=2, h=HEADS)  # each (B, H, N, D)
        scores = q @ F.normalize(q, dim=-1).transpose(-2, -1) / math.sqrt(layer.head_dim)  # keys = unit queries
        scores = scores.masked_fill(torch.eye(N, dtype=torch.bool), -1e5)  # self only as a last resort
        scores = scores.masked_fill(~mask[:, None, None, :], torch.finfo(scores.dtype).min)
        want = layer.out(rearrange(scores.softmax(-1) @ v, "b h n d -> b n (h d)"))
        got = layer(x, mask)
    torch.testing.assert_close(got[mask], want[mask], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("chunk_len", "n_buckets"), [(4, 8), (5, 4), (64, 8)])  # 10 chunks, 8 chunks, one chunk
def test_reformer_equals_a_naive_reference_of_its_chunks(chunk_len, n_buckets):
    """Each hashing round as the paper states it, one query at a time: sort by (bucket, position), cut into chunks,
    attend to the own chunk and the previous one (chunk 0 to the last), self only as a last resort, padded keys never;
    then the rounds weighted by their logsumexp. The same buckets (the layer's fixed eval rotations)."""
    layer = build("reformer", chunk_len=chunk_len, n_buckets=n_buckets, n_hashes=2)
    x, mask = torch.randn(3, N, DIM), masks()
    with torch.no_grad():
        q, v = rearrange(layer.qv(x), "b n (two h d) -> two b h n d", two=2, h=HEADS)  # each (B, H, N, D)
        c = min(chunk_len, N)
        npad = math.ceil(N / c) * c
        qp, vp = F.pad(q, (0, 0, 0, npad - N)), F.pad(v, (0, 0, 0, npad - N))  # (B, H, Np, D)
        real = F.pad(mask, (0, npad - N), value=False)  # (B, Np)
        ids = layer.buckets(qp, real)  # (B, H, R, Np)
        k = F.normalize(qp, dim=-1)
        outs = torch.zeros(3, HEADS, 2, npad, layer.head_dim)
        lses = torch.full((3, HEADS, 2, npad), -math.inf)
        for b in range(3):
            for h in range(HEADS):
                for r in range(2):
                    order = sorted(range(npad), key=lambda i: (int(ids[b, h, r, i]), i))
                    chunks = [order[j:j + c] for j in range(0, npad, c)]
                    for j, chunk in enumerate(chunks):
                        keys = chunk + (chunks[j - 1] if len(chunks) > 1 else [])
                        for i in chunk:
                            s = torch.stack([qp[b, h, i] @ k[b, h, t] for t in keys]) / math.sqrt(layer.head_dim)
                            s = torch.where(torch.tensor([t == i for t in keys]), torch.tensor(-1e5), s)
                            s = s.masked_fill(~real[b, keys], torch.finfo(s.dtype).min)
                            lses[b, h, r, i] = s.logsumexp(0)
                            outs[b, h, r, i] = s.softmax(0) @ vp[b, h, keys]
        y = (lses.softmax(dim=2)[..., None] * outs).sum(dim=2)[:, :, :N]  # (B, H, N, D)
        want = layer.out(rearrange(y, "b h n d -> b n (h d)"))
        got = layer(x, mask)
    torch.testing.assert_close(got[mask], want[mask], rtol=1e-4, atol=1e-5)


def test_reformer_lone_token_attends_to_itself():
    layer = build("reformer", chunk_len=4, n_buckets=4)
    x = torch.randn(1, 12, DIM)
    mask = torch.zeros(1, 12, dtype=torch.bool)
    mask[0, 5] = True
    with torch.no_grad():
        v = rearrange(layer.qv(x), "b n (two h d) -> two b h n d", two=2, h=HEADS)[1]  # (B, H, N, D)
        want = layer.out(rearrange(v, "b h n d -> b n (h d)"))[0, 5]
        torch.testing.assert_close(layer(x, mask)[0, 5], want, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------------------ naive patterns

POS = torch.arange(N)
QI, KJ = POS[:, None], POS[None, :]


def test_local_neighbour_pattern():
    b = 8
    check_pattern(build("local", block_size=b, num_neighbor_blocks=1), (QI // b - KJ // b).abs() <= 1)


def test_local_block_pattern():
    b = 8
    check_pattern(build("local", block_size=b), QI // b == KJ // b)


@pytest.mark.parametrize("merged", [False, True])
def test_strided_pattern(merged):
    s = 5
    layer = build("strided", stride=s, merged=merged)
    local, strided = QI // s == KJ // s, (QI - KJ) % s == 0
    if merged:
        pattern = local | strided
    else:
        pattern = torch.stack([local, local, strided, strided])  # first ceil(H/2) heads local
    check_pattern(layer, pattern)


def test_strided_default_stride_is_sqrt_seq_len():
    assert build("strided", seq_len=4096).stride == 64


def test_global_pattern():
    g = 5
    check_pattern(build("global", num_global=g), (QI < g) | (KJ < g) | (QI == KJ))


def test_longformer_pattern():
    window, g = 6, 2
    layer = build("longformer", window=window, dilations=[1, 2], num_global=g)
    r = window // 2
    heads = []
    for d in (1, 1, 2, 2):  # heads split evenly between the dilation groups
        heads.append(((QI - KJ).abs() <= r * d) & ((QI - KJ) % d == 0))
    pattern = torch.stack(heads) | (QI < g) | (KJ < g)
    check_pattern(layer, pattern)


@pytest.mark.parametrize(("window", "g"), [(2 * (N - 1), 0), (2 * (N - 1), 3), (1000, 1)])
def test_longformer_band_over_the_whole_sequence(window, g):
    """w/2 >= N - 1 without dilation: the pattern is all-to-all and runs as plain masked attention (the fast path of
    short sequences); one token short of it, the blocked kernel still runs the band."""
    layer = build("longformer", window=window, num_global=g)
    assert layer.covers_sequence(N) and not build("longformer", window=2 * (N - 2)).covers_sequence(N)
    assert not build("longformer", window=window, dilations=[1, 2]).covers_sequence(N)
    check_pattern(layer, torch.ones(N, N, dtype=torch.bool))
    x = torch.randn(2, N, DIM)
    with torch.no_grad():
        torch.testing.assert_close(layer(x, None), naive(layer, x, torch.ones(2, N, dtype=torch.bool),
                                                         torch.ones(N, N, dtype=torch.bool)), rtol=1e-4, atol=1e-5)
    short = build("longformer", window=2 * (N - 2), num_global=0)
    check_pattern(short, (QI - KJ).abs() <= N - 2)


@pytest.mark.parametrize("dilation", range(1, 9))
@pytest.mark.parametrize("n", [24, 37, 40])  # 37 is a multiple of no dilation > 1; 24 and 40 of several
def test_longformer_every_dilation_and_length(dilation, n):
    """Dilations 1..8 at lengths that are and are not multiples of them (positions past N once overflowed)."""
    window, g = 4, 1
    layer = build("longformer", seq_len=n, window=window, dilations=[1, dilation], num_global=g)
    qi, kj = torch.arange(n)[:, None], torch.arange(n)[None, :]
    heads = [((qi - kj).abs() <= (window // 2) * d) & ((qi - kj) % d == 0) for d in (1, 1, dilation, dilation)]
    check_pattern(layer, torch.stack(heads) | (qi < g) | (kj < g), n=n)


def test_bigbird_covering_every_block_runs_as_plain_attention():
    """Window + global blocks reaching every block, or few enough blocks left for the random picks to take them
    all: the pattern is all-to-all and runs as plain masked attention (short sequences); in eval, random picks count
    only at the buffer's own length (picks past a shorter one are dropped)."""
    covered = build("bigbird", block_size=8, num_global_blocks=1, num_rand_blocks=2)  # 5 blocks; outside: at most 2
    assert covered.covers_sequence(N) and not covered.training
    check_pattern(covered, torch.ones(N, N, dtype=torch.bool))
    assert not build("bigbird", block_size=8, num_global_blocks=1, num_rand_blocks=1).covers_sequence(N)
    longer = build("bigbird", seq_len=64, block_size=8, num_global_blocks=1, num_rand_blocks=2)  # buffer: 8 blocks
    assert not longer.covers_sequence(N) and longer.train().covers_sequence(N)
    window_only = build("bigbird", seq_len=64, block_size=8, num_global_blocks=3, num_rand_blocks=0)
    assert window_only.covers_sequence(N)  # blocks 3 and 4 (of 5) reach each other; blocks 0-2 are global
    check_pattern(window_only, torch.ones(N, N, dtype=torch.bool))


@pytest.mark.parametrize("seq_len", [N, 64])  # 64: the eval buffer holds more blocks than this N has
def test_bigbird_pattern(seq_len):
    b, g = 4, 1
    layer = build("bigbird", seq_len=seq_len, block_size=b, num_global_blocks=g, num_rand_blocks=2)
    nb = math.ceil(N / b)
    bi, bj = QI // b, KJ // b
    pattern = ((bi - bj).abs() <= 1) | (bi < g) | (bj < g)
    pattern = pattern.expand(HEADS, N, N).clone()
    idx, ok = layer.eval_rand_blocks, layer.eval_rand_valid  # (H, nb_max, r)
    for h in range(HEADS):
        for qb in range(nb):
            for r in range(idx.shape[-1]):
                if ok[h, qb, r] and idx[h, qb, r] < nb:
                    pattern[h, bi[:, 0] == qb] |= bj[0] == idx[h, qb, r]
    assert (pattern.sum(-1) < N).any(), "the pattern should be sparse"
    check_pattern(layer, pattern)


def test_sinkhorn_hard_permutation_pattern():
    b = 8
    layer = build("sinkhorn", block_size=b)
    nb = math.ceil(N / b)
    perm = (torch.arange(nb) + 2) % nb  # sorted block i = block perm[i] (no fixed point)
    hard = F.one_hot(perm, nb).float()  # (nb target, nb source)
    layer.permutation = lambda kb, real_b: hard.expand(kb.shape[0], kb.shape[1], nb, nb)
    bi, bj = QI // b, KJ // b
    check_pattern(layer, (bi == bj) | (bj == perm[bi]))


def test_sinkhorn_identity_permutation_equals_local():
    b = 8
    sink, local = build("sinkhorn", block_size=b), build("local", block_size=b)
    local.load_state_dict({k: v for k, v in sink.state_dict().items() if not k.startswith("sort_")})
    sink.permutation = lambda kb, real_b: torch.eye(kb.shape[2]).expand(kb.shape[0], kb.shape[1], -1, -1)
    x, mask = torch.randn(3, N, DIM), masks()
    with torch.no_grad():
        torch.testing.assert_close(sink(x, mask)[mask], local(x, mask)[mask], rtol=1e-4, atol=1e-5)


def test_sinkhorn_permutation_is_doubly_stochastic_over_real_blocks():
    b = 8
    layer = build("sinkhorn", block_size=b, iterations=200)
    nb = math.ceil(N / b)
    kb = torch.randn(2, HEADS, nb, b, layer.head_dim)
    real_b = torch.ones(2, nb, b, dtype=torch.bool)
    real_b[1, -2:] = False  # the last two blocks of row 1 are padding
    real_b[1, -3, 3:] = False
    with torch.no_grad():
        p = layer.permutation(kb, real_b)  # (B, H, nb, nb)
    torch.testing.assert_close(p.sum(-1), torch.ones(2, HEADS, nb), rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(p.sum(-2), torch.ones(2, HEADS, nb), rtol=1e-3, atol=1e-3)
    assert (p[1, :, : nb - 2, nb - 2 :] == 0).all() and (p[1, :, nb - 2 :, : nb - 2] == 0).all()


# ------------------------------------------------------------------------------------------ complexity

BIG_N = 8192
SUBQUADRATIC = ["local", "strided", "global", "longformer", "bigbird", "reformer", "routing", "sinkhorn"]


def probe(name: str, heads: int = 4) -> int:
    layer = build(name, seq_len=BIG_N, dim=64, heads=heads).train()
    x = torch.randn(1, BIG_N, 64, requires_grad=True)
    mask = torch.ones(1, BIG_N, dtype=torch.bool)
    mask[0, -100:] = False
    numel, _ = largest_intermediate(lambda: layer(x, mask))
    return numel


def test_complexity_probe_is_live_on_softmax():
    assert probe("softmax", heads=1) >= BIG_N * BIG_N  # one head keeps this probe at ~1 GB


@pytest.mark.parametrize("name", SUBQUADRATIC)
def test_largest_intermediate_is_subquadratic(name):
    numel = probe(name)
    assert numel < BIG_N * BIG_N, f"{name}: largest intermediate {numel} >= N^2"


# ------------------------------------------------------------------------------------------ train / eval


def test_routing_centroids_update_only_in_training():
    layer = build("routing", seq_len=64)
    x, mask = torch.randn(2, 64, DIM), masks(64)[:2]
    before = layer.centroids.clone()
    with torch.no_grad():
        layer(x, mask)
    assert torch.equal(layer.centroids, before)
    layer.train()
    with torch.no_grad():
        layer(x, mask)
    assert not torch.equal(layer.centroids, before)
    torch.testing.assert_close(layer.centroids.norm(dim=-1), torch.ones(HEADS, layer.num_clusters))


def test_routing_padded_tokens_excluded_from_centroid_update():
    layer = build("routing", seq_len=64).train()
    x, mask = torch.randn(2, 64, DIM), masks(64)[:2]
    scrambled = torch.where(mask[..., None], x, 1e3 * torch.randn_like(x))
    with torch.no_grad():
        layer(x, mask)
        first = layer.centroids.clone()
        layer.centroids.copy_(build("routing", seq_len=64).centroids)
        layer(scrambled, mask)
    torch.testing.assert_close(layer.centroids, first)


@pytest.mark.parametrize(
    ("name", "knobs"),
    [("bigbird", {"block_size": 4, "num_global_blocks": 1}), ("reformer", {"chunk_len": 4, "n_buckets": 8})],
)
def test_randomness_fixed_in_eval_redrawn_in_training(name, knobs):
    layer = build(name, seq_len=64, attn_dropout=0.0, **knobs)
    x = torch.randn(2, 64, DIM)
    with torch.no_grad():
        y1, y2 = layer(x, None), layer(x, None)
        torch.testing.assert_close(y1, y2, rtol=0, atol=0)
        layer.train()
        t1, t2 = layer(x, None), layer(x, None)
    assert not torch.allclose(t1, t2)
    fresh = build(name, seq_len=64, attn_dropout=0.0, **knobs)  # same seed -> same eval pattern after a rebuild
    with torch.no_grad():
        torch.testing.assert_close(fresh(x, None), y1, rtol=1e-5, atol=1e-6)
