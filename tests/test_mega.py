"""``attention=mega`` and ``model=mega``: the EMA against its recurrence in float64, Mega-chunk against a chunk-by-chunk
reference, the layer against mega-pytorch's (PyPI ``mega-pytorch``) with the same parameters where their semantics
agree, Mega's own block, and ``profile=mega`` against the official LRA recipes."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from lra_bench.attention import get_attention_class
from lra_bench.attention.mega import laplace
from lra_bench.config.attention import build_attention_factory
from lra_bench.config.plan import plan
from lra_bench.errors import ConfigError
from lra_bench.models.mega import MegaClassifier, MegaEncoder, ScaleNorm
from lra_bench.run.runner import run
from tests.conftest import CONFIGS, compose_run
from tests.test_ssm_block import assert_pooled_ignores_padding

HAS_MEGA_PYTORCH = importlib.util.find_spec("mega_pytorch") is not None
needs_mega_pytorch = pytest.mark.skipif(not HAS_MEGA_PYTORCH, reason="mega-pytorch is not installed "
                                                                      "(pip install mega-pytorch; the `peers` extra)")


def make(dim: int = 16, seq_len: int = 300, **knobs):
    torch.manual_seed(0)
    cfg = OmegaConf.load(CONFIGS / "attention" / "mega.yaml")
    for key, value in knobs.items():
        cfg[key] = value
    return build_attention_factory(cfg)(dim=dim, num_heads=1, seq_len=seq_len, dropout=0.0).eval()


def ema_reference(move, x: torch.Tensor) -> torch.Tensor:
    """The damped EMA as the paper writes it, step by step per channel and EMA dimension (no truncation):
    h_t = α β x_t + (1 − α δ) h_{t−1}, y_t = Σ_n η_n h_t,n; backward: the same over the reversed sequence with the
    second parameter set, from the next token on (the official shift)."""
    c = x.shape[-1]
    p, delta = torch.sigmoid(move.alpha[..., 0]), torch.sigmoid(move.delta[..., 0])  # (rows, n)
    q, eta = 1 - p * delta, move.gamma * move.scale

    def run_direction(rows: slice, u: torch.Tensor) -> torch.Tensor:
        h, out = torch.zeros(u.shape[0], c, p.shape[1], dtype=u.dtype), []
        for t in range(u.shape[1]):
            h = p[rows] * move.beta[rows, :, 0] * u[:, t, :, None] + q[rows] * h
            out.append((h * eta[rows]).sum(-1))
        return torch.stack(out, dim=1)  # (B, N, C)

    y = run_direction(slice(0, c), x)
    if move.bidirectional:
        back = run_direction(slice(c, 2 * c), x.flip(1)).flip(1)  # includes the current token ...
        y = y + back - (eta[c:] * p[c:] * move.beta[c:, :, 0]).sum(-1) * x  # ... which the shift leaves out
    return y


@pytest.mark.parametrize("length", [1, 7, 300])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["causal", "bidirectional"])
def test_ema_equals_its_recurrence_in_float64(length, bidirectional):
    layer = make(bidirectional=bidirectional).double()
    x = torch.randn(2, length, 16, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(layer.move.conv(x, None), ema_reference(layer.move, x), rtol=1e-9, atol=1e-9)


def test_truncation_cuts_the_kernel_in_both_directions():
    full, cut = make().double(), make(truncation=5).double()
    x = torch.randn(1, 40, 16, dtype=torch.float64)
    k = full.move.kernel(40, torch.float64)  # (2C, 40)
    with torch.no_grad():
        got = cut.move.conv(x, None)
        expected = torch.zeros_like(x)
        for t in range(40):
            for lag in range(5):
                if t - lag >= 0:
                    expected[:, t] += k[:16, lag] * x[:, t - lag]
                if lag >= 1 and t + lag < 40:
                    expected[:, t] += k[16:, lag] * x[:, t + lag]
    torch.testing.assert_close(got, expected, rtol=1e-9, atol=1e-9)


def test_relative_bias_and_laplace_follow_the_official_code():
    layer = make(seq_len=10)
    bias = layer.relative_bias(4)
    for i in range(4):
        for j in range(4):
            assert bias[i, j] == layer.rel_pos_bias[9 + j - i]
    s = torch.tensor([math.sqrt(0.5), 10.0, -10.0])
    torch.testing.assert_close(laplace(s), torch.tensor([0.5, 1.0, 0.0]))


def chunk_reference(layer, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Mega-chunk written out: the layer's projections, then attention chunk by chunk in a loop (the last chunk
    shorter), padded keys masked (softmax) or zeroed with τ = the chunk's real keys (laplace)."""
    n, c = x.shape[1], layer.chunk_size
    v = F.silu(layer.v_proj(x))
    mx = layer.move(x, mask)
    u, zr, hx = torch.split(layer.mx_proj(mx), [layer.dim, layer.z_dim + layer.hidden_dim, layer.dim], dim=-1)
    z, r = torch.split(F.silu(zr), [layer.z_dim, layer.hidden_dim], dim=-1)
    q, k = z * layer.gamma[0] + layer.beta[0], z * layer.gamma[1] + layer.beta[1]
    real = torch.ones(x.shape[:2], dtype=torch.bool) if mask is None else mask
    h = torch.zeros(*x.shape[:2], layer.hidden_dim, dtype=x.dtype)
    for start in range(0, n, c):
        s = slice(start, min(start + c, n))
        width = s.stop - s.start
        bias = torch.tensor([[layer.rel_pos_bias[layer.max_positions - 1 + j - i] for j in range(width)]
                             for i in range(width)], dtype=x.dtype)
        scores = q[:, s] @ k[:, s].transpose(1, 2)
        keys = real[:, s][:, None, :]  # (B, 1, width)
        if layer.attention_function == "softmax":
            w = torch.softmax((scores / math.sqrt(layer.z_dim) + bias).masked_fill(~keys, -1e30), dim=-1)
        else:
            count = keys.sum(-1, keepdim=True).clamp(min=1).to(x.dtype)
            w = laplace(scores / count + bias) * keys
        h[:, s] = w @ v[:, s]
    hh = F.silu(hx + layer.h_proj(h * r))
    return torch.sigmoid(u) * (hh - x)


