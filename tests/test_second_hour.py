"""The researcher's second hour (issue 23): a chart straight from a sweep, a sweep summary, a mixer in one file
anywhere, estimates that say how to go faster."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import README_SWEEP_GROUP, ROOT

pytestmark = pytest.mark.xdist_group(README_SWEEP_GROUP)  # xdist: one worker makes the sweeps once


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "LRA_RESULTS_DIR": str(root / "runs"), "LRA_CACHE_DIR": str(root / "cache"),
            "LRA_BENCH_DIR": str(root / "bench"), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", **extra}


def sh(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def swept(readme_sweep, tmp_path_factory):
    """A fresh user's sweep of 3 variants on smoke (the README's, run once for the suite: conftest.readme_sweep),
    then scripts/report.py, with no benchmark step."""
    assert readme_sweep.command == "python run.py -m attention=softmax,linear,local task=listops profile=smoke", (
        "the tests below read the README's smoke sweep of softmax, linear and local")
    root = tmp_path_factory.mktemp("fresh")
    shutil.copytree(readme_sweep.root / "runs", root / "runs")
    report = sh(["scripts/report.py", "--out", str(root / "report")], env_for(root), timeout=300)
    return root, readme_sweep.proc, report


@pytest.mark.slow
def test_a_sweep_then_the_report_draws_the_bubble_chart_without_a_benchmark(swept, readme_sweep):
    root, sweep, report = swept
    assert sweep.returncode == 0, (sweep.stdout + sweep.stderr)[-3000:]
    assert report.returncode == 0, report.stderr
    out = root / "report"
    assert (out / "bubble.png").stat().st_size > 10_000 and not (root / "bench").exists()
    assert not (readme_sweep.root / "bench").exists(), "the sweep itself wrote no benchmark cell"
    points = pd.read_csv(out / "bubble.csv")
    assert sorted(points.attention) == ["linear", "local", "softmax"]
    svg = (out / "bubble.svg").read_text()
    assert "the sweep's own training runs" in svg and "N=64" in svg and "profile smoke" in svg
    assert "bubble.png" in (out / "REPORT.md").read_text()
    assert "majority-class rate" in svg  # the chance line on the score axis


@pytest.mark.slow
def test_one_task_figures_keep_their_titles_inside(swept):
    import matplotlib.pyplot as plt

    from lra_bench.reports.accuracy_plots import accuracy_plots
    from lra_bench.reports.curves import val_curves
    from lra_bench.reports.table1 import load_runs

    runs = load_runs(swept[0] / "runs")
    for fig in (accuracy_plots(runs), val_curves(runs, profile="smoke")):
        fig.canvas.draw()
        box = fig._suptitle.get_window_extent()
        assert box.x0 >= 0 and box.x1 <= fig.bbox.width, "title cut at the figure's edges"
        for ax in fig.axes:
            assert ax.get_legend() is None, "no legend inside a panel, over the data"
        plt.close(fig)


@pytest.mark.slow
def test_a_sweep_ends_with_a_summary_of_every_job(swept, readme_sweep):
    root, sweep, _ = swept
    text = sweep.stderr.split("sweep summary")[1]
    assert text.startswith(" (3 jobs: 3 ok)"), text
    for num, attention in enumerate(["softmax", "linear", "local"]):
        line = next(x for x in text.splitlines() if x.startswith(f"{num} "))
        assert " ok " in line and f"attention={attention}" in line and "record.json" in line
        assert re.search(r" \d+\.\d\d ", line) and re.search(r" \d+:\d\d ", line)  # test acc, wall time
    (summary,) = readme_sweep.root.glob("cache/hydra/multirun/*/*/summary.txt")  # in the default sweep folder
    assert summary.read_text().startswith("sweep summary (3 jobs")


def test_missing_data_is_reported_as_missing_data_and_every_failure_is_named(tmp_path):
    proc = sh(["run.py", "-m", "attention=softmax,linear", "profile=smoke", "task.source=files",
               f"task.data_dir={tmp_path / 'nowhere'}"], env_for(tmp_path), timeout=300)
    assert proc.returncode == 1
    text = proc.stderr.split("sweep summary")[1]
    assert text.startswith(" (2 jobs: 2 missing data)"), text
    assert "invalid configuration" not in proc.stderr
    out = proc.stdout + proc.stderr
    assert out.count("does not exist or is not a folder") == 2 + 2 + 1  # each job's error once, the summary, Hydra
    for attention in ("softmax", "linear"):
        assert re.search(rf"job \d \(attention={attention} .*\): missing data: task.data_dir=.* does not exist", text)


# ------------------------------------------------------------------------------- a mixer in one file, anywhere

MIXER = '''"""Mean pooling as a token mixer: every token gets the mean of the real tokens, projected.

