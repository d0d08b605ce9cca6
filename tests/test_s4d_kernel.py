"""S4D's kernel without the (channels, modes, L) Vandermonde matrix (issue 45): Ā^l = Ā^(jT)·Ā^t, T ≈ √L."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from lra_bench.attention.s4d import S4DKernel


def test_the_discrete_input_matrix_is_the_zero_order_hold_integral():
    """B̄ = ∫₀^Δ exp(A s) ds · B, checked against the integral itself (Simpson's rule, 20,001 points per channel):
    ``forward`` and ``vandermonde`` share ``_b_bar``, so their agreement alone would not catch a wrong B̄."""
    torch.manual_seed(2)
    kernel = S4DKernel(dim=3, d_state=8, dt_min=0.01, dt_max=0.5, init="legs", channels=1, n_ssm=None).double()
    _, b_bar, _ = kernel.discrete()  # (C, n)
    dta, a = kernel._dt_a()
    b = torch.view_as_complex(kernel.B)  # (C, n): one set per channel
    for h in range(kernel.dim):
        s = torch.linspace(0, float(torch.exp(kernel.log_dt[h].detach())), 20001, dtype=torch.float64)
        w = torch.ones_like(s)
        w[1:-1:2], w[2:-1:2] = 4.0, 2.0  # Simpson's weights
        integral = (torch.exp(a[h][:, None] * s) * w).sum(-1) * (s[1] - s[0]) / 3  # (n,)
        torch.testing.assert_close(b_bar[h], integral * b[h], rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("length", [1, 2, 3, 100, 1000, 1024, 4097])
@pytest.mark.parametrize(("init", "n_ssm"), [("lin", None), ("legs", 2)])  # legs: a trained B, shared sets
def test_kernel_equals_the_full_vandermonde(length, init, n_ssm):
    torch.manual_seed(0)
    kernel = S4DKernel(dim=8, d_state=16, dt_min=0.001, dt_max=0.1, init=init, channels=2, n_ssm=n_ssm).double()
    torch.testing.assert_close(kernel(length), kernel.vandermonde(length), rtol=1e-12, atol=1e-12)
    kernel = kernel.float()  # float32: within its rounding
    torch.testing.assert_close(kernel(length), kernel.vandermonde(length), rtol=1e-5, atol=1e-5)


def test_gradients_equal_the_full_vandermonde():
    torch.manual_seed(1)
    kernel = S4DKernel(dim=4, d_state=8, dt_min=0.01, dt_max=0.5, init="inv", channels=2, n_ssm=None).double()
    weights = torch.randn(2, 4, 300, dtype=torch.float64)
    grads = []
    for f in (kernel, kernel.vandermonde):
        kernel.zero_grad(set_to_none=True)
        (f(300) * weights).sum().backward()
        grads.append({name: p.grad.clone() for name, p in kernel.named_parameters()})
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], rtol=1e-10, atol=1e-12)


class LargestTensor(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.numel = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.numel = max(self.numel, t.numel())
        return out


def test_no_tensor_of_channels_times_modes_times_length():
    """Forward and backward at width 64, 32 modes, L = 4096: the largest tensor is the output's size (channels x
    L per direction), not the Vandermonde's 64 x 32 x 4096."""
    kernel = S4DKernel(dim=64, d_state=64, dt_min=0.001, dt_max=0.1, init="lin", channels=2, n_ssm=None)
    with LargestTensor() as seen:
        kernel(4096).sum().backward()
    assert seen.numel <= 2 * 2 * 64 * 4096  # the complex (2, C, J·T) product as reals; the full matrix: 64·32·4096


def test_the_ab_tools_reference_side_computes_the_vandermonde_kernel_and_only_inside(monkeypatch):
    """tools/s4d_kernel_ab.py: within ``kernel_of("vandermonde")`` every S4DKernel computes the full matrix (the same
    kernel within float tolerance, by another path: it allocates the (C, n, L) tensor); outside it, and after an
    error inside it, the class's own kernel is back."""
    from tests.conftest import load_tool

    tool = load_tool(monkeypatch, "s4d_kernel_ab")
    torch.manual_seed(0)
    kernel = S4DKernel(dim=8, d_state=16, dt_min=0.001, dt_max=0.1, init="lin", channels=2, n_ssm=None)
    own = S4DKernel.forward
    with tool.kernel_of("vandermonde"):
        assert S4DKernel.forward is S4DKernel.vandermonde
        torch.testing.assert_close(kernel(300), own(kernel, 300), rtol=1e-5, atol=1e-5)  # the same kernel
    assert S4DKernel.forward is own
    with pytest.raises(RuntimeError), tool.kernel_of("vandermonde"):
        raise RuntimeError("a failed step")
    assert S4DKernel.forward is own
    with tool.kernel_of("now"):
        assert S4DKernel.forward is own


