"""The state-space mixers (S4D, LRU) against their explicit recurrences in float64, and the per-parameter optimizer
settings they declare (the trainer's AdamW groups, read back from ``optimizer.param_groups``, and the run record)."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

from lra_bench.attention import get_attention_class
from lra_bench.bench.cell import model_step
from lra_bench.config.attention import build_attention_factory
from lra_bench.errors import ConfigError
from lra_bench.run.runner import run
from lra_bench.train import loop
from lra_bench.train.param_groups import describe
from lra_bench.train.schedules import peak_factor
from tests.conftest import CONFIGS, ROOT, compose_run
from tests.test_training import settings, tiny_model

DIM = 6
#: the s4 repository's own initial A and B (commit 62a14bb, dplr.dplr(init, N, H=1) run once; see its "source")
S4_INIT = json.loads((ROOT / "tests" / "fixtures" / "s4_init_62a14bb.json").read_text())["values"]


def make(name: str, bidirectional: bool, seed: int = 0, init: str = "lin"):
    torch.manual_seed(seed)
    cfg = OmegaConf.load(CONFIGS / "attention" / f"{name}.yaml")
    cfg.bidirectional = bidirectional
    if name == "s4d":
        cfg.d_state, cfg.init = 8, init
    else:
        cfg.d_state, cfg.r_min, cfg.max_phase = 5, 0.5, 3.0  # a wide ring: fast and slow, rotating modes
    return build_attention_factory(cfg)(dim=DIM, num_heads=1, seq_len=300, dropout=0.0).double().eval()


def s4d_loop(layer, u: torch.Tensor, channel: int) -> torch.Tensor:
    """The discretised system step by step: x_l = Ā x_{l-1} + B̄ u_l, y_l = 2 Re(C x_l); u (B, L, C), no D."""
    a_bar, b_bar, c = layer.kernel.discrete()  # (C, n), (C, n), (k, C, n)
    x = torch.zeros(u.shape[0], *a_bar.shape, dtype=a_bar.dtype)  # (B, C, n)
    out = []
    for t in range(u.shape[1]):
        x = a_bar * x + b_bar * u[:, t, :, None]
        out.append(2 * (c[channel] * x).sum(-1).real)  # (B, C)
    return torch.stack(out, dim=1)


def lru_loop(layer, u: torch.Tensor, direction: int) -> torch.Tensor:
    """The LRU recurrence step by step: x_t = λ x_{t-1} + γ ⊙ (B u_t), y_t = Re(C x_t); u (B, L, C), no D."""
    lam = torch.exp(torch.complex(-torch.exp(layer.nu_log[direction]), torch.exp(layer.theta_log[direction])))
    gamma = torch.exp(layer.gamma_log[direction])  # (S,)
    b = torch.complex(layer.B_re[direction], layer.B_im[direction])  # (S, C)
    c = torch.complex(layer.C_re[direction], layer.C_im[direction])  # (C, S)
    x = torch.zeros(u.shape[0], lam.shape[0], dtype=lam.dtype)  # (B, S)
    out = []
    for t in range(u.shape[1]):
        x = lam * x + gamma * (u[:, t].to(b.dtype) @ b.T)
        out.append((x @ c.T).real)  # (B, C)
    return torch.stack(out, dim=1)


LOOPS = {"s4d": s4d_loop, "lru": lru_loop}
VARIANTS = [("s4d", "lin"), ("s4d", "legs"), ("lru", "lin")]  # (mixer, S4D init): LegS adds a trained complex B
VARIANT_IDS = ["s4d", "s4d-legs", "lru"]


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm())


@pytest.mark.parametrize(("name", "init"), VARIANTS, ids=VARIANT_IDS)
@pytest.mark.parametrize("length", [1, 7, 300])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["causal", "bidirectional"])
def test_ssm_matches_its_recurrence_in_float64(name, init, length, bidirectional):
    """The FFT convolution equals the explicit recurrence; bidirectional = forward part + backward part (the same
    recurrence run over the reversed sequence with the second direction's parameters, flipped back) + D once."""
    layer = make(name, bidirectional, init=init)
    u = torch.randn(2, length, DIM, dtype=torch.float64)
    with torch.no_grad():
        expected = LOOPS[name](layer, u, 0) + u * layer.D
        if bidirectional:
            expected = expected + LOOPS[name](layer, u.flip(1), 1).flip(1)
        got = layer.ssm(u)
    assert got.dtype == torch.float64 and got.shape == u.shape
    assert rel_err(got, expected) <= 1e-6


@pytest.mark.parametrize(("name", "init"), VARIANTS, ids=VARIANT_IDS)
def test_bidirectional_is_the_sum_of_its_two_causal_parts(name, init):
    """The bidirectional layer's output = a causal layer with the first direction's parameters + one with the second
    direction's parameters on the reversed sequence (flipped back), D counted once."""
    both = make(name, bidirectional=True, init=init)
    forward, backward = make(name, bidirectional=False, init=init), make(name, bidirectional=False, init=init)
    with torch.no_grad():
        for part, index in ((forward, 0), (backward, 1)):
            for pname, p in part.named_parameters():
                p.copy_(both.get_parameter(pname)[index : index + 1] if p.shape != both.get_parameter(pname).shape
                        else both.get_parameter(pname))
        u = torch.randn(2, 40, DIM, dtype=torch.float64)
        expected = forward.ssm(u) + backward.ssm(u.flip(1)).flip(1) - u * both.D
        assert rel_err(both.ssm(u), expected) <= 1e-10


@pytest.mark.parametrize("init", ["lin", "legs"])
def test_s4d_kernel_is_the_impulse_response(init):
    layer = make("s4d", bidirectional=True, init=init)
    with torch.no_grad():
        k = layer.kernel(50)  # (2, C, 50)
        impulse = torch.zeros(1, 50, DIM, dtype=torch.float64)
        impulse[:, 0] = 1.0
        response = s4d_loop(layer, impulse, 1)[0].T  # (C, 50)
    assert k.shape == (2, DIM, 50)
    assert rel_err(k[1], response) <= 1e-6


def test_s4d_initialisations_follow_the_paper():
    lin = get_attention_class("s4d")(dim=4, num_heads=1, seq_len=16, dropout=0.0, d_state=8, init="lin")
    inv = get_attention_class("s4d")(dim=4, num_heads=1, seq_len=16, dropout=0.0, d_state=8, init="inv")
    torch.testing.assert_close(lin.kernel.log_A_real.exp(), torch.full((4, 4), 0.5))
    torch.testing.assert_close(lin.kernel.A_imag[0], torch.pi * torch.arange(4.0))
    torch.testing.assert_close(inv.kernel.A_imag[0], 8 / torch.pi * (8 / (2 * torch.arange(4.0) + 1) - 1))
    dt = lin.kernel.log_dt.exp()
    assert ((dt >= 0.001) & (dt <= 0.1)).all()


@pytest.mark.parametrize("d_state", [4, 8, 64])
@pytest.mark.parametrize("init", ["lin", "inv", "legs"])
def test_s4d_initialisations_reproduce_the_s4_repository(init, d_state):
    """A and B at initialisation equal the s4 repository's (tests/fixtures/s4_init_62a14bb.json, its own numbers).
    s4 stores the conjugate system (Im A <= 0): its kernel 2·Re(Σ C·B̄·Ā^l) is the same with A, B, C conjugated, so
    ours is A = conj(A_s4), B = conj(B_s4). LegS's B is fixed by an eigendecomposition up to a sign per mode (the
    first component of each eigenvector is real in both; s4's signs are its eigensolver's): B_n with C_n random and
    symmetric, trained by AdamW (sign-equivariant per coordinate), is the same model as −B_n. S4D-LegS at N = 64 spans
    Im A from 0.26 to 1,303, and |Im B| is clipped at 2."""
    s4 = S4_INIT[f"{init}-{d_state}"]
    kernel = get_attention_class("s4d")(dim=3, num_heads=1, seq_len=16, dropout=0.0, d_state=d_state,
                                        init=init).kernel
    a_real, a_imag = torch.tensor(s4["A_real"]), torch.tensor(s4["A_imag"])  # (n,), s4's convention
    b = torch.complex(torch.tensor(s4["B_real"]), torch.tensor(s4["B_imag"]))  # (n,)
    for channel in range(3):  # one (A, B) per channel by default, all initialised alike
        torch.testing.assert_close(-kernel.log_A_real[channel].exp(), a_real)
        torch.testing.assert_close(kernel.A_imag[channel], -a_imag, rtol=1e-6, atol=1e-5)
    if init != "legs":
        assert kernel.B is None and bool((b == 1).all()), "S4D-Lin/Inv: B = 1, not a parameter"
        return
    ours = torch.view_as_complex(kernel.B.detach())  # (S, n)
    assert kernel.B.requires_grad and ours.shape == (3, d_state // 2)
    sign = torch.sign((ours[0] * b).real)  # (n,): ours = sign · conj(s4's)
    assert bool((sign != 0).all())
    torch.testing.assert_close(ours, (sign * b.conj()).expand(3, -1), rtol=1e-5, atol=2e-6)
    if d_state == 64:
        assert (a_imag.abs().min(), a_imag.abs().max()) == pytest.approx((0.2639, 1303.27), rel=1e-3)
        assert ours.imag.abs().max() == 2.0


def test_s4d_n_ssm_shares_a_and_b_across_channels_in_turn():
    """n_ssm sets of (A, B): channel h uses set h mod n_ssm (s4's n_ssm); dt and C stay per channel, and the shared
    parameters get the gradient of every channel that uses them."""
    torch.manual_seed(0)
    layer = get_attention_class("s4d")(dim=6, num_heads=1, seq_len=16, dropout=0.0, d_state=8, init="legs",
                                       n_ssm=2)
    kernel = layer.kernel
    assert kernel.log_A_real.shape == kernel.A_imag.shape == (2, 4) and kernel.B.shape == (2, 4, 2)
    assert kernel.log_dt.shape == (6,) and kernel.C.shape == (2, 6, 4, 2)
    with torch.no_grad():
        kernel.A_imag[1] += 1.0  # the two sets differ
        a_bar, b_bar, _ = kernel.discrete()  # (C, n) each
        dt = kernel.log_dt.exp()
        a = -kernel.log_A_real.exp() + 1j * kernel.A_imag  # (2, n)
        for h in range(6):
            torch.testing.assert_close(a_bar[h], torch.exp(dt[h] * a[h % 2]))
    layer.ssm(torch.randn(2, 16, 6)).sum().backward()
    assert kernel.A_imag.grad.shape == (2, 4) and bool((kernel.A_imag.grad != 0).all())


def test_s4d_slow_channels_barely_convolve_at_short_lengths():
    """docs/zoo_part2.md "Step size": at 128 tokens s4's range leaves the channels with dt < 0.01 nearly a skip
    (kernel norm well under the D skip's ~1), and the range scaled to (0.01, 1.0) leaves almost none."""
    torch.manual_seed(0)
    s4d = get_attention_class("s4d")
    default = s4d(dim=256, num_heads=1, seq_len=128, dropout=0.0)
    scaled = s4d(dim=256, num_heads=1, seq_len=128, dropout=0.0, dt_min=0.01, dt_max=1.0)
    with torch.no_grad():
        slow = default.kernel.log_dt.exp() < 0.01
        norm = default.kernel(128)[0].norm(dim=-1)  # (C,)
        assert 0.3 * 256 < slow.sum() < 0.7 * 256
        assert norm[slow].median() < 0.5 < 0.9 < norm[~slow].median()
        weak = (norm < 0.5).float().mean(), (scaled.kernel(128)[0].norm(dim=-1) < 0.5).float().mean()
        assert weak[0] > 0.3 and weak[1] < 0.05  # share of near-skip channels: ~40 % against ~1 %


def test_lru_initialisation_lies_on_its_ring_and_is_normalised():
    layer = get_attention_class("lru")(dim=4, num_heads=1, seq_len=16, dropout=0.0, d_state=512, r_min=0.4,
                                       r_max=0.8, max_phase=1.0)
    modulus = torch.exp(-torch.exp(layer.nu_log))
    assert (modulus >= 0.4 - 1e-6).all() and (modulus <= 0.8 + 1e-6).all()
    assert (torch.exp(layer.theta_log) <= 1.0).all()
    torch.testing.assert_close(torch.exp(layer.gamma_log), torch.sqrt(1 - modulus**2))


@pytest.mark.parametrize(("name", "knob", "bad"), [
    ("s4d", "d_state", 3), ("s4d", "init", "legt"), ("s4d", "dt_min", 0.0), ("s4d", "ssm_lr", 0.0),
    ("s4d", "n_ssm", 3), ("s4d", "n_ssm", 0),
    ("lru", "r_max", 1.5), ("lru", "d_state", 0), ("lru", "max_phase", 0.0),
])
def test_bad_knob_is_a_config_error_naming_it(name, knob, bad):
    with pytest.raises(ConfigError, match=knob):
        get_attention_class(name)(dim=8, num_heads=1, seq_len=16, dropout=0.0, **{knob: bad})


@pytest.mark.parametrize(("name", "declared"), [
    ("s4d", {"kernel.log_dt", "kernel.log_A_real", "kernel.A_imag"}), ("lru", {"nu_log", "theta_log", "gamma_log"}),
])
@pytest.mark.parametrize("lr", [0.01, 0.0005])
def test_optimizer_groups_hold_the_declared_settings(name, declared, lr):
    model = tiny_model(name)
    optimizer, _ = loop.make_optimizer(model, settings(lr=lr, weight_decay=0.05))
    groups = optimizer.param_groups
    assert len(groups) == 2
    default, ssm = groups
    assert {n.split(".", 4)[-1] for n in ssm["param_names"]} == declared  # encoder.blocks.0.attn.<name>
    assert ssm["lr"] == min(0.001, lr) and ssm["weight_decay"] == 0.0
    assert default["lr"] == lr and default["weight_decay"] == 0.05
    by_name = dict(model.named_parameters())
    assert all(by_name[n] is p for g in groups for n, p in zip(g["param_names"], g["params"], strict=True))
    assert sum(len(g["params"]) for g in groups) == len(by_name)


def test_the_cap_applies_to_the_peak_rate_of_the_schedule():
    """Under rsqrt (peak = lr/sqrt(warmup)) the declared cap bounds the rate actually reached, not the constant."""
    s = settings(lr=0.05, schedule="rsqrt", warmup_steps=100)
    optimizer, scheduler = loop.make_optimizer(tiny_model("lru"), s)
    for _ in range(100):  # to the end of the warm-up: the peak
        optimizer.step()
        scheduler.step()
    default, ssm = (g["lr"] for g in optimizer.param_groups)
    assert default == pytest.approx(0.005) and ssm == pytest.approx(0.001)
    described = describe(optimizer, peak_factor("rsqrt", 100))
    assert [g["peak_lr"] for g in described] == pytest.approx([0.005, 0.001])


def test_s4d_dt_lr_null_trains_log_dt_at_the_trainer_rate_without_decay():
    """The s4 ListOps/Text/Retrieval configs: ``lr: {dt: null, A: 0.001}``."""
    cfg = OmegaConf.load(CONFIGS / "attention" / "s4d.yaml")
    cfg.dt_lr = None
    factory = build_attention_factory(cfg)
    layer = factory(dim=8, num_heads=1, seq_len=16, dropout=0.0)
    optimizer, _ = loop.make_optimizer(layer, settings(lr=0.01, weight_decay=0.05))
    by_names = {tuple(g["param_names"]): (g["lr"], g["weight_decay"]) for g in optimizer.param_groups}
    assert by_names[("kernel.log_dt",)] == (0.01, 0.0)
    assert by_names[("kernel.log_A_real", "kernel.A_imag")] == (0.001, 0.0)


def test_s4d_legs_trains_b_with_a_without_decay():
    """S4D-LegS's B is trained, at the SSM rate without weight decay (the s4 configs' ``lr: {..., B: 0.001}``,
    ``wd: 0.0``); Lin and Inv have no B parameter at all."""
    cfg = OmegaConf.load(CONFIGS / "attention" / "s4d.yaml")
    cfg.init = "legs"
    layer = build_attention_factory(cfg)(dim=8, num_heads=1, seq_len=16, dropout=0.0)
    optimizer, _ = loop.make_optimizer(layer, settings(lr=0.01, weight_decay=0.05))
    by_names = {tuple(g["param_names"]): (g["lr"], g["weight_decay"]) for g in optimizer.param_groups}
    assert by_names[("kernel.log_dt", "kernel.log_A_real", "kernel.A_imag", "kernel.B")] == (0.001, 0.0)
    assert "kernel.B" not in dict(make("s4d", bidirectional=True).named_parameters())


def test_a_model_without_declarations_keeps_one_group():
    optimizer, _ = loop.make_optimizer(tiny_model("softmax"), settings(lr=0.01, weight_decay=0.1))
    assert len(optimizer.param_groups) == 1
    assert optimizer.param_groups[0]["lr"] == 0.01 and optimizer.param_groups[0]["weight_decay"] == 0.1


@pytest.mark.parametrize("name", ["s4d", "lru"])
def test_the_record_lists_the_groups(smoke_cfg, name):
    record = run(smoke_cfg(f"attention={name}", "trainer.max_steps=4", "trainer.eval_every=2", "trainer.lr=0.01"))
    assert record["status"] == "ok", record["message"]
    groups = record["param_groups"]
    assert [(g["lr"], g["weight_decay"]) for g in groups][1] == (0.001, 0.0)
    assert groups[0]["lr"] == 0.01
    assert all(n.startswith("encoder.blocks.") for n in groups[1]["names"])


def test_the_benchmark_step_trains_with_the_same_groups(tmp_path, monkeypatch):
    """Table 2 times the trainer's step with the trainer's optimizer: the SSM group is there too."""
    built = []
    real_adamw = torch.optim.AdamW

    def spy(*args, **kwargs):
        built.append(real_adamw(*args, **kwargs))
        return built[-1]

    monkeypatch.setattr(torch.optim, "AdamW", spy)
    cfg = compose_run(["attention=lru", "profile=smoke", "task=text", "trainer.lr=0.01"], tmp_path,
                      config_name="benchmark")
    step, _ = model_step(cfg, n=32, batch=2, device=torch.device("cpu"))
    step()
    (optimizer,) = built
    assert [(g["initial_lr"], g["weight_decay"]) for g in optimizer.param_groups][1] == (0.001, 0.0)
    assert {n.rsplit(".", 1)[-1] for n in optimizer.param_groups[1]["param_names"]} == {"nu_log", "theta_log",
                                                                                        "gamma_log"}
