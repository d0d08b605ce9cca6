"""Mechanism-specific checks for the linear / low-rank / kernel / synthetic / mixing variants.

Kernel equivalence against naive N x N references, approximation trends of random features, the
Nyström and FNet identities, complexity proofs at N = 8192, bf16 / large-input numerics, and the
Performer / RFA feature redraw schedule. Run with ``-s`` to see the approximation errors.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from lra_bench.attention.compressed import CompressedAttention
from lra_bench.attention.efficient import EfficientAttention
from lra_bench.attention.fnet import FNetMixing
from lra_bench.attention.gmlp import GMLPSpatialGating
from lra_bench.attention.linear import LinearAttention
from lra_bench.attention.linformer import LinformerAttention
from lra_bench.attention.mlp_mixer import MLPMixerTokenMixing
from lra_bench.attention.nystromformer import NystromformerAttention
from lra_bench.attention.performer import PerformerAttention
from lra_bench.attention.rfa import RFAAttention
from lra_bench.attention.synthesizer import SynthesizerAttention
from tests.helpers.intermediates import largest_intermediate

DIM, HEADS, SEQ_LEN = 32, 4, 80

#: name -> constructor of a small instance (extra keyword knobs), covering every mode worth checking
VARIANTS = {
    "linformer": lambda **kw: LinformerAttention(**kw),
    "compressed": lambda **kw: CompressedAttention(**kw),
    "nystromformer": lambda **kw: NystromformerAttention(**kw, num_landmarks=16),
    "linear": lambda **kw: LinearAttention(**kw),
    "efficient": lambda **kw: EfficientAttention(**kw),
    "rfa": lambda **kw: RFAAttention(**kw),
    "performer": lambda **kw: PerformerAttention(**kw),
    "performer_relu": lambda **kw: PerformerAttention(**kw, kernel="relu"),
    "synthesizer_dense": lambda **kw: SynthesizerAttention(**kw, mode="dense"),
    "synthesizer_random": lambda **kw: SynthesizerAttention(**kw, mode="random", ignore_dot_product=True),
    "synthesizer_factorized": lambda **kw: SynthesizerAttention(**kw, mode="factorized_random", k=8),
    "fnet": lambda **kw: FNetMixing(**kw),
    "gmlp": lambda **kw: GMLPSpatialGating(**kw),
    "mlp_mixer": lambda **kw: MLPMixerTokenMixing(**kw),
}


def build(key: str, dim: int = DIM, heads: int = HEADS, seq_len: int = SEQ_LEN, **knobs):
    torch.manual_seed(0)
    return VARIANTS[key](dim=dim, num_heads=heads, seq_len=seq_len, dropout=0.0, **knobs).eval()


def qkv_mask(b: int = 2, h: int = 2, n: int = 12, d: int = 8, seed: int = 0, scale: float = 1.0):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (scale * torch.randn(b, h, n, d, generator=g) for _ in range(3))
    mask = torch.ones(b, n, dtype=torch.bool)
    mask[1, n * 2 // 3 :] = False  # second row right-padded
    mask[0, 1] = False  # first row: a hole, padding need not be at the end
    return q, k, v, mask


def kernel_attention(scores: torch.Tensor, v: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Naive (B, H, N, N) non-negative kernel matrix -> row-normalised attention over real keys."""
    a = scores.masked_fill(~mask[:, None, None, :], 0.0)  # (B, H, N, N)
    return (a @ v) / a.sum(dim=-1, keepdim=True)


def softmax_attention(q, k, v, mask, scale: float) -> torch.Tensor:
    scores = (q @ k.transpose(-1, -2)) * scale  # (B, H, N, N)
    scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))
    return scores.softmax(dim=-1) @ v


def assert_close_at_real(a, b, mask, **tol):
    real = mask[:, None, :, None].expand_as(a)
    torch.testing.assert_close(a[real], b[real], **tol)


# --------------------------------------------------------------------------- kernel equivalence


def test_linear_equals_quadratic_elu_kernel():
    q, k, v, mask = qkv_mask()
    layer = LinearAttention(16, 2, 12, 0.0, eps=0.0)
    phi = lambda x: F.elu(x) + 1  # noqa: E731
    ref = kernel_attention(phi(q) @ phi(k).transpose(-1, -2), v, mask)
    assert_close_at_real(layer.attend(q, k, v, mask), ref, mask, rtol=1e-5, atol=1e-5)


