"""tools/bench_attention.py, the attention layers alone against softmax (results/cpu/attention_bench.csv): every
cell measured with the settings the cell needs, and a cell that fails stops the script with its reason instead of
leaving NaN ratios in the table."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest

from tests.conftest import ROOT

TINY = ["--lengths", "64", "--batch", "1", "--dim", "16", "--warmup", "0", "--repeats", "1"]


def bench(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, str(ROOT / "tools" / "bench_attention.py"), *TINY, *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_every_cell_is_measured_and_compared_with_softmax(tmp_path):
    done = bench(tmp_path, "--attentions", "linear", "--heads", "2", "--out", "out/cells.csv")
    assert done.returncode == 0, done.stderr[-3000:]
    cells = pd.read_csv(tmp_path / "out" / "cells.csv").set_index("attention")
    assert set(cells.index) == {"softmax", "linear"} and set(cells.status) == {"ok"}, cells  # softmax always added
    assert cells.loc["softmax", "time_vs_softmax"] == 1.0 and cells.loc["softmax", "memory_vs_softmax"] == 1.0
    assert cells.loc["linear", "median_s"] > 0 and cells.loc["linear", "time_vs_softmax"] > 0
    assert not cells.compiled.any(), "compile=auto compiles on CUDA only"
    assert "time_vs_softmax" in done.stdout  # the Markdown table


@pytest.mark.slow
def test_a_failed_cell_stops_the_script_with_its_reason(tmp_path):
    done = bench(tmp_path, "--attentions", "softmax", "--heads", "3", "--out", "out/cells.csv")  # 16 % 3 != 0
    assert done.returncode == 1, done.stderr[-3000:]
    assert "softmax N=64: failed:" in done.stderr and "1 of 1 cells failed" in done.stderr
    assert not (tmp_path / "out" / "cells.csv").exists(), "no table of NaN ratios"
