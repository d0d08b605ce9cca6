"""The researcher's second hour (issue 23): a chart straight from a sweep, a sweep summary, a mixer in one file
anywhere, estimates that say how to go faster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT

SWEEP = ["-m", "attention=softmax,linear,local", "profile=smoke"]


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "LRA_RESULTS_DIR": str(root / "runs"), "LRA_CACHE_DIR": str(root / "cache"),
            "LRA_BENCH_DIR": str(root / "bench"), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", **extra}


def sh(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A fresh user's sweep of 3 variants on smoke, then scripts/report.py, with no benchmark step."""
    root = tmp_path_factory.mktemp("fresh")
    env = env_for(root)
    sweep = sh(["run.py", *SWEEP, f"hydra.sweep.dir={root / 'multirun'}"], env)
    report = sh(["scripts/report.py", "--out", str(root / "report")], env, timeout=180)
    return root, sweep, report


@pytest.mark.slow
def test_a_sweep_then_the_report_draws_the_bubble_chart_without_a_benchmark(swept):
    root, sweep, report = swept
    assert sweep.returncode == 0, (sweep.stdout + sweep.stderr)[-3000:]
    assert report.returncode == 0, report.stderr
    out = root / "report"
    assert (out / "bubble.png").stat().st_size > 10_000 and not (root / "bench").exists()
    points = pd.read_csv(out / "bubble.csv")
    assert sorted(points.attention) == ["linear", "local", "softmax"]
    svg = (out / "bubble.svg").read_text()
    assert "the sweep's own training runs" in svg and "N=64" in svg and "profile smoke" in svg
    assert "bubble.png" in (out / "REPORT.md").read_text()
