"""The efficiency benchmark: timing harness, memory isolation, OOM handling, exponent fit, Table 2 report."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf
from scipy import stats

from lra_bench.bench.isolated import run_isolated
from lra_bench.bench.table2 import run_benchmark
from lra_bench.infra import timing
from lra_bench.infra.memory import peak_memory_bytes, reset_peak_memory, tensor_peak_of
from lra_bench.infra.timing import time_callable
from lra_bench.reports.efficiency import fit_exponent, load_cells, rank_text, scaling_plot, spearman, table2
from lra_bench.store.records import checksum
from tests.conftest import CONFIGS, compose_run

CPU = torch.device("cpu")


def test_timer_excludes_warmup_and_reports_median_and_quartiles(monkeypatch):
    calls = []
    ticks = iter([0.0, 1.0, 10.0, 13.0, 20.0, 22.0, 30.0, 34.0, 40.0, 45.0])  # durations 1, 3, 2, 4, 5
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(ticks))
    t = time_callable(lambda: calls.append(1), CPU, warmup=3, repeats=5)
    assert len(calls) == 8  # 3 untimed + 5 timed
    assert t.median_s == 3.0 and t.min_s == 1.0 and t.repeats == 5 and t.warmup == 3
    assert t.q1_s <= t.median_s <= t.q3_s


def test_cpu_peak_memory_reset_is_real():
    if not reset_peak_memory(CPU):
        pytest.skip("/proc/self/clear_refs not writable here")
    big = np.ones(300 * 2**20 // 8)  # 300 MiB resident
    del big
    high = peak_memory_bytes(CPU)
    assert reset_peak_memory(CPU)
    low = peak_memory_bytes(CPU)
    assert high - low > 200 * 2**20, "VmHWM was not reset"


def test_tensor_peak_counts_what_a_step_holds_at_once_and_repeats_exactly():
    """tensor_peak_of: the peak of tensor memory allocated during the call, over what was held before it (the
    tensors held outside do not count), the same on every call; what is freed before a later allocation does not add
    to it; a call that allocates nothing has no peak."""
    mib = 2**20
    held = torch.ones(8 * mib // 4)  # 8 MiB held before: not counted

    def step() -> None:
        a = torch.empty(mib // 4)  # 1 MiB
        b = torch.empty(2 * mib // 4)  # 3 MiB held
        del a
        c = torch.empty(mib // 8)  # 2.5 MiB: below the peak
        del b, c

    assert tensor_peak_of(step) == tensor_peak_of(step) == 3 * mib
    assert tensor_peak_of(lambda: None) is None and held.sum() > 0  # nothing allocated inside, nothing counted
    x = torch.randn(64, 256, requires_grad=True)

    def layer() -> None:
        (x @ x.T).softmax(-1).sum().backward()
        x.grad = None

    layer()
    assert tensor_peak_of(layer) == tensor_peak_of(layer) >= 2 * 64 * 64 * 4  # scores and their softmax at least


def attention_payload(name: str, n: int, batch: int = 1) -> dict:
    config = {"attention": OmegaConf.to_container(OmegaConf.load(CONFIGS / "attention" / f"{name}.yaml")),
              "model": {"dim": 32, "num_heads": 2}, "trainer": {"precision": "fp32", "compile": "auto"}}
    return {"mode": "attention", "config": config, "n": n, "batch": batch, "warmup": 1, "repeats": 2, "device": "cpu"}


def test_isolated_cells_measure_their_own_peak():
    big = run_isolated("lra_bench.bench.cell", attention_payload("softmax", 2048, batch=2), timeout=300)
    small = run_isolated("lra_bench.bench.cell", attention_payload("softmax", 256), timeout=300)
    assert big["status"] == small["status"] == "ok"
    # 2 x 2 heads x 2048^2 fp32 scores = 64 MiB per N x N tensor: the big cell must show it, the next must not
    assert big["peak_delta_bytes"] > 64 * 2**20
    assert small["peak_delta_bytes"] < big["peak_delta_bytes"] / 4


def test_oom_is_recorded_not_raised():
    res = run_isolated("lra_bench.bench.cell", attention_payload("softmax", 8192, batch=2), timeout=300,
                       memory_limit_bytes=3 * 2**30)
    assert res["status"] == "oom", res


@pytest.mark.slow
def test_benchmark_resumes_and_records_oom_then_goes_on(tmp_path, monkeypatch):
    cfg = compose_run(["task=listops", "profile=smoke", "bench.seq_lens=[32,64,128]", "bench.modes=[model]",
                       "bench.repeats=1", "bench.warmup=0"], tmp_path, config_name="benchmark")
    real = run_isolated
    seen = []

    def fake(module, payload, timeout, memory_limit_bytes=None):
        seen.append(payload["n"])
        if payload["n"] == 64:
            return {"status": "oom", "message": "simulated"}
        return real(module, payload, timeout)

    monkeypatch.setattr("lra_bench.bench.table2.run_isolated", fake)
    results = run_benchmark(cfg)
    assert [r["status"] for r in results] == ["ok", "oom", "oom"]
    assert "not run" in results[2]["message"] and seen == [32, 64]
    files = sorted((tmp_path / "bench").rglob("*.json"))
    assert len(files) == 3 and all(json.loads(f.read_text())["batch"] == 4 for f in files)
    seen.clear()
    monkeypatch.setattr("lra_bench.bench.table2.run_isolated", real)
    again = run_benchmark(cfg)  # the ok cell is skipped; the failed ones run again
    assert [r["status"] for r in again] == ["ok", "ok", "ok"]
    assert again[0]["created_at"] == results[0]["created_at"]


def test_exponent_fit_on_synthetic_timings():
    n = np.array([1024, 2048, 3072, 4096])
    exact = fit_exponent(n, 3e-7 * n**2.0)
    assert exact.value == pytest.approx(2.0) and exact.lengths == 4 and exact.why == ""
    assert (exact.lo, exact.hi) == pytest.approx((2.0, 2.0))  # no residual: an interval of zero width
    rng = np.random.default_rng(0)
    noisy = 1e-4 * n * np.exp(rng.normal(0, 0.03, size=4))
    fit = fit_exponent(n, noisy)
    assert fit.value == pytest.approx(1.0, abs=0.1) and fit.lo < fit.value < fit.hi
    # the interval is the OLS slope's t interval with lengths - 2 degrees of freedom
    ref = stats.linregress(np.log(n), np.log(noisy))
    assert fit.hi - fit.value == pytest.approx(stats.t.ppf(0.975, 2) * ref.stderr)
    assert fit.text() == f"{fit.value:.2f} [{fit.lo:.2f}, {fit.hi:.2f}]"
    refused = fit_exponent(n, [np.nan, 2.0, 1.0, np.nan])  # two lengths: any two points lie on a line
    assert np.isnan(refused.value) and refused.why == "2 lengths; needs >= 3"
    assert refused.text() == "- (2 lengths; needs >= 3)"
    assert fit_exponent(n[:1], [1.0]).why == "1 length; needs >= 3"
    assert fit_exponent([1024, 1024, 2048], [1.0, 1.1, 2.0]).why == "2 lengths; needs >= 3"  # distinct lengths count


def fixture_cells(tmp_path):
    rows = []
    for name, speed, mem in [("softmax", 2.0, 2.0), ("linear", 1.0, 1.0), ("performer", 1.05, 1.0),
                             ("local", 1.0, 1.0), ("reformer", 1.5, 1.2)]:
        for n in (1024, 2048, 4096):
            t = 1e-7 * n**speed
            rows.append({"attention": name, "mode": "model", "n": n, "batch": 4, "device": "cpu-test",
                         "profile": "cpu", "status": "ok", "median_s": t, "q1_s": t, "q3_s": t, "min_s": t,
                         "peak_delta_bytes": 1e3 * n**mem, "created_at": "2026-01-01T00:00:00"})
    rows[-1] = {**rows[-1], "status": "oom", "median_s": None, "peak_delta_bytes": None}
    for i, row in enumerate(rows):
        (tmp_path / f"cell{i}.json").write_text(json.dumps({**row, "checksum": checksum(row)}))
    (tmp_path / "corrupt.json").write_text("{not json")
    return load_cells(tmp_path)


def test_table2_report_on_fixture_data(tmp_path):
    cells = fixture_cells(tmp_path)
    assert len(cells) == 15
    table, md = table2(cells, "model")
    soft = table.set_index("attention").loc["softmax"]
    lin = table.set_index("attention").loc["linear"]
    assert soft["steps/s N=4096"].endswith("(1.00x)")
    speedup = (1e-7 * 4096**2) / (1e-7 * 4096)
    assert lin["steps/s N=4096"].endswith(f"({speedup:.2f}x)")
    assert soft["time exp."] == pytest.approx(2.0) and lin["time exp."] == pytest.approx(1.0)
    assert soft["time exp. 95 %"] == "[2.00, 2.00]" and soft["time exp. note"] == ""  # exact powers: no residual
    assert "| softmax " in md and "2.00 [2.00, 2.00]" in md and "fitted only over >= 3 lengths" in md
    assert table.set_index("attention").loc["reformer"]["steps/s N=4096"] == "OOM"
    assert "Spearman" in md and "| softmax" in md and "paper steps/s 4K" in md
    png = scaling_plot(cells, tmp_path / "out" / "scaling_model.png")
    assert png.stat().st_size > 10_000 and png.with_suffix(".svg").exists()


def test_spearman_matches_definition():
    a = pd.Series({"x": 1.0, "y": 2.0, "z": 3.0, "w": 4.0})
    assert spearman(a, a * 10) == pytest.approx(1.0)
    assert spearman(a, -a) == pytest.approx(-1.0)
    assert np.isnan(spearman(a[:2], a[:2]))
    with warnings.catch_warnings():  # every variant at chance (constant accuracies): undefined, and no numpy warning
        warnings.simplefilter("error")
        assert np.isnan(spearman(a * 0 + 50.55, a))
    assert rank_text(float("nan")).startswith("undefined") and rank_text(0.123) == "0.12"


def test_crossover_length_where_a_variant_overtakes_flash():
    from lra_bench.reports.efficiency import crossover

    ns = np.array([1024, 2048, 4096, 8192])
    flash = 1 / (1e-7 * ns**2.0)  # steps/s of a quadratic baseline
    linear = 1 / (1e-7 * 3000 * ns)  # equal where n = 3000
    n_star, text = crossover(ns, linear, flash)
    assert n_star == pytest.approx(3000, rel=1e-6) and text == "~3,000"
    assert crossover(ns, flash * 2, flash) == (1024.0, "<= 1024")
    assert crossover(ns, flash / 2, flash)[1] == "not up to 8192"
    assert crossover(ns, np.array([1.0, 2.0, 0.5, 3.0]), np.ones(4))[1] == "~5,356"  # only the final run counts
    flash_oom = np.array([*flash[:3], np.nan])  # flash OOM at 8K: any variant that runs is faster there
    assert crossover(ns, flash / 2, flash_oom) == (8192.0, "4096-8192")
    assert np.isnan(crossover(ns, np.array([*flash[:3] / 2, np.nan]), flash_oom)[0])  # both OOM: not faster


def test_table2_with_flash_has_both_ratios_and_the_crossover(tmp_path):
    rows = []
    for name, time_at in [("softmax", lambda n: 2e-7 * n**2), ("flash", lambda n: 1e-7 * n**2),
                          ("linear", lambda n: 1e-7 * 3000 * n)]:
        for n in (1024, 2048, 4096, 8192):
            t = time_at(n)
            rows.append({"attention": name, "mode": "model", "n": n, "batch": 32, "device": "gpu-test",
                         "profile": "cpu", "status": "ok", "median_s": t, "q1_s": t, "q3_s": t, "min_s": t,
                         "peak_delta_bytes": 1e3 * n, "created_at": "2026-01-01T00:00:00"})
    for i, row in enumerate(rows):
        (tmp_path / f"cell{i}.json").write_text(json.dumps({**row, "checksum": checksum(row)}))
    cells = load_cells(tmp_path)
    table, md = table2(cells, "model")
    t = table.set_index("attention")
    assert t.loc["linear", "steps/s N=4096"].endswith("(2.73x / 1.37x)")  # 2·4096/3000 and 4096/3000
    assert t.loc["linear", "overtakes flash at N"] == "~3,000" and t.loc["flash", "overtakes flash at N"] == ""
    assert t.loc["softmax", "overtakes flash at N"] == "not up to 8192"
    assert "ratio to softmax / to flash" in md
    png = scaling_plot(cells, tmp_path / "out" / "scaling_model.png")
    assert png.stat().st_size > 10_000
