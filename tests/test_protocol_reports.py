"""Reports by training protocol (lra_bench/reports/protocols.py): pretrained runs, runs from scratch and the
compute-matched controls never share a Table 1 cell; the protocol-effect table pairs them by config and seed and
its differences and intervals match a hand computation; scripts/report.py writes one Table 1 and chart per protocol."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from lra_bench.reports import significance as sig
from lra_bench.reports.protocols import MATCHED, by_protocol, protocol_effects, protocol_spread, report_labels
from lra_bench.reports.table1 import load_runs, table1
from lra_bench.store import predictions
from lra_bench.store.records import checksum, protocol_of, semantic_hash
from tests.conftest import ROOT

N_TEST = 200
LABELS = np.random.default_rng(0).integers(0, 10, N_TEST)
#: test accuracy per (attention, protocol) and seed: scratch, mlm (3,000 + 3,000 steps), and the 6,000-step control
ACCS = {("softmax", "scratch"): (0.30, 0.33, 0.31), ("softmax", "mlm"): (0.40, 0.42, 0.45),
        ("softmax", MATCHED): (0.36, 0.37, 0.35), ("linear", "scratch"): (0.28, 0.29, 0.27),
        ("linear", "mlm"): (0.29, 0.30, 0.26)}


def config(attention: str, protocol: str, seed: int) -> dict:
    steps = 6000 if protocol == MATCHED else 3000
    pretrain = ({"name": "mlm", "max_steps": 3000, "lr": 0.05, "mask_rate": 0.1, "loss": "ce"} if protocol == "mlm"
                else {"name": "none"})
    return {"attention": {"_target_": attention}, "task": {"name": "listops", "source": "generate"},
            "model": {"dim": 64}, "trainer": {"max_steps": steps, "lr": 0.05}, "seed": seed, "pretrain": pretrain}


def correct_pattern(acc: float, seed: int) -> np.ndarray:
    """Predictions right on exactly round(acc * N) examples, which ones depending on the seed."""
    right = np.zeros(N_TEST, bool)
    right[np.random.default_rng(seed).permutation(N_TEST)[: round(acc * N_TEST)]] = True
    return right


def record(attention: str, protocol: str, seed: int, acc: float) -> dict:
    cfg = config(attention, protocol, seed)
    predicted = np.where(correct_pattern(acc, seed), LABELS, (LABELS + 1) % 10)
    pre = protocol == "mlm"
    h = semantic_hash(cfg)
    return {
        "run_id": f"cpu-seed{seed}-{h[:10]}", "attention": attention, "task": "listops", "profile": "cpu",
        "seed": seed, "protocol": protocol_of(cfg), "config": cfg, "config_hash": h, "status": "ok", "message": "",
        "best_val_acc": acc, "best_step": 10, "test_acc": float((predicted == LABELS).mean()),
        "test_examples": N_TEST, "test_majority_rate": 0.1,
        predictions.FIELD: predictions.encode(predicted, LABELS, "fp"),
        "throughput": {"steps_per_s": 5.0, "examples_per_s": 160.0, "batch_size": 32, "seq_len": 128},
        "memory": {"peak_bytes": 1, "kind": "cpu_peak_rss"}, "params": 1000, "device": "cpu", "torch_version": "2",
        "git_commit": "abc", "dataset_fingerprint": "f", "wall_time_s": 1.0, "synthetic": False,
        "finished_at": "2026-01-01T00:00", "pretraining": {"val_acc": 0.5, "loop_s": 100.0} if pre else None,
        "phases": {"pretrain_s": 100.0 if pre else None, "train_loop_s": 200.0 if protocol != MATCHED else 400.0},
    }


@pytest.fixture
def store(tmp_path) -> Path:
    runs = tmp_path / "runs"
    for (attention, protocol), accs in ACCS.items():
        for seed, acc in enumerate(accs):
            rec = record(attention, protocol, seed, acc)
            folder = runs / "listops" / attention / rec["run_id"]
            folder.mkdir(parents=True)
            (folder / "record.json").write_text(json.dumps({**rec, "checksum": checksum(rec)}))
    return runs


def test_protocols_are_split_and_never_share_a_cell(store):
    runs = load_runs(store)
    labels = report_labels(runs)
    assert sorted(labels.value_counts().items()) == [("mlm", 6), ("scratch", 6), (MATCHED, 3)]
    assert set(runs[labels == MATCHED].ft_steps) == {6000}, "the control: the pretraining's + the fine-tune's steps"
    with pytest.raises(ValueError, match="several training protocols in one cell: .*softmax/listops \\(cpu\\)"):
        table1(runs, "cpu")
    parts = by_protocol(runs)
    assert list(parts) == ["scratch", "mlm", MATCHED]
    t, _ = table1(parts["mlm"], "cpu")
    row = t.set_index("attention").loc["softmax"]
    assert row.listops_mean == pytest.approx(np.mean(ACCS[("softmax", "mlm")]) * 100)


def sample(attention: str, protocol: str) -> sig.Sample:
    accs = ACCS[(attention, protocol)]
    correct = np.stack([correct_pattern(a, s) for s, a in enumerate(accs)])
    return sig.Sample(np.asarray(accs) * 100, correct, "fp")


def test_the_effect_table_pairs_by_config_and_matches_a_hand_computation(store):
    effects = protocol_effects(load_runs(store), "cpu").set_index("attention")
    soft = effects.loc["softmax"]
    d, se, df, method = sig.compare(sample("softmax", "mlm"), sample("softmax", "scratch"))
    assert method == "paired" and soft.effect == pytest.approx(d) == pytest.approx(
        (np.mean(ACCS[("softmax", "mlm")]) - np.mean(ACCS[("softmax", "scratch")])) * 100)
    from scipy import stats
    half = stats.t.ppf(0.975, df) * se
    assert (soft.effect_lo, soft.effect_hi) == pytest.approx((d - half, d + half))
    d_c, *_ = sig.compare(sample("softmax", "mlm"), sample("softmax", MATCHED))
    assert soft.vs_control == pytest.approx(d_c) and soft.n_control == 3 and soft.control_s == 400.0
    assert soft.pretrain_s == 100.0 and soft.fine_tune_s == 200.0 and soft.pretrain_metric == 0.5
    lin = effects.loc["linear"]
    assert lin.n_control == 0 and math.isnan(lin.vs_control), "no control run: nothing made up"
    assert lin.effect_lo < 0 < lin.effect_hi, "a small difference at 3 seeds holds 0 in its interval"
    assert soft.effect_lo > 0, "a 7.7-point gain with small seed spread does not"


def test_spread_between_best_and_worst_variant_per_protocol(store):
    spread = protocol_spread(load_runs(store), "cpu").set_index("protocol")
    assert (spread.loc["scratch"].best, spread.loc["scratch"].worst) == ("softmax", "linear")
    assert spread.loc["mlm"].spread == pytest.approx(
        (np.mean(ACCS[("softmax", "mlm")]) - np.mean(ACCS[("linear", "mlm")])) * 100)
    assert spread.loc[MATCHED].n_variants == 1 and math.isnan(spread.loc[MATCHED].spread_lo)


def test_one_result_under_two_names_is_one_comparison_and_one_variant(store):
    """flash's records predict exactly what softmax's do, seed by seed, in every protocol (bigbird and longformer
    are flash at short lengths): Holm's families and the spread's count of variants count that result once."""
    before = protocol_effects(load_runs(store), "cpu").set_index("attention")
    for (attention, protocol), accs in ACCS.items():
        for seed, acc in enumerate(accs):
            if attention == "softmax":
                rec = record("flash", protocol, seed, acc)
                folder = store / "listops" / "flash" / rec["run_id"]
                folder.mkdir(parents=True)
                (folder / "record.json").write_text(json.dumps({**rec, "checksum": checksum(rec)}))
    runs = load_runs(store)
    effects = protocol_effects(runs, "cpu").set_index("attention")
    assert sorted(effects.index) == ["flash", "linear", "softmax"]
    for column in ("effect_p_holm", "vs_control_p_holm"):
        assert effects.loc["softmax", column] == pytest.approx(before.loc["softmax", column]), column
        assert effects.loc["flash", column] == pytest.approx(before.loc["softmax", column]), column
    assert effects.loc["linear", "effect_p_holm"] == pytest.approx(before.loc["linear", "effect_p_holm"])
    assert effects.loc["softmax", "vs_control_p_holm"] == pytest.approx(effects.loc["softmax", "vs_control_p"]), \
        "the control comparison is one test, not two"
    spread = protocol_spread(runs, "cpu").set_index("protocol")
    assert spread.loc["scratch"].n_variants == 2 and spread.loc[MATCHED].n_variants == 1
    assert spread.loc["scratch"].best in ("flash", "softmax")
    assert spread.loc["scratch"].spread == pytest.approx(
        (np.mean(ACCS[("softmax", "scratch")]) - np.mean(ACCS[("linear", "scratch")])) * 100)


def test_holm_over_distinct_comparisons_keeps_untested_rows_out_and_unkeyed_rows_apart():
    from lra_bench.reports.protocols import _holm_distinct
    adjusted = _holm_distinct(np.array([0.01, np.nan, 0.01, 0.2, 0.02]), ["a", None, "a", None, None])
    assert adjusted[0] == adjusted[2] == pytest.approx(0.03), "one test of three (NaN is none): 3 x 0.01"
    assert math.isnan(adjusted[1]) and adjusted[4] == pytest.approx(0.04) and adjusted[3] == pytest.approx(0.2)
    assert len(_holm_distinct(np.array([]), [])) == 0


def test_report_script_writes_a_table_and_chart_per_protocol_and_the_effect_table(store, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "scripts/report.py", "--runs-dir", str(store), "--bench-dir", "none",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for name in ("table1.md", "table1_mlm.md", "table1_matched.md", "bubble.png", "bubble_mlm.png",
                 "protocols.md", "protocols.csv", "protocols_spread.csv"):
        assert (out / name).is_file(), name
    assert "(protocol: scratch)" in (out / "table1.md").read_text()
    assert "(protocol: mlm)" in (out / "table1_mlm.md").read_text()
    effects = pd.read_csv(out / "protocols.csv")
    assert set(effects.attention) == {"softmax", "linear"} and set(effects.protocol) == {"mlm"}
    report = (out / "REPORT.md").read_text()
    assert "## Protocol: mlm" in report and "## Protocol effect" in report and "vs control" in report


def test_the_published_protocol_rows_agree_with_themselves_and_the_configs():
    from omegaconf import OmegaConf

    from lra_bench.reports import paper

    rows = {(r.model, r.protocol): r for r in paper.AMOS_LRA}
    s4 = rows[("S4", "scratch")]
    assert round(sum(s4.scores) / 6, 2) == s4.avg6, "the per-task cells must average to the printed 86.09"
    assert rows[("S4", "mlm")].pathx256 - s4.pathx256 == pytest.approx(19.29), "the paper's '67 -> 87' on PathX-256"
    assert rows[("Transformer + rotary", "mlm")].avg6 - rows[("Transformer", "scratch")].avg6 > 30
    defaults = OmegaConf.load(ROOT / "configs" / "pretrain" / "mlm.yaml").task_defaults
    assert {task: d.mask_rate for task, d in defaults.items()} == paper.AMOS_MASK_RATES


def test_an_effect_of_one_seed_shows_the_difference_of_the_means_and_why_it_has_no_interval(store):
    """A measurement still running: one pretrained seed beside three from scratch gives the point difference, no
    interval, and says why (a test needs 2 or more seeds on both sides)."""
    runs = load_runs(store)
    keep = (runs.protocol != "mlm") | (runs.seed == 0)
    effects = protocol_effects(runs[keep].reset_index(drop=True))
    row = effects[effects.attention == "softmax"].iloc[0]
    assert row.n_pretrained == 1 and row.n_scratch == 3
    assert row.effect == pytest.approx(40.0 - np.mean([30.0, 33.0, 31.0]))
    assert math.isnan(row.effect_lo) and row.effect_method == "untested: fewer than 2 seeds a side"
    from lra_bench.reports.protocols import effects_markdown

    assert f"{row.effect:+.2f} (untested: fewer than 2 seeds a side: no interval)" in effects_markdown(effects,
                                                                                                         pd.DataFrame())