@pytest.mark.slow
def test_the_ab_tool_times_both_kernels_and_fits_both_exponents(tmp_path):
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "ab.md"
    proc = subprocess.run([sys.executable, str(root / "tools" / "s4d_kernel_ab.py"), "attention=s4d", "model=ssm",
                           "task=text", "model.dim=16", "--n", "64", "128", "256", "--rounds", "2", "--steps", "2",
                           "--warmup", "0", "--batch", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=root)
    assert proc.returncode == 0, proc.stderr[-2000:]
    table = out.read_text()
    rows = [line.split(" | ")[0] for line in table.splitlines() if line.startswith("| ")]
    assert rows == ["| N", "| 64", "| 128", "| 256", "| exponent [95 %]"]
    raw = json.loads(out.with_suffix(".json").read_text())
    assert raw["n"] == [64, 128, 256] and all(len(raw["steps_s"][str(n)][side]) == 4 for n in raw["n"]
                                              for side in ("now", "vandermonde"))
    assert set(raw["exponents"]) == {"now", "vandermonde"}
    for n in raw["n"]:  # each side's bursts carry the machine's load while they ran, as a benchmark cell does
        for side in ("now", "vandermonde"):
            machine = raw["machine"][str(n)][side]
            assert machine["threads"] >= 1 and machine["busy"] in (True, False, None)
            assert machine["other_cores"] is None or machine["other_cores"] >= 0
    assert all(line.count("|") == 6 for line in table.splitlines() if line.startswith("|"))  # five columns
    refused = subprocess.run([sys.executable, str(root / "tools" / "s4d_kernel_ab.py"), "attention=softmax", "--n",
                              "64", "128", "256"], capture_output=True, text=True, timeout=300, cwd=root)
    assert refused.returncode != 0 and "add attention=s4d" in refused.stderr


def test_the_docs_side_by_side_kernel_figures_are_the_committed_run():
    """docs/benchmark.md's "Both kernels side by side" table: per width and N the ratio of the two sides' median
    steps with its bootstrap interval (the tool's: Random(0) per run, lengths in order, 4,000 resamples), and both
    exponents, from results/speed_cpu/s4d_kernel_ab; the new kernel is faster at every length by its interval, and
    its width-256 exponent's one-sided 95 % bound is at most 1.1 (issue 45's bar)."""
    import json
    import random
    import statistics
    from pathlib import Path

    import numpy as np
    from scipy import stats

    from lra_bench.reports.efficiency import fit_exponent

    root = Path(__file__).resolve().parents[1]
    docs = (root / "docs" / "benchmark.md").read_text()
    table = docs[docs.index("**Both kernels side by side**"):docs.index("The present kernel takes a quarter")]
    cells: dict[str, list[str]] = {}
    for width in (128, 256):
        raw = json.loads((root / "results" / "speed_cpu" / "s4d_kernel_ab" / f"width{width}.json").read_text())
        rng = random.Random(0)
        for n in raw["n"]:
            now, old = raw["steps_s"][str(n)]["now"], raw["steps_s"][str(n)]["vandermonde"]
            boots = sorted(statistics.median(rng.choices(now, k=len(now)))
                           / statistics.median(rng.choices(old, k=len(old))) for _ in range(4000))
            ratio = statistics.median(now) / statistics.median(old)
            assert boots[3899] < 1.0  # faster at every length, by its interval
            cells.setdefault(str(n), []).append(f"{ratio:.3f} [{boots[100]:.3f}, {boots[3899]:.3f}]")
        for side in ("now", "vandermonde"):
            medians = [statistics.median(raw["steps_s"][str(n)][side]) for n in raw["n"]]
            cells.setdefault(side, []).append(fit_exponent(np.array(raw["n"]), np.array(medians)).text())
            if side == "now" and width == 256:
                fit = stats.linregress(np.log(raw["n"]), np.log(medians))
                assert fit.slope + stats.t.ppf(0.95, len(medians) - 2) * fit.stderr <= 1.1
    for key, label in [(str(n), str(n)) for n in (1024, 2048, 4096, 8192, 16384)] + [
            ("now", "exponent now [95 %]"), ("vandermonde", "exponent Vandermonde [95 %]")]:
        assert f"| {label} | {cells[key][0]} | {cells[key][1]} |" in table, label
