"""``attention=mamba``: the parallel scan and the selective SSM against explicit loops in float64, the layer against
mambapy's (a pure-PyTorch Mamba, PyPI ``mambapy``) with the same parameters, the CUDA-kernel selection (mamba-ssm,
absent here) and its argument layout, the optimizer settings of A_log and D, and the state-space block."""

from __future__ import annotations

import importlib.util
import sys
import types

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from lra_bench.attention import get_attention_class
from lra_bench.attention import mamba as mamba_module
from lra_bench.attention._scan import scan_, scan_reverse_
from lra_bench.attention.mamba import selective_scan
from lra_bench.config.attention import build_attention_factory
from lra_bench.errors import ConfigError
from lra_bench.run.runner import run
from lra_bench.train import loop
from tests.conftest import CONFIGS
from tests.test_training import settings, tiny_model

HAS_MAMBAPY = importlib.util.find_spec("mambapy") is not None
needs_mambapy = pytest.mark.skipif(not HAS_MAMBAPY, reason="mambapy is not installed (pip install mambapy; "
                                                            "the `peers` extra)")


def make(bidirectional: bool = True, dim: int = 16, seq_len: int = 1024, **knobs):
    torch.manual_seed(0)
    cfg = OmegaConf.load(CONFIGS / "attention" / "mamba.yaml")
    cfg.bidirectional = bidirectional
    for key, value in knobs.items():
        cfg[key] = value
    return build_attention_factory(cfg)(dim=dim, num_heads=1, seq_len=seq_len, dropout=0.0).eval()