def test_efficient_equals_quadratic_reference():
    q, k, v, mask = qkv_mask()
    layer = EfficientAttention(16, 2, 12, 0.0)
    rho_k = k.masked_fill(~mask[:, None, :, None], float("-inf")).softmax(dim=-2)  # over the sequence
    weights = q.softmax(dim=-1) @ rho_k.transpose(-1, -2)  # (B, H, N, N), rows sum to 1
    ref = weights @ v.masked_fill(~mask[:, None, :, None], 0.0)
    assert torch.allclose(weights.sum(-1), torch.ones(()), atol=1e-5)
    assert_close_at_real(layer.attend(q, k, v, mask), ref, mask, rtol=1e-5, atol=1e-5)


def test_rfa_equals_quadratic_random_fourier_kernel():
    q, k, v, mask = qkv_mask()
    torch.manual_seed(0)
    layer = RFAAttention(16, 2, 12, 0.0, num_features=64, eps=1e-12)
    with torch.no_grad():
        layer.log_inv_sigma.uniform_(-0.3, 0.3)  # a non-trivial learned scale

    def phi(x):
        x = x / x.norm(dim=-1, keepdim=True) * layer.log_inv_sigma.exp()[:, None, :]
        wx = x @ layer.omega.T  # (B, H, N, M)
        return torch.cat([wx.sin(), wx.cos()], dim=-1) / math.sqrt(layer.num_features)

    scores = phi(q) @ phi(k).transpose(-1, -2)  # (B, H, N, N)
    ref = kernel_attention(scores, v, mask)
    with torch.no_grad():
        assert_close_at_real(layer.attend(q, k, v, mask), ref, mask, rtol=1e-4, atol=1e-4)


def test_performer_equals_quadratic_favor_kernel():
    q, k, v, mask = qkv_mask()
    torch.manual_seed(0)
    layer = PerformerAttention(16, 2, 12, 0.0, nb_features=32)
    d = q.shape[-1]
    w = layer.projection  # (M, D)

    def phi(x):  # unstabilised positive random features
        x = x * d**-0.25
        return torch.exp(x @ w.T - 0.5 * x.square().sum(-1, keepdim=True)) / math.sqrt(w.shape[0])

    ref = kernel_attention(phi(q) @ phi(k).transpose(-1, -2), v, mask)
    assert_close_at_real(layer.attend(q, k, v, mask), ref, mask, rtol=1e-4, atol=1e-5)


def test_orthogonal_features_are_orthogonal_within_blocks():
    from lra_bench.attention.performer import orthogonal_gaussian

    torch.manual_seed(0)
    w = orthogonal_gaussian(40, 16)  # (M, D): blocks of 16, 16, 8 rows
    block = F.normalize(w[:16], dim=-1)
    torch.testing.assert_close(block @ block.T, torch.eye(16), atol=1e-5, rtol=0)


def test_orthogonal_features_are_haar_and_the_kernel_estimate_unbiased():
    """E[φ(q)·φ(k)] = exp(q·k/√D) (FAVOR+ Lemma 1). QR without the sign fix put W[0,0] < 0 in every draw and
    gave 0.975 ± 0.002 here (q = k along the first axis, the direction the unfixed rows avoid)."""
    from lra_bench.attention.performer import orthogonal_gaussian

    torch.manual_seed(0)
    d, draws = 16, 4000
    w = torch.stack([orthogonal_gaussian(d, d) for _ in range(draws)])  # (T, M, D)
    assert 0.45 < (w[:, 0, 0] > 0).float().mean().item() < 0.55, "row signs must be symmetric (Haar)"
    x = torch.zeros(d)
    x[0] = 0.5 * d**-0.25  # x' = x / D^¼ for q = k = 0.5·e₁
    phi = torch.exp(w @ x - 0.5 * x.square().sum())  # (T, M): unnormalised positive features of q (= k)
    ratio = (phi * phi).mean(-1) / torch.exp(x @ x)  # (T,): estimate / exact, one per draw
    mean, stderr = ratio.mean().item(), ratio.std().item() / math.sqrt(draws)
    assert abs(mean - 1) < 4 * stderr, f"biased softmax-kernel estimate: {mean:.4f} ± {stderr:.4f}"


# --------------------------------------------------------------------------- approximation trend

FEATURE_COUNTS = (16, 64, 256, 1024)
SEEDS = range(4)


def _mean_rel_error(make_layer, exact, q, k, v, mask) -> float:
    errors = []
    for seed in SEEDS:
        torch.manual_seed(100 + seed)
        layer = make_layer()
        with torch.no_grad():
            out = layer.attend(q, k, v, mask)
        real = mask[:, None, :, None].expand_as(out)
        errors.append(((out - exact)[real].norm() / exact[real].norm()).item())
    return sum(errors) / len(errors)


