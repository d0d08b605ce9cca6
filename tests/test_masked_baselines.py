"""lra_bench/reports/masked_baselines.py and tools/masked_baselines.py: what a masked-token pretraining scores
without learning from context, on hand-made inputs whose answers are known, and the figures docs/protocols.md
quotes, recomputed on the real data (skipped without ../shared/data)."""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import numpy as np
import pytest

from lra_bench.reports.masked_baselines import grey_baselines, token_baselines
from lra_bench.store.records import read_records

ROOT = Path(__file__).resolve().parents[1]
CIFAR = ROOT.parent / "shared" / "data" / "cifar10"


def test_token_baselines_are_the_unigram_guess_on_the_masked_tokens_only():
    train = np.array([[1, 1, 1, 2, 0, 0]])  # pads (0) are not tokens: p(1) = 3/4, p(2) = 1/4
    val = np.array([[1, 2, 2, 0]])
    masks = np.array([[True, True, False, False]])  # the third token is visible: not scored
    got = token_baselines(train, val, masks, pad_id=0)
    assert got["unigram_cross_entropy"] == pytest.approx(-(math.log(0.75) + math.log(0.25)) / 2)
    assert got["unigram_entropy"] == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert got["majority_acc"] == 0.5  # token 1 is the guess: right once in two
    unseen = token_baselines(train, np.array([[3, 1]]), np.array([[True, False]]), pad_id=0)
    assert unseen["unigram_cross_entropy"] == math.inf  # the unigram guess gives token 3 no probability
    with pytest.raises(ValueError, match="no masked token"):
        token_baselines(train, val, np.zeros_like(masks), pad_id=0)
    padded = token_baselines(train, val, np.array([[True, True, False, True]]), pad_id=0)  # a pad masked by hand
    assert padded == got  # is not a token: it is not scored


def test_grey_baselines_use_visible_neighbours_without_wrapping_round_the_border():
    # 3 x 3 image, only the top-left pixel masked: its neighbours are right (10) and below (20); the pixels that a
    # wrap-around would take (the bottom-left 1000 and the top-right 1000) are not its neighbours
    val = np.array([[40, 10, 1000, 20, 0, 0, 1000, 0, 0]])
    masks = np.zeros_like(val, dtype=bool)
    masks[0, 0] = True
    train = np.array([[0, 0, 100, 100, 100]])  # median 100
    got = grey_baselines(train, val, masks)
    assert got["neighbour_mae"] == pytest.approx(abs(40 - 15))
    assert got["image_mean_mae"] == pytest.approx(abs(40 - (10 + 1000 + 20 + 1000) / 8))
    assert got["median_mae"] == pytest.approx(60)
    alone = np.array([[7, 9, 9, 9]])  # 2 x 2, three masked pixels around one visible: each has a visible
    hidden = np.array([[False, True, True, True]])  # neighbour but the corner opposite it, which takes the mean
    assert grey_baselines(train, alone, hidden)["neighbour_mae"] == pytest.approx((2 + 2 + 2) / 3)
    with pytest.raises(ValueError, match="not a square"):
        grey_baselines(train, np.zeros((1, 8)), np.ones((1, 8), dtype=bool))


def test_the_tool_needs_a_masked_pretraining_and_prints_its_baselines(tmp_path, capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    main = runpy.run_path(str(ROOT / "tools" / "masked_baselines.py"))["main"]
    common = ["profile=smoke", f"paths.cache_dir={tmp_path / 'cache'}"]
    assert main(common) == 2
    assert "add pretrain=mlm" in capsys.readouterr().err
    assert main([*common, "pretrain=mlm", "pretrain.mask_rate=0.15", "pretrain.loss=ce"]) == 0
    out = capsys.readouterr().out
    assert "mask rate 0.15, loss ce, seed 0" in out and "| unigram_cross_entropy |" in out
    assert main([*common, "pretrain=mlm", "pretrain.mask_rat=0.15"]) == 2  # a typo: one line, not a traceback
    assert capsys.readouterr().err.startswith("error: ")


@pytest.mark.slow
def test_the_baselines_docs_protocols_quotes_are_the_tools(tmp_path, monkeypatch, capsys):
    """docs/protocols.md reads the masked-token records against these: ListOps (generated) and, with the real
    CIFAR-10 slice, image at profile=cpu, seeds 0-2 (each seed masks other positions)."""
    monkeypatch.syspath_prepend(str(ROOT / "tools"))
    baselines = runpy.run_path(str(ROOT / "tools" / "masked_baselines.py"))["baselines"]
    docs = " ".join((ROOT / "docs" / "protocols.md").read_text().split())
    common = ["profile=cpu", "pretrain=mlm", f"paths.cache_dir={tmp_path / 'cache'}",
              f"paths.results_dir={tmp_path / 'runs'}"]
    listops = [baselines(["task=listops", f"seed={s}", *common])[1] for s in (0, 1, 2)]
    assert {f"{b['unigram_entropy']:.2f}" for b in listops} == {"2.64"} and "unigram distribution: 2.64" in docs
    assert {f"{b['unigram_cross_entropy']:.2f}" for b in listops} == {"2.64"}
    assert "guess scores 2.64 on the masked positions" in docs
    low, high = (f(100 * b["majority_acc"] for b in listops) for f in (min, max))
    assert f"most frequent token: {low:.1f}-{high:.1f} % of the same positions" in docs
    if not CIFAR.is_dir():
        pytest.skip(f"no {CIFAR}: the image figures need the real CIFAR-10 slice")
    image = [baselines(["task=image", f"task.data_dir={CIFAR}", f"seed={s}", *common])[1] for s in (0, 1, 2)]
    for key, words in (("median_mae", "the training median"), ("image_mean_mae", "the image's visible mean"),
                       ("neighbour_mae", "the mean of its visible four neighbours")):
        low, high = min(b[key] for b in image), max(b[key] for b in image)
        assert f"{words} {low:.1f}-{high:.1f}" in docs, (key, low, high)
    records = [r for r in read_records(ROOT / "results" / "cpu_protocols" / "runs")
               if r["task"] == "image" and r.get("protocol") == "mlm"]

    def below(name):  # per seed: the neighbour mean's error - the record's final masked-pixel error
        return [image[r["seed"]]["neighbour_mae"] - r["pretraining"]["val_mae"] for r in records
                if r["attention"] == name]

    lru, s4d = below("lru"), below("s4d")
    assert len(lru) == len(s4d) == 3
    assert f"LRU {min(lru):.2f}-{max(lru):.2f} grey levels below it" in docs
    assert {f"{d:.1f}" for d in s4d} == {"1.8"} and "S4D below it by 1.8 (per-seed figures" in docs