No paper: a baseline of our own, to see how far order-free mixing goes.
"""

import torch
from torch import Tensor

from lra_bench.attention import TokenMixer


class MeanPool(TokenMixer):
    """y_i = W mean_j(x_j) over the real tokens j, for every position i."""

    name = "meanpool"

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float, gain: float) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        self.gain = gain
        self.proj = torch.nn.Linear(dim, dim)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.check_input(x, mask)
        keep = torch.ones(x.shape[:2], dtype=torch.bool, device=x.device) if mask is None else mask  # (B, N)
        w = keep[..., None].to(x.dtype)  # (B, N, 1)
        mean = (x * w).sum(1, keepdim=True) / w.sum(1, keepdim=True).clamp(min=1.0)  # (B, 1, C)
        return self.out_drop(self.gain * self.proj(mean).expand_as(x))  # (B, N, C)
'''
CONFIG = """_target_: mypkg.mixers.MeanPool
_partial_: true
gain: 1.0
"""


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """A user's own package with one mixer file, and a config folder of theirs for Hydra's search path."""
    root = tmp_path_factory.mktemp("outside")
    (root / "mypkg").mkdir()
    (root / "mypkg" / "__init__.py").write_text("")
    (root / "mypkg" / "mixers.py").write_text(MIXER)
    (root / "conf" / "attention").mkdir(parents=True)
    (root / "conf" / "attention" / "meanpool.yaml").write_text(CONFIG)
    return root


def test_an_outside_mixer_passes_the_same_contract_checks(outside):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(outside), str(ROOT)]), "OMP_NUM_THREADS": "1",
           "LRA_ATTENTION_CONFIGS": str(outside / "conf" / "attention" / "meanpool.yaml")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "tests/test_attention_contract.py", "-k", "meanpool or registry"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    passed = int(re.search(r"(\d+) passed", proc.stdout).group(1))
    assert passed >= 8 and "failed" not in proc.stdout, proc.stdout[-2000:]


@pytest.mark.slow
def test_an_outside_mixer_runs_sweeps_and_reports(outside, tmp_path, report_script):
    env = env_for(tmp_path, PYTHONPATH=os.pathsep.join([str(outside), str(ROOT)]))
    search = f"hydra.searchpath=[file://{outside / 'conf'}]"
    sweep = sh(["run.py", "-m", "attention=meanpool,softmax", "profile=smoke", search,
                f"hydra.sweep.dir={tmp_path / 'multirun'}"], env)
    assert sweep.returncode == 0, (sweep.stdout + sweep.stderr)[-3000:]
    assert (tmp_path / "multirun" / "summary.txt").read_text().startswith("sweep summary (2 jobs: 2 ok)")
    one = sh(["run.py", "attention=fnet", "attention._target_=mypkg.mixers.MeanPool", "+attention.gain=2.0",
              "profile=smoke"], env)  # the class named on the command line alone
    assert one.returncode == 0, (one.stdout + one.stderr)[-3000:]
    report = report_script("--runs-dir", tmp_path / "runs", "--bench-dir", tmp_path / "bench", "--out",
                           tmp_path / "report")
    assert report.returncode == 0, report.stderr
    table = (tmp_path / "report" / "table1.md").read_text()
    assert "meanpool" in table and "softmax" in table
    assert "meanpool" in set(pd.read_csv(tmp_path / "report" / "bubble.csv").attention)
    typo = sh(["run.py", "attention=meanpol", "profile=smoke", search], env)
    assert typo.returncode == 2 and "did you mean attention=meanpool?" in typo.stderr


def test_a_class_without_its_own_name_is_refused_with_the_fix(outside, tmp_path):
    env = env_for(tmp_path, PYTHONPATH=os.pathsep.join([str(outside), str(ROOT)]))
    (outside / "mypkg" / "nameless.py").write_text(
        "from mypkg.mixers import MeanPool\n\n\nclass Copy(MeanPool):\n    pass\n")
    proc = sh(["run.py", "attention=meanpool", "attention._target_=mypkg.nameless.Copy", "profile=smoke",
               f"hydra.searchpath=[file://{outside / 'conf'}]"], env, timeout=300)
    assert proc.returncode == 2 and 'has no `name` of its own: give the class one, e.g. name = "copy"' in proc.stderr
    proc = sh(["run.py", "attention._target_=collections.OrderedDict", "profile=smoke"], env, timeout=300)
    assert proc.returncode == 2 and "is not a subclass of lra_bench.attention.base.TokenMixer" in proc.stderr


ONE_FILE = MIXER.replace("gain: float)", "gain: float = 1.0)")  # the same class, its knob with a default


@pytest.mark.slow
def test_a_mixer_in_one_file_needs_no_config(tmp_path):
    """LRA_MIXERS=file.py: attention=NAME with the knobs' defaults from the signature, in runs, sweeps and checks."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "my_mixer.py").write_text(ONE_FILE)
    env = env_for(tmp_path, LRA_MIXERS=str(tmp_path / "mine" / "my_mixer.py"))
    sweep = sh(["run.py", "-m", "attention=meanpool,softmax", "profile=smoke", "trainer.max_steps=4",
                "trainer.eval_every=2", f"hydra.sweep.dir={tmp_path / 'multirun'}"], env)
    assert sweep.returncode == 0, (sweep.stdout + sweep.stderr)[-3000:]  # each job's process imports the file too
    one = sh(["run.py", "attention=meanpool", "attention.gain=2.0", "profile=smoke", "trainer.max_steps=4",
              "trainer.eval_every=2"], env)
    assert one.returncode == 0, (one.stdout + one.stderr)[-3000:]
    from lra_bench.store.records import read_records

    mine = sorted((r["config"]["attention"] for r in read_records(tmp_path / "runs") if r["attention"] == "meanpool"),
                  key=lambda a: a["gain"])
    assert mine == [{"_target_": "my_mixer.MeanPool", "_partial_": True, "gain": 1.0},
                    {"_target_": "my_mixer.MeanPool", "_partial_": True, "gain": 2.0}]
    typo = sh(["run.py", "attention=meanpol", "profile=smoke"], env)
    assert typo.returncode == 2 and "did you mean attention=meanpool?" in typo.stderr
    knob = sh(["run.py", "attention=meanpool", "attention.gian=2", "profile=smoke"], env)
    assert knob.returncode == 2 and "did you mean attention.gain=2?" in knob.stderr
    (tmp_path / "mine" / "required.py").write_text(MIXER.replace('"meanpool"', '"meanpool_req"'))
    required = sh(["run.py", "attention=meanpool_req", "profile=smoke"],
                  {**env, "LRA_MIXERS": str(tmp_path / "mine" / "required.py")})
    assert required.returncode == 2 and "attention.gain has no value" in required.stderr, required.stderr[-2000:]
    missing = sh(["run.py", "attention=meanpool"], {**env, "LRA_MIXERS": str(tmp_path / "nosuch.py")})
    assert missing.returncode == 2 and "LRA_MIXERS=" in missing.stderr and "no such file" in missing.stderr