@pytest.mark.parametrize("function", ["softmax", "laplace"])
@pytest.mark.parametrize("chunk", [16, 7, 300])
def test_mega_chunk_attends_within_chunks(function, chunk):
    layer = make(chunk_size=chunk, attention_function=function).double()
    x = torch.randn(3, 61, 16, dtype=torch.float64)
    mask = torch.arange(61)[None] < torch.tensor([61, 40, 17])[:, None]
    with torch.no_grad():
        for m in (None, mask):
            got, expected = layer(x, m), chunk_reference(layer, x, m)
            real = torch.ones(3, 61, dtype=torch.bool) if m is None else m
            torch.testing.assert_close(got[real], expected[real], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("knobs", [{"chunk_size": 16}, {"chunk_size": 16, "attention_function": "laplace"},
                                   {"attention_function": "laplace"}, {"truncation": 8}, {"bidirectional": False}],
                         ids=["chunk", "chunk-laplace", "laplace", "truncated", "causal-ema"])
def test_every_variant_keeps_the_padding_contract(knobs):
    """What tests/test_attention_contract.py checks on the default config, for the other settings: padded content
    never reaches real positions, and with right padding the outputs equal the truncated input's."""
    layer = make(seq_len=80, **knobs)
    x = torch.randn(2, 80, 16)
    mask = torch.zeros(2, 80, dtype=torch.bool)
    mask[0, :45], mask[1, :70] = True, True
    scrambled = torch.where(mask[..., None], x, 1e3 * torch.randn_like(x))
    with torch.no_grad():
        padded = layer(x, mask)
        torch.testing.assert_close(padded[mask], layer(scrambled, mask)[mask], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(padded[:1, :45], layer(x[:1, :45], None), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize(("knob", "bad"), [("attention_function", "relu2"), ("chunk_size", 301), ("chunk_size", 0),
                                           ("z_dim", 0), ("ndim", 0), ("truncation", 0), ("attn_dropout", 1.0)])
def test_bad_knob_is_a_config_error_naming_it(knob, bad):
    with pytest.raises(ConfigError, match=knob):
        get_attention_class("mega")(dim=8, num_heads=1, seq_len=300, dropout=0.0, **{knob: bad})


# ------------------------------------------------------------------------------------------ against mega-pytorch


def copy_ema_from_mega_pytorch(move, theirs) -> torch.Tensor | None:
    """mega-pytorch's MultiHeadedEMA into ours; returns its backward lag-0 weight per channel (None if causal).

    Their kernel for channel d: Σ_h R[h,d] E[h,d] a_h ((1 − a_h) d_h)^l, one rate a_h and damping d_h per head shared
    by every channel (ours: per channel and dimension, q = 1 − α δ). The same q is ours with α = 1 − q/2 and
    δ = (1 − q)/α, both in (0, 1); β carries R E a / α, η = 1."""
    heads, dim = theirs.alphas.shape[0], move.dim
    rates = [theirs.alphas] + ([theirs.reverse_alphas] if move.bidirectional else [])
    damps = [theirs.dampen_factors] + ([theirs.reverse_dampen_factors] if move.bidirectional else [])
    alpha, delta, beta = [], [], []
    for i, (a, d) in enumerate(zip(rates, damps, strict=True)):
        a, d = torch.sigmoid(a.double()), torch.sigmoid(d.double())
        q = (1 - a) * d  # (h,)
        p = 1 - q / 2
        weight = (theirs.reduction[i * heads:(i + 1) * heads] * theirs.expansion[i * heads:(i + 1) * heads]).double()
        alpha.append(torch.logit(p).expand(dim, heads))
        delta.append(torch.logit((1 - q) / p).expand(dim, heads))
        beta.append((weight * (a / p)[:, None]).T)  # (dim, h)
    with torch.no_grad():
        move.alpha.copy_(torch.cat(alpha)[..., None])
        move.delta.copy_(torch.cat(delta)[..., None])
        move.beta.copy_(torch.cat(beta)[..., None])
        move.gamma.fill_(1 / move.scale)
    if not move.bidirectional:
        return None
    back = (theirs.reduction[heads:] * theirs.expansion[heads:]).double()  # (h, dim)
    return (back * torch.sigmoid(theirs.reverse_alphas.double())[:, None]).sum(0).float()  # (dim,)


@needs_mega_pytorch
@pytest.mark.parametrize("n", [1, 64, 1024])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["causal", "bidirectional"])
def test_ema_equals_mega_pytorch(n, bidirectional):
    """mega-pytorch's MultiHeadedEMA has no ω skip and no SiLU (ours: X' = SiLU(EMA(X) + ω ⊙ X), the official code's),
    so the EMA alone is compared; bidirectional, its backward EMA also counts the current token (the official
    ``shift`` leaves it to the forward one): that lag-0 term is taken out of theirs, the rest must agree."""
    from mega_pytorch.mega_pytorch import MultiHeadedEMA

    torch.manual_seed(1)
    theirs = MultiHeadedEMA(dim=32, heads=8, bidirectional=bidirectional)
    ours = make(dim=32, seq_len=1024, ndim=8, bidirectional=bidirectional)
    lag0 = copy_ema_from_mega_pytorch(ours.move, theirs)
    x = torch.randn(2, n, 32)
    with torch.no_grad():
        expected = theirs(x) - (0 if lag0 is None else lag0 * x)
        torch.testing.assert_close(ours.move.conv(x, None), expected, rtol=1e-4, atol=2e-5 * expected.abs().max())


@needs_mega_pytorch
@pytest.mark.parametrize("n", [1, 64, 1024])
@pytest.mark.parametrize("function", ["softmax", "laplace"])
def test_layer_equals_mega_pytorch(n, function):
    """The whole layer (non-causal, both directions) against mega_pytorch.MegaLayer, where the semantics differ only in
    ways that map exactly: their EMA heads share rates across channels (mapped as above); their relative bias is T5's
    bucketed one (ours, the official simple bias, holds any function of j − i: their values are copied in); their
    softmax scales by dim^-½ where ours (the official) uses z_dim^-½ (folded into κ_q, μ_q); their Ĥ has separate
    W_h, U_h, b_h (ours: slices of mx_proj and h_proj); their layer returns Y, ours Y − X. Their EMA output lacks the
    ω skip, the SiLU and the shift of the official code: it is wrapped to the paper's form for this comparison."""
    from mega_pytorch.mega_pytorch import MegaLayer

    torch.manual_seed(2)
    dim, heads, z_dim, hidden = 32, 8, 16, 48
    theirs = MegaLayer(dim=dim, ema_heads=heads, attn_dim_qk=z_dim, attn_dim_value=hidden,
                       laplacian_attn_fn=function == "laplace", causal=False).eval()
    ours = make(dim=dim, seq_len=1024, ndim=heads, z_dim=z_dim, hidden_dim=hidden, attention_function=function)
    lag0 = copy_ema_from_mega_pytorch(ours.move, theirs.multi_headed_ema)
    attn = theirs.single_headed_attn
    with torch.no_grad():
        ours.v_proj.load_state_dict(attn.to_v[0].state_dict())
        ours.mx_proj.weight.copy_(torch.cat([theirs.to_update_gate[0].weight, attn.to_qk[0].weight,
                                             theirs.to_reset_gate[0].weight, theirs.Wh.T]))
        ours.mx_proj.bias.copy_(torch.cat([theirs.to_update_gate[0].bias, attn.to_qk[0].bias,
                                           theirs.to_reset_gate[0].bias, theirs.bh]))
        ours.h_proj.weight.copy_(theirs.Uh.T)
        ours.h_proj.bias.zero_()
        scale = math.sqrt(z_dim / dim) if function == "softmax" else 1.0
        ours.gamma.copy_(attn.offsetscale.gamma * torch.tensor([[scale], [1.0]]))
        ours.beta.copy_(attn.offsetscale.beta * torch.tensor([[scale], [1.0]]))
        table = attn.rel_pos_bias(torch.zeros(n, n))  # (n, n), a function of j − i
        ours.rel_pos_bias.zero_()
        ours.rel_pos_bias[1024 - n : 1024 + n - 1] = torch.cat([table[1:, 0].flip(0), table[0]])
    their_ema, omega = theirs.multi_headed_ema, ours.move.omega.detach()

    class PaperEMA(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.silu(their_ema(x) - lag0 * x + omega * x)

    theirs.multi_headed_ema = PaperEMA()
    x = torch.randn(2, n, dim)
    with torch.no_grad():
        expected = theirs(x)
        torch.testing.assert_close(ours(x) + x, expected, rtol=1e-4, atol=2e-5 * expected.abs().max())


# ------------------------------------------------------------------------------------------------- model=mega

# (task, dim, depth, z, hidden, function, norm, prenorm, dropout, truncation, batch, lr, wd, steps, warmup):
# facebookresearch/mega examples/mega/README.lra.md and the mega_lra_* architectures of fairseq/models/lra/model.py
MEGA_RECIPES = [
    ("listops", 80, 6, 64, 160, "softmax", "layer", False, 0.1, 1024, 64, 0.001, 0.01, 90000, 3000),
    ("text", 128, 4, 64, 256, "softmax", "scale", False, 0.1, 1024, 50, 0.004, 0.01, 25000, 10000),
    ("retrieval", 128, 6, 64, 256, "softmax", "scale", False, 0.1, 1024, 64, 0.003, 0.04, 91960, 10000),
    ("image", 160, 8, 96, 320, "laplace", "batch", True, 0.0, 1024, 50, 0.01, 0.02, 180000, 9000),
    ("pathfinder", 128, 6, 64, 256, "laplace", "batch", True, 0.0, 1024, 128, 0.01, 0.01, 250000, 50000),
    ("pathx", 64, 4, 32, 128, "laplace", "batch", True, 0.0, 4096, 128, 0.01, 0.01, 125000, 25000),
]


@pytest.mark.parametrize("recipe", MEGA_RECIPES, ids=[r[0] for r in MEGA_RECIPES])
def test_profile_mega_transcribes_the_official_recipes(recipe, tmp_path):
    task, dim, depth, z_dim, hidden, function, norm, prenorm, dropout, truncation, batch, lr, wd, steps, warmup = recipe
    cfg = compose_run(["attention=mega", "model=mega", "profile=mega", f"task={task}", "task.source=synthetic"],
                      tmp_path)
    p = plan(cfg)
    m, a = cfg.model, cfg.attention
    assert (m.dim, m.depth, m.ffn_dim, m.classifier_dim, m.norm, m.prenorm, m.dropout, m.hidden_dropout) == (
        dim, depth, hidden, hidden, norm, prenorm, dropout, 0.0)
    assert (a.z_dim, a.hidden_dim, a.ndim, a.attention_function, a.truncation, a.chunk_size, a.bidirectional) == (
        z_dim, hidden, 16, function, truncation, None, True)
    t = p.trainer
    assert (t.batch_size, t.lr, t.weight_decay, t.max_steps, t.warmup_steps, t.schedule) == (
        batch, lr, wd, steps, warmup, "linear_decay")
    assert (t.beta1, t.beta2, t.eps, t.grad_clip) == (0.9, 0.98, 1e-8, 1.0)
    assert isinstance(p.model, MegaClassifier) and len(p.model.encoder.blocks) == depth
    assert p.model.encoder.final_norm is None if not prenorm else p.model.encoder.final_norm is not None


def encoder(norm: str, prenorm: bool, **knobs) -> MegaEncoder:
    torch.manual_seed(0)
    cfg = OmegaConf.load(CONFIGS / "attention" / "mega.yaml")
    for key, value in knobs.items():
        cfg[key] = value
    return MegaEncoder(build_attention_factory(cfg), vocab_size=20, max_len=40, pad_id=0, dim=16, depth=2, ffn_dim=32,
                       dropout=0.1, hidden_dropout=0.1, norm=norm, prenorm=prenorm)


@pytest.mark.parametrize(("norm", "prenorm", "knobs"), [
    ("layer", False, {}), ("scale", False, {"chunk_size": 8}), ("batch", True, {"attention_function": "laplace"}),
])
def test_padding_content_never_reaches_the_pooled_output(norm, prenorm, knobs):
    assert_pooled_ignores_padding(encoder(norm, prenorm, **knobs))


def test_prenorm_and_postnorm_place_the_norms_and_the_gated_residual():
    x = torch.randn(2, 40, 16)
    for prenorm in (True, False):
        block = encoder("layer", prenorm).blocks[0].eval()
        with torch.no_grad():
            y = block(x, None)
            if prenorm:  # the gate mixes Ĥ(norm x) with the un-normalised x
                h = x + block.mixer(block.norm1(x), None, residual=x)
                expected = h + block.ffn(block.norm2(h))
            else:
                h = block.norm1(x + block.mixer(x, None))
                expected = block.norm2(h + block.ffn(h))
        torch.testing.assert_close(y, expected)


def test_the_gate_mixes_h_with_the_residual():
    """Y = φ ⊙ Ĥ + (1 − φ) ⊙ R: residual + layer(x, residual) is affine in R with slope 1 − φ, in every channel."""
    layer = make(dim=16, seq_len=40)
    x, r1, r2 = torch.randn(3, 2, 40, 16)
    with torch.no_grad():
        u = layer.mx_proj(layer.move(x, None))[..., :16]
        y1, y2 = r1 + layer(x, None, residual=r1), r2 + layer(x, None, residual=r2)
    torch.testing.assert_close(y1 - y2, (1 - torch.sigmoid(u)) * (r1 - r2), rtol=1e-5, atol=1e-6)


def test_scale_norm_is_the_official_one():
    norm = ScaleNorm()
    with torch.no_grad():
        norm.scalar.fill_(2.0)
    x = torch.randn(3, 5, 8)
    torch.testing.assert_close(norm(x), 2.0 * x / torch.sqrt(x.square().mean(-1, keepdim=True) + 1e-5))


def test_model_mega_needs_attention_mega_and_its_own_profile(tmp_path):
    with pytest.raises(ConfigError, match="needs attention=mega"):
        plan(compose_run(["attention=softmax", "model=mega", "profile=smoke", "~model.num_heads", "~model.mlp_dim",
                          "task=listops"], tmp_path))
    with pytest.raises(ConfigError, match="num_heads"):
        plan(compose_run(["attention=mega", "model=mega", "profile=smoke", "task=listops"], tmp_path))
    with pytest.raises(ConfigError, match="model=mega"):
        plan(compose_run(["attention=mega", "profile=mega", "task=listops"], tmp_path))


def test_model_mega_trains_on_profile_smoke(smoke_cfg):
    record = run(smoke_cfg("attention=mega", "attention.chunk_size=16", "model=mega", "~model.num_heads",
                           "~model.mlp_dim", "model.ffn_dim=32", "model.classifier_dim=32", "trainer.max_steps=6",
                           "trainer.eval_every=3"))
    assert record["status"] == "ok", record["message"]
    assert record["config"]["model"]["block"] == "mega"
