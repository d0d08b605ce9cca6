"""Long recipes on small machines (issue 41): a run estimated (probe steps, before any data) to train longer than
``guard.max_hours`` does not start -- one line with the estimate, a smaller profile than its own and the steps that
fit, ``--force`` to go on --; the probe leaves the run bit-identical; a second Ctrl-C stops at once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from lra_bench.run import runner
from lra_bench.store import predictions
from lra_bench.store.records import read_records
from lra_bench.train import estimate
from tests.conftest import ROOT


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "LRA_RESULTS_DIR": str(root / "runs"), "LRA_CACHE_DIR": str(root / "cache"),
            "OMP_NUM_THREADS": "1", **extra}


def sh(root: Path, *args: str, timeout: float = 600, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *args], cwd=ROOT, env=env_for(root, **extra),
                          capture_output=True, text=True, timeout=timeout)


def test_a_run_over_the_guard_stops_before_its_data_and_says_what_to_run(tmp_path):
    over = sh(tmp_path, "task=listops", "profile=quick", "guard.max_hours=1e-6")
    assert over.returncode == 2, over.stderr[-2000:]
    line = over.stderr.strip().splitlines()[-1]
    assert line.startswith("error: this run would take about ") and "over guard.max_hours=1e-06" in line
    assert "profile=smoke (a smaller run)" in line and "profile=quick" not in line  # never the profile in use
    assert "trainer.max_steps=" in line and "add --force" in line and "Traceback" not in over.stderr
    assert not list(tmp_path.rglob("record.json"))  # no record: nothing started
    assert not (tmp_path / "cache" / "listops").exists() and "data listops" not in over.stdout  # no data either
    forced = sh(tmp_path, "task=listops", "profile=smoke", "guard.max_hours=1e-6", "--force",
                "trainer.max_steps=4", "trainer.eval_every=2")
    assert forced.returncode == 0, forced.stderr[-2000:]
    assert "estimated: about " in forced.stdout + forced.stderr


@pytest.mark.slow
def test_the_s4_recipe_on_a_cpu_stops_with_its_estimate_and_a_smaller_profile(tmp_path):
    proc = sh(tmp_path, "attention=s4d", "model=ssm", "profile=s4", "task=pathfinder", "trainer.device=cpu")
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip().splitlines()[-1]
    assert "this run would take about " in line and " h (" in line and "days) of training (500000 steps" in line
    assert "profile=cpu (a smaller run)" in line and "a GPU (trainer.device=cuda)" in line
    assert not (tmp_path / "cache" / "pathfinder").exists()  # 200,000 images were not generated first


def test_the_probe_leaves_the_run_bit_identical(smoke_cfg, monkeypatch):
    with_probe = runner.run(smoke_cfg("trainer.max_steps=6", "trainer.eval_every=3"))
    assert with_probe["status"] == "ok"
    calls = []
    monkeypatch.setattr(estimate, "estimate_training", lambda *a: calls.append(a) or estimate.Estimate(0.0, 0.0,
                                                                                                   (0.0, 0.0), 6))
    without = runner.run(smoke_cfg("trainer.max_steps=6", "trainer.eval_every=3", "rerun=true"))
    assert calls  # the second run skipped the probe
    for key in ("evals", "test_acc", "best_val_acc", predictions.FIELD):
        assert with_probe[key] == without[key], key


def test_the_estimate_extrapolates_fixed_and_per_example_cost(monkeypatch):
    monkeypatch.setattr(estimate, "probe_step_seconds", lambda *a: [1.0, 1.5])  # 1 s fixed... 0.5 s per example
    settings = type("S", (), {"batch_size": 32})()
    e = estimate.estimate_training(None, None, settings, None, steps=100)
    assert e.step_s == pytest.approx(1.0 + 0.5 * 31) and e.train_s == pytest.approx(100 * 16.5)
    monkeypatch.setattr(estimate, "probe_step_seconds", lambda *a: [1.2, 1.0])  # noise: no negative per-example cost
    assert estimate.estimate_training(None, None, settings, None, steps=1).step_s == pytest.approx(1.2)


SLOW = '''"""A mixer that blocks in training from its third call on (a long step). No paper: a test."""
import os
import time
from pathlib import Path

from torch import Tensor

from lra_bench.attention import TokenMixer


class Slow(TokenMixer):
    """Identity; in training with $SLOW_MARKER set, from its fifth forward on (the probe before training runs a copy
    three times), writes it and sleeps (a long step)."""

    name = "slowstep"

    def __init__(self, dim: int, num_heads: int, seq_len: int, dropout: float) -> None:
        super().__init__(dim, num_heads, seq_len, dropout)
        self.calls = 0

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        self.check_input(x, mask)
        if self.training and os.environ.get("SLOW_MARKER"):
            self.calls += 1
            if self.calls >= 5:
                Path(os.environ["SLOW_MARKER"]).write_text(str(self.calls))
                time.sleep(600)
        return self.out_drop(x)
'''


@pytest.mark.slow
def test_a_second_ctrl_c_stops_at_once_and_the_last_checkpoint_resumes(tmp_path):
    (tmp_path / "slow_mixer.py").write_text(SLOW)
    marker = tmp_path / "in_a_long_step"
    args = ["attention=slowstep", "profile=smoke", "trainer.max_steps=6", "trainer.eval_every=3",
            "trainer.checkpoint_every=1"]
    env = env_for(tmp_path, LRA_MIXERS=str(tmp_path / "slow_mixer.py"))
    proc = subprocess.Popen([sys.executable, "run.py", *args], cwd=ROOT, env={**env, "SLOW_MARKER": str(marker)},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[tuple[float, str]] = []  # (time.monotonic() when read, line)
    reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), ln) for ln in proc.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + 300
    while not marker.exists():  # the event: training is inside its fifth step (steps 1-4 are checkpointed)
        assert proc.poll() is None and time.monotonic() < deadline, "".join(ln for _, ln in lines)[-2000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # the first: stop at the next step boundary (which would be 10 minutes away)
    time.sleep(runner.SAME_CTRL_C_S + 0.5)  # a second press, not the same one delivered twice
    pressed = time.monotonic()
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=120) == 130
    reader.join(timeout=60)
    out = "".join(ln for _, ln in lines)
    stopped = next(t for t, ln in lines if "received SIGINT again: stopping now" in ln)
    assert stopped - pressed < 5, "the second Ctrl-C did not stop the run at once"  # not 10 minutes later
    assert "interrupted twice during training: stopped at once, without a new checkpoint" in out
    assert "Traceback" not in out and not list((tmp_path / "runs").rglob("record.json"))
    again = subprocess.run([sys.executable, "run.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=300)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "resum" in (again.stdout + again.stderr).lower()  # from the last checkpoint, step 4
    (record,) = read_records(tmp_path / "runs")
    assert record["restarts"] == 1