def _assert_trend(name: str, errors: dict[int, float]) -> None:
    print(
        f"\n{name} mean relative error vs exact softmax attention: "
        + ", ".join(f"M={m}: {e:.4f}" for m, e in errors.items())
    )
    values = list(errors.values())
    assert all(b < a for a, b in zip(values, values[1:], strict=False)), f"{name}: error does not decrease: {errors}"
    assert values[-1] < values[0] / 3, f"{name}: 64x more features should cut the error >3x: {errors}"


def test_performer_error_decreases_with_features():
    # q, k entries ~ N(0, 0.25): at unit scale (logit std 1, D=16) the positive-feature estimator's variance
    # (∝ exp(‖q'+k'‖²)) is so large that 1024 features still leave ~80% error
    q, k, v, mask = qkv_mask(b=2, h=2, n=64, d=16, seed=3)
    q, k = 0.5 * q, 0.5 * k
    exact = softmax_attention(q, k, v, mask, 16**-0.5)
    errors = {
        m: _mean_rel_error(lambda m=m: PerformerAttention(32, 2, 64, 0.0, nb_features=m), exact, q, k, v, mask)
        for m in FEATURE_COUNTS
    }
    _assert_trend("performer", errors)


def test_rfa_error_decreases_with_features():
    q, k, v, mask = qkv_mask(b=2, h=2, n=64, d=16, seed=3)
    sigma = 1.0  # exact target: softmax(q̂·k̂ / σ²) on L2-normalised q and k (at σ=0.5, M<=256 can hit ~0 normalisers)
    exact = softmax_attention(F.normalize(q, dim=-1), F.normalize(k, dim=-1), v, mask, 1 / sigma**2)
    errors = {
        m: _mean_rel_error(
            lambda m=m: RFAAttention(32, 2, 64, 0.0, num_features=m, sigma=sigma, eps=1e-12), exact, q, k, v, mask
        )
        for m in FEATURE_COUNTS
    }
    _assert_trend("rfa", errors)


# --------------------------------------------------------------------------- Nyström, FNet, Synthesizer


@pytest.mark.parametrize("padded", [False, True])
def test_nystromformer_with_all_landmarks_matches_softmax(padded):
    """landmarks = N: every landmark is one token, so K₁ pinv(K₂) K₃ = S S⁺ S = S (exactly, once pinv converges)."""
    n = 24
    q, k, v, mask = qkv_mask(b=2, h=2, n=n, d=8, seed=1)
    if not padded:
        mask = torch.ones_like(mask)  # padded: L < M real tokens, so some landmarks are empty and masked
    exact = softmax_attention(q, k, v, mask, 8**-0.5)
    converged = NystromformerAttention(16, 2, n, 0.0, num_landmarks=n, pinv_iterations=20, conv_kernel=0)
    default = NystromformerAttention(16, 2, n, 0.0, num_landmarks=n, conv_kernel=0)  # 6 iterations (paper)
    with torch.no_grad():
        out, out6 = converged.attend(q, k, v, mask), default.attend(q, k, v, mask)
    assert_close_at_real(out, exact, mask, rtol=1e-4, atol=1e-4)
    real = mask[:, None, :, None].expand_as(out6)
    rel = ((out6 - exact)[real].norm() / exact[real].norm()).item()
    print(f"\nnystromformer landmarks=N, 6 pinv iterations: relative error {rel:.4f}")
    assert rel < 0.1


def test_iterative_pinv_approaches_true_pseudo_inverse():
    from lra_bench.attention.nystromformer import iterative_pinv

    torch.manual_seed(0)
    mat = (torch.randn(3, 16, 16)).softmax(dim=-1)  # row-stochastic, like the landmark kernel
    approx = iterative_pinv(mat, 12)
    torch.testing.assert_close(mat @ approx @ mat, mat, rtol=1e-3, atol=1e-4)


def test_fnet_equals_explicit_dft_product():
    torch.manual_seed(0)
    b, n, c = 2, 20, 12
    x = torch.randn(b, n, c)
    mask = torch.ones(b, n, dtype=torch.bool)
    mask[1, 13:] = False
    layer = FNetMixing(c, 3, 32, 0.0)

    def dft(m: int) -> torch.Tensor:
        idx = torch.arange(m, dtype=torch.float64)
        return torch.exp(-2j * math.pi * idx[:, None] * idx[None, :] / m)  # (m, m)

    x_real = x.masked_fill(~mask[..., None], 0.0).to(torch.complex128)
    ref = (dft(n) @ x_real @ dft(c)).real.float()  # Re(F_N X F_C)
    torch.testing.assert_close(layer(x, mask), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["random", "factorized_random"])