# ----------------------------------------------------------------------------------------- estimates that help


def test_a_long_run_is_told_how_to_be_shorter():
    from lra_bench.infra.progress import training_advice

    assert training_advice(remaining_steps=1000, steps_per_s=10.0) is None  # 100 s
    advice = training_advice(remaining_steps=7_500, steps_per_s=2.0, profile="cpu")  # 1:02:30
    assert advice.startswith("training needs about 1:02:30 more at 2.00 steps/s")
    assert "profile=quick" in advice and "trainer.max_steps=1800 (about 15 minutes" in advice
    on_quick = training_advice(remaining_steps=7_500, steps_per_s=2.0, profile="quick")
    assert "profile=smoke" in on_quick and "profile=quick" not in on_quick  # never the profile in use
    assert "profile=" not in training_advice(remaining_steps=7_500, steps_per_s=2.0, profile="smoke")
    assert "profile=cpu" in training_advice(remaining_steps=7_500, steps_per_s=2.0, profile="s4")


def test_the_training_bar_reads_steps_per_second_also_below_one():
    from tqdm import tqdm

    from lra_bench.infra.progress import TRAIN_FORMAT

    slow = tqdm.format_meter(n=2, total=100, elapsed=6.1, unit=" steps", bar_format=TRAIN_FORMAT, prefix="train")
    assert " 0.33 steps/s |" in slow and "s/ steps" not in slow  # not "3.05s/ steps"
    fast = tqdm.format_meter(n=50, total=100, elapsed=2.0, unit=" steps", bar_format=TRAIN_FORMAT, prefix="train")
    assert " 25.00 steps/s |" in fast


def test_generation_logs_progress_and_warns_when_it_will_be_long(monkeypatch, caplog):
    import logging

    from lra_bench.infra import progress

    now = iter(range(0, 10_000, 100))  # every item takes 100 s
    monkeypatch.setattr(progress.time, "monotonic", lambda: float(next(now)))
    monkeypatch.setenv(progress.PROGRESS_ENV, "0")  # a log, not a terminal
    caplog.set_level(logging.INFO, logger="lra_bench")
    assert list(progress.tracked(range(20), 20, "generate x", "batch", shorten="use fewer")) == list(range(20))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["generate x: about 31:40 left at the speed of the first 1 batch(s) here; use fewer"]
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert lines[0] == "generate x: 1/20 batch(s) (5%), 1:40 elapsed, ETA 31:40"
    assert lines[-1].startswith("generate x: 20/20 batch(s) (100%)") and len(lines) == 20
