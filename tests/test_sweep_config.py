"""Sweep presets and launchers compose; a joblib sweep runs jobs in parallel processes."""

from __future__ import annotations

import os
import subprocess
import sys

from lra_bench.attention import list_attentions
from lra_bench.records import read_records
from tests.conftest import ROOT


def cli(tmp_path, *args, timeout=300):
    env = {**os.environ, "LRA_RESULTS_DIR": str(tmp_path / "runs"), "LRA_CACHE_DIR": str(tmp_path / "cache")}
    return subprocess.run([sys.executable, "run.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_lra_preset_sweeps_every_attention_task_and_seed(tmp_path):
    proc = cli(tmp_path, "+sweep=lra", "--cfg", "hydra")
    assert proc.returncode == 0, proc.stderr
    assert "attention: glob(*)" in proc.stdout
    assert "task: listops,text,retrieval,image,pathfinder" in proc.stdout and "seed: 0,1,2" in proc.stdout
    assert "mode: MULTIRUN" in proc.stdout
    assert len(list_attentions()) >= 19


def test_slurm_launcher_config_composes(tmp_path):
    proc = cli(tmp_path, "+sweep=lra", "hydra/launcher=slurm", "hydra.launcher.partition=gpu", "--cfg", "hydra")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher" in out
    for line in ("partition: gpu", "gpus_per_node: 1", "max_num_timeout: 5", "timeout_min: 720"):
        assert line in out, line


def test_joblib_launcher_runs_jobs_in_parallel_processes(tmp_path):
    proc = cli(tmp_path, "-m", "attention=softmax,linear", "profile=smoke", "hydra/launcher=joblib",
               "hydra.launcher.n_jobs=2", "trainer.max_steps=6", "trainer.eval_every=3")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    recs = read_records(tmp_path / "runs")
    assert sorted(r["attention"] for r in recs) == ["linear", "softmax"]
    assert all(r["status"] == "ok" for r in recs)


def test_every_attention_builds_for_every_task_of_the_cpu_sweep(tmp_path):
    """scripts/sweep_cpu.sh runs every attention x task at profile=quick: each job must pass its config checks
    (a job failing validation would stop the multirun)."""
    from lra_bench.data.retrieval_fixture import write_fixture
    from lra_bench.runner import plan
    from tests.conftest import compose_run

    fixture = write_fixture(tmp_path / "aan", sizes=(4, 2, 2))
    script = (ROOT / "scripts" / "sweep_cpu.sh").read_text()
    for task in ("listops", "text", "retrieval", "image", "pathfinder"):
        assert f"task={task}" in script  # retrieval: in the comment that says how to add it
        extra = [f"task.data_dir={fixture}"] if task == "retrieval" else []
        for name in list_attentions():
            p = plan(compose_run([f"attention={name}", f"task={task}", "profile=quick", *extra], tmp_path))
            assert p.profile == "quick" and p.task.max_len in (128, 256), (task, name)