def test_synthesizer_random_weights_ignore_input(mode):
    torch.manual_seed(0)
    layer = SynthesizerAttention(DIM, HEADS, SEQ_LEN, 0.0, mode=mode, ignore_dot_product=True).eval()
    x1, x2 = torch.randn(2, 50, DIM), 100 * torch.randn(2, 50, DIM)
    with torch.no_grad():
        torch.testing.assert_close(layer.attention_weights(x1), layer.attention_weights(x2), rtol=0, atol=0)
    dense = SynthesizerAttention(DIM, HEADS, SEQ_LEN, 0.0, mode="dense", ignore_dot_product=True).eval()
    with torch.no_grad():
        assert not torch.allclose(dense.attention_weights(x1), dense.attention_weights(x2))


def test_synthesizer_fixed_random_table_is_not_a_parameter():
    layer = SynthesizerAttention(DIM, HEADS, SEQ_LEN, 0.0, mode="random", trainable_random=False)
    names = {n for n, _ in layer.named_parameters()}
    assert "random_logits" not in names and "random_logits" in dict(layer.named_buffers())


@pytest.mark.parametrize("key", ["synthesizer_dense", "synthesizer_factorized", "synthesizer_random", "performer_relu"])
def test_other_modes_ignore_padding_and_match_truncation(key):
    layer = build(key)
    torch.manual_seed(1)
    x = torch.randn(2, SEQ_LEN, DIM)
    mask = torch.zeros(2, SEQ_LEN, dtype=torch.bool)
    mask[:, :45] = True
    scrambled = torch.where(mask[..., None], x, 1e3 * torch.randn_like(x))
    with torch.no_grad():
        padded, scr, truncated = layer(x, mask), layer(scrambled, mask), layer(x[:, :45], None)
    torch.testing.assert_close(padded[:, :45], scr[:, :45], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(padded[:, :45], truncated, rtol=1e-4, atol=1e-5)


# --------------------------------------------------------------------------- complexity

BIG_N = 8192
SUBQUADRATIC = {
    "linformer": {},
    # memory-compressed attention is O(H·N²/s); with 4 heads it is below N² only for s > 4
    "compressed": {"compression": 8},
    "nystromformer": {},
    "linear": {},
    "efficient": {},
    "rfa": {},
    "performer": {},
}


@pytest.mark.parametrize("key", list(SUBQUADRATIC))
def test_largest_intermediate_is_subquadratic(key):
    layer = build(key, dim=64, heads=4, seq_len=BIG_N, **SUBQUADRATIC[key]).train()
    x = torch.randn(1, BIG_N, 64)
    mask = torch.ones(1, BIG_N, dtype=torch.bool)
    mask[:, -100:] = False
    numel, op = largest_intermediate(lambda: layer(x, mask))
    assert numel < BIG_N * BIG_N, f"{key}: largest intermediate {numel} ({op}) >= N² = {BIG_N * BIG_N}"


def test_linformer_equals_softmax_over_the_projected_keys():
    """softmax(Q (Eᵀ K)ᵀ/√D) (Fᵀ V) with the first N rows of E and F, K and V zeroed at padding first."""
    layer = build("linformer", low_rank_features=5)
    q, k, v, mask = qkv_mask(h=HEADS, n=12, d=DIM // HEADS)
    keep = mask[:, None, :, None]
    e, f = layer.proj_k[:12], layer.proj_v[:12]  # (N, M)
    k_low = torch.einsum("bhnd,nm->bhmd", k.masked_fill(~keep, 0.0), e)
    v_low = torch.einsum("bhnd,nm->bhmd", v.masked_fill(~keep, 0.0), f)
    want = softmax_attention(q, k_low, v_low, torch.ones(2, 5, dtype=torch.bool), (DIM // HEADS) ** -0.5)
    assert_close_at_real(layer.attend(q, k, v, mask), want, mask, atol=1e-5, rtol=1e-5)


def test_linformer_cpu_training_product_equals_sdpa():
    """Training on CPU skips SDPA's math path (its masked-row guard costs 5 % and has nothing to guard): the plain
    softmax product gives SDPA's numbers, forward and backward, padded or not; dropout still applies in training."""
    layer = build("linformer", low_rank_features=5)
    q, k, v, mask = qkv_mask(h=HEADS, n=12, d=DIM // HEADS)
    for m in (mask, torch.ones_like(mask), None):
        leaves = [t.clone().requires_grad_(True) for t in (q, k, v)]
        got = layer.attend(*leaves, m)  # grad enabled: the product
        got.square().sum().backward()
        with torch.no_grad():
            want = layer.attend(q, k, v, m)  # no grad: SDPA
        torch.testing.assert_close(got.detach(), want, atol=1e-6, rtol=1e-5)
        ref = [t.clone().requires_grad_(True) for t in (q, k, v)]
        e, f = layer.proj_k[:12].detach(), layer.proj_v[:12].detach()
        keep = (torch.ones_like(mask) if m is None else m)[:, None, :, None]
        k_low = torch.einsum("bhnd,nm->bhmd", ref[1].masked_fill(~keep, 0.0), e)
        v_low = torch.einsum("bhnd,nm->bhmd", ref[2].masked_fill(~keep, 0.0), f)
        F.scaled_dot_product_attention(ref[0], k_low, v_low).square().sum().backward()
        for a, b in zip(leaves, ref, strict=True):
            torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4)
    layer.train()
    layer.attn_dropout = 0.5
    assert not torch.allclose(layer.attend(q, k, v, mask), layer.attend(q, k, v, mask)), "dropout in training"


def test_compressed_equals_softmax_over_the_compressed_keys():
    """softmax(Q conv(K)ᵀ/√D) conv(V) over the windows holding a real token, K and V zeroed at padding first."""
    layer = build("compressed", compression=3)
    q, k, v, mask = qkv_mask(h=HEADS, n=13, d=DIM // HEADS)  # 13: the last window is cut short
    got = layer.attend(q, k, v, mask)
    keep = mask[:, None, :, None]
    k_c = layer._compress(layer.conv_k, k.masked_fill(~keep, 0.0), 2)  # (B, H, 5, D)
    v_c = layer._compress(layer.conv_v, v.masked_fill(~keep, 0.0), 2)
    windows = F.pad(mask, (0, 2)).view(2, 5, 3).any(-1)  # (B, 5)
    want = softmax_attention(q, k_c, v_c, windows, (DIM // HEADS) ** -0.5)
    assert_close_at_real(got, want, mask, atol=1e-5, rtol=1e-5)
    layer.train()
    layer.attn_dropout = 0.5
    assert not torch.allclose(layer.attend(q, k, v, mask), layer.attend(q, k, v, mask)), "dropout in training"


def test_compressed_default_memory_is_n_squared_over_stride():
    n, heads, s = 3000, 4, 3
    layer = build("compressed", dim=64, heads=heads, seq_len=n).train()
    numel, op = largest_intermediate(lambda: layer(torch.randn(1, n, 64), None))
    assert numel <= heads * n * math.ceil(n / s), f"{numel} ({op})"


# --------------------------------------------------------------------------- numerics


@pytest.mark.parametrize("key", list(VARIANTS))
def test_finite_in_bf16_autocast_and_for_large_inputs(key):
    layer = build(key)
    torch.manual_seed(2)
    x = torch.randn(2, SEQ_LEN, DIM)
    mask = torch.ones(2, SEQ_LEN, dtype=torch.bool)
    mask[1, 50:] = False
    with torch.no_grad():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y_bf16 = layer(x, mask)
        y_big = layer(10 * x, mask)
        y_big_bf16 = None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y_big_bf16 = layer(10 * x, mask)
    for y in (y_bf16, y_big, y_big_bf16):
        assert y.shape == x.shape
        assert torch.isfinite(y.float()).all(), key


# --------------------------------------------------------------------------- feature redraw


@pytest.mark.parametrize("cls, buffer", [(PerformerAttention, "projection"), (RFAAttention, "omega")])
def test_random_features_redraw_only_in_training(cls, buffer):
    torch.manual_seed(0)
    layer = cls(DIM, HEADS, SEQ_LEN, 0.0, redraw_interval=5).train()
    before = getattr(layer, buffer).clone()
    for step in range(1, 5):
        layer.on_train_step(step)
    torch.testing.assert_close(getattr(layer, buffer), before, rtol=0, atol=0)
    layer.on_train_step(5)
    after = getattr(layer, buffer).clone()
    assert not torch.equal(after, before), "features must be redrawn after redraw_interval steps"
    assert buffer in layer.state_dict(), "features are saved with checkpoints"

    layer.eval()
    for step in range(6, 30):
        layer.on_train_step(step)
    torch.testing.assert_close(getattr(layer, buffer), after, rtol=0, atol=0)
    x = torch.randn(1, 20, DIM)
    with torch.no_grad():
        torch.testing.assert_close(layer(x), layer(x), rtol=0, atol=0)

    never = cls(DIM, HEADS, SEQ_LEN, 0.0, redraw_interval=0).train()
    fixed = getattr(never, buffer).clone()
    for step in range(1, 20):
        never.on_train_step(step)
    assert torch.equal(getattr(never, buffer), fixed)