def recurrence(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """h_t = a_t h_{t-1} + b_t step by step along dim 1."""
    h, out = torch.zeros_like(b[:, 0]), []
    for t in range(b.shape[1]):
        h = a[:, t] * h + b[:, t]
        out.append(h)
    return torch.stack(out, dim=1)


def selective_scan_loop(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False):  # noqa: N803
    """mamba-ssm's documented semantics of ``selective_scan_fn`` (its ``selective_scan_ref``), as a loop over time:
    u, delta (B, E, L); A (E, S); B, C (B, S, L); D (E,); z (B, E, L) or None; delta_bias (E,)."""
    if delta_bias is not None:
        delta = delta + delta_bias[:, None]
    if delta_softplus:
        delta = F.softplus(delta)
    x = u.new_zeros(u.shape[0], u.shape[1], A.shape[1])  # (B, E, S)
    ys = []
    for t in range(u.shape[2]):
        x = torch.exp(delta[:, :, t, None] * A) * x + (delta[:, :, t] * u[:, :, t])[..., None] * B[:, None, :, t]
        ys.append((x * C[:, None, :, t]).sum(-1))  # (B, E)
    y = torch.stack(ys, dim=2)  # (B, E, L)
    if D is not None:
        y = y + u * D[:, None]
    return y if z is None else y * F.silu(z)


@pytest.mark.parametrize("length", [1, 2, 3, 7, 64, 301])
def test_scans_equal_their_recurrences_in_float64(length):
    """Forward: h_t = a_t h_{t-1} + b_t; reverse: g_t = c_t g_{t+1} + b_t (the gradient's recurrence), in place."""
    torch.manual_seed(length)
    a, b = torch.rand(2, length, 3, 4, dtype=torch.float64), torch.randn(2, length, 3, 4, dtype=torch.float64)
    torch.testing.assert_close(scan_(a, b.clone()), recurrence(a, b), rtol=1e-12, atol=1e-12)
    c = a[:, 1:]  # links between neighbours: L - 1 of them
    expected = recurrence(torch.cat([c, torch.ones_like(a[:, :1])], dim=1).flip(1), b.flip(1)).flip(1)
    torch.testing.assert_close(scan_reverse_(c, b.clone()), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("length", [1, 7, 300])
def test_selective_scan_equals_the_kernels_reference_loop_in_float64(length):
    """The PyTorch path computes exactly mamba-ssm's selective_scan_fn (input-dependent Δ, B, C; softplus and bias
    on Δ; D skip), here against a loop over time."""
    torch.manual_seed(0)
    b_, e, s = 2, 5, 3
    u, delta = torch.randn(b_, e, length, dtype=torch.float64), torch.randn(b_, e, length, dtype=torch.float64)
    a = -torch.rand(e, s, dtype=torch.float64) * 4
    bm, cm = torch.randn(b_, s, length, dtype=torch.float64), torch.randn(b_, s, length, dtype=torch.float64)
    d, bias = torch.randn(e, dtype=torch.float64), torch.randn(e, dtype=torch.float64)
    got = selective_scan(u, delta, a, bm, cm, d, delta_bias=bias)
    expected = selective_scan_loop(u, delta, a, bm, cm, d, delta_bias=bias, delta_softplus=True)
    torch.testing.assert_close(got, expected, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("length", [1, 2, 33])
def test_selective_scan_gradients_equal_autograd_through_the_loop_in_float64(length):
    """The hand-written backward of the fused scan against autograd through the loop, for every input."""
    torch.manual_seed(1)
    b_, e, s = 2, 4, 3
    inputs = [torch.randn(b_, e, length), torch.randn(b_, e, length), -torch.rand(e, s) * 4 - 0.1,
              torch.randn(b_, s, length), torch.randn(b_, s, length), torch.randn(e), torch.randn(e)]
    inputs = [t.double().requires_grad_() for t in inputs]
    u, delta, a, bm, cm, d, bias = inputs
    grad = torch.randn(b_, e, length, dtype=torch.float64)
    got = torch.autograd.grad(selective_scan(u, delta, a, bm, cm, d, delta_bias=bias), inputs, grad)
    want = torch.autograd.grad(selective_scan_loop(u, delta, a, bm, cm, d, delta_bias=bias, delta_softplus=True),
                               inputs, grad)
    for name, x, y in zip(("u", "delta", "A", "B", "C", "D", "delta_bias"), got, want, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-10, msg=lambda m, name=name: f"{name}: {m}")


def test_bidirectional_is_the_mean_of_two_causal_directions():
    """Vision Mamba's v2 block: the backward direction is the same SSM with its own parameters on the reversed
    sequence (flipped back), gated by the same z, averaged with the forward one before out_proj."""
    both = make(bidirectional=True).double()
    forward, backward = make(bidirectional=False).double(), make(bidirectional=False).double()
    with torch.no_grad():
        for part, index in ((forward, 0), (backward, 1)):
            part.in_proj.weight.copy_(both.in_proj.weight)
            part.out_proj.weight.copy_(both.out_proj.weight)
            part.directions[0].load_state_dict(both.directions[index].state_dict())
        x = torch.randn(2, 40, 16, dtype=torch.float64)
        expected = (forward(x) + backward(x.flip(1)).flip(1)) / 2  # out_proj and the gate are linear / shared
        _, z = both.in_proj(x).chunk(2, dim=-1)
        _, z_b = backward.in_proj(x.flip(1)).chunk(2, dim=-1)
        torch.testing.assert_close(z_b.flip(1), z)  # the backward branch's gate is z reversed
        torch.testing.assert_close(both(x), expected, rtol=1e-10, atol=1e-12)


def copy_into_mambapy(ours, theirs) -> None:
    """Our parameters into mambapy's block: the same names; mambapy's vim.py suffixes the backward ones with _b."""
    with torch.no_grad():
        theirs.in_proj.weight.copy_(ours.in_proj.weight)
        theirs.out_proj.weight.copy_(ours.out_proj.weight)
        for direction, suffix in zip(ours.directions, ("", "_b"), strict=False):
            for name in ("conv1d.weight", "conv1d.bias", "x_proj.weight", "dt_proj.weight", "dt_proj.bias", "A_log",
                         "D"):
                module, _, leaf = name.rpartition(".")
                target = getattr(theirs, module + suffix) if module else theirs
                getattr(target, leaf if module else name + suffix).copy_(direction.get_parameter(name))


@needs_mambapy
@pytest.mark.parametrize("n", [1, 64, 1024])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["causal", "bidirectional"])
def test_layer_equals_mambapy_with_the_same_parameters(n, bidirectional):
    """Causal: mambapy.mamba.MambaBlock (Mamba's block, parallel scan). Bidirectional: mambapy.vim.VMambaBlock, Vision
    Mamba's v2 block with its ``divide_output`` average, the convention ours follows. Same semantics otherwise: no
    padding in mambapy (ours is checked for padding by the contract tests)."""
    from mambapy import mamba as mambapy_mamba
    from mambapy import vim as mambapy_vim

    dim = 32
    ours = make(bidirectional=bidirectional, dim=dim)
    if bidirectional:
        theirs = mambapy_vim.VMambaBlock(mambapy_vim.MambaConfig(d_model=dim, n_layers=1, bidirectional=True))
    else:
        theirs = mambapy_mamba.MambaBlock(mambapy_mamba.MambaConfig(d_model=dim, n_layers=1))
    assert theirs.config.d_inner == ours.in_proj.out_features // 2 and theirs.config.d_state == 16
    copy_into_mambapy(ours, theirs)
    x = torch.randn(2, n, dim, requires_grad=True)
    expected, got = theirs.eval()(x), ours(x)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    assert expected.abs().max() > 1e-2  # not a trivially small output
    grad = torch.randn_like(got)  # and the gradients, through our hand-written backward and their autograd
    ours_grads = torch.autograd.grad(got, [x, *ours.parameters()], grad)
    theirs_grads = dict(zip(["x", *dict(theirs.named_parameters())],
                            torch.autograd.grad(expected, [x, *theirs.parameters()], grad), strict=True))
    torch.testing.assert_close(ours_grads[0], theirs_grads["x"], rtol=1e-4, atol=1e-4 * grad.abs().max())
    for (name, _), ours_grad in zip(ours.named_parameters(), ours_grads[1:], strict=True):
        their_name = name.split(".", 2)[-1] if name.startswith("directions.") else name
        if name.startswith("directions.1."):
            module, _, leaf = their_name.rpartition(".")
            their_name = f"{module}_b.{leaf}" if module else f"{leaf}_b"
        theirs_grad = theirs_grads[their_name]
        torch.testing.assert_close(ours_grad, theirs_grad, rtol=1e-3, atol=1e-4 * theirs_grad.abs().max().clamp(min=1),
                                   msg=lambda m, name=name: f"{name}: {m}")


def test_the_cuda_kernel_is_chosen_only_on_cuda_with_mamba_ssm_installed(monkeypatch):
    layer = make()
    assert layer.scan_backend(torch.device("cpu")) is selective_scan
    monkeypatch.setitem(sys.modules, "mamba_ssm", None)  # an import of it fails: the package is absent
    mamba_module.cuda_selective_scan.cache_clear()
    assert mamba_module.cuda_selective_scan() is None
    assert layer.scan_backend(torch.device("cuda")) is selective_scan

    calls = []

    def fused(u, delta, A, B, C, D=None, z=None, delta_bias=None, delta_softplus=False,  # noqa: N803
              return_last_state=False):
        calls.append({"z": z, "delta_softplus": delta_softplus, "shapes": (u.shape, B.shape)})
        return selective_scan_loop(u, delta, A, B, C, D, z, delta_bias, delta_softplus)

    interface = types.ModuleType("mamba_ssm.ops.selective_scan_interface")
    interface.selective_scan_fn = fused
    for name in ("mamba_ssm", "mamba_ssm.ops"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "mamba_ssm.ops.selective_scan_interface", interface)
    mamba_module.cuda_selective_scan.cache_clear()
    try:
        chosen = layer.scan_backend(torch.device("cuda"))
        assert chosen is not selective_scan and layer.scan_backend(torch.device("cpu")) is selective_scan
        assert make(kernel="torch").scan_backend(torch.device("cuda")) is selective_scan
        # the kernel's argument layout: the same direction output through the (fake, reference) kernel
        xs = torch.randn(2, 9, layer.in_proj.out_features // 2)
        keep = torch.ones(2, 9, 1)
        keep[1, 6:] = 0
        with torch.no_grad():
            torch.testing.assert_close(layer.directions[0](xs, keep, chosen), layer.directions[0](xs, keep,
                                                                                                  selective_scan),
                                       rtol=1e-5, atol=1e-6)
        assert calls and calls[0]["z"] is None and calls[0]["delta_softplus"] is True
        assert calls[0]["shapes"] == (torch.Size([2, 32, 9]), torch.Size([2, 16, 9]))  # u (B, E, L), B (B, S, L)
    finally:
        mamba_module.cuda_selective_scan.cache_clear()


@pytest.mark.skipif(not (torch.cuda.is_available() and importlib.util.find_spec("mamba_ssm") is not None),
                    reason="needs a CUDA device and mamba-ssm (pip install mamba-ssm; the mamba-cuda extra)")
def test_on_cuda_the_fused_kernel_equals_the_pytorch_scan_output_and_gradients():
    """Where both run: the same layer with ``kernel: auto`` (mamba-ssm's fused scan) and ``kernel: torch`` (ours),
    fp32, padding in one sequence, both directions: outputs and every parameter's gradient."""
    device = torch.device("cuda")
    fused, ours = make(dim=64).to(device), make(dim=64, kernel="torch").to(device)
    ours.load_state_dict(fused.state_dict())
    assert fused.scan_backend(device) is not selective_scan and ours.scan_backend(device) is selective_scan
    x = torch.randn(2, 1024, 64, device=device)
    mask = torch.ones(2, 1024, dtype=torch.bool, device=device)
    mask[1, 700:] = False
    outs = []
    for layer in (fused, ours):
        out = layer(x, mask)
        out[mask].square().sum().backward()
        outs.append((out.detach(), {n: q.grad for n, q in layer.named_parameters()}))
    (a, grads_a), (b, grads_b) = outs
    torch.testing.assert_close(a[mask], b[mask], rtol=1e-4, atol=1e-5)
    for name, grad in grads_b.items():
        torch.testing.assert_close(grads_a[name], grad, rtol=1e-3, atol=1e-4 * grad.abs().max().clamp(min=1),
                                   msg=lambda m, name=name: f"{name}: {m}")


@pytest.mark.parametrize(("knob", "bad"), [("d_state", 0), ("expand", 0), ("d_conv", 0), ("dt_rank", 0),
                                           ("dt_min", 0.0), ("kernel", "triton")])
def test_bad_knob_is_a_config_error_naming_it(knob, bad):
    with pytest.raises(ConfigError, match=knob):
        get_attention_class("mamba")(dim=8, num_heads=1, seq_len=16, dropout=0.0, **{knob: bad})


def test_initialisation_follows_mamba():
    layer = get_attention_class("mamba")(dim=32, num_heads=1, seq_len=16, dropout=0.0)
    direction = layer.directions[1]
    torch.testing.assert_close(-torch.exp(direction.A_log[0]), -torch.arange(1.0, 17.0))  # S4D-Real: A_n = -n
    assert torch.equal(direction.D, torch.ones(64)) and direction.dt_proj.in_features == 2  # ceil(32 / 16)
    dt = F.softplus(direction.dt_proj.bias)
    assert (dt >= 0.001 * 0.999).all() and (dt <= 0.1 * 1.001).all()
    assert layer.in_proj.bias is None and layer.out_proj.bias is None and direction.x_proj.bias is None


@pytest.mark.parametrize("lr", [0.01, 0.0005])
def test_a_log_and_d_train_without_weight_decay_at_the_trainer_rate(lr):
    model = tiny_model("mamba")
    optimizer, _ = loop.make_optimizer(model, settings(lr=lr, weight_decay=0.05))
    default, ssm = optimizer.param_groups
    assert {n.split(".", 4)[-1] for n in ssm["param_names"]} == {
        "directions.0.A_log", "directions.0.D", "directions.1.A_log", "directions.1.D"}
    assert ssm["lr"] == default["lr"] == lr and ssm["weight_decay"] == 0.0 and default["weight_decay"] == 0.05


def test_model_ssm_runs_mamba_on_profile_smoke(smoke_cfg):
    """Mamba's own residual block: no MLP, prenorm (LayerNorm where Mamba uses RMSNorm)."""
    record = run(smoke_cfg("attention=mamba", "model=ssm", "~model.num_heads", "~model.mlp_dim", "model.norm=layer",
                           "model.prenorm=true", "trainer.max_steps=6", "trainer.eval_every=3",
                           "trainer.weight_decay=0.1"))
    assert record["status"] == "ok", record["message"]
    assert record["config"]["model"]["block"] == "ssm"
    assert [g["weight_decay"] for g in record["param_groups"]] == [0.1, 0.0]
