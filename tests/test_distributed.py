"""One run over 2 processes (torchrun, gloo on CPU) equals a single process with the same global batch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from lra_bench.run.runner import run
from lra_bench.store.records import read_records
from tests.conftest import ROOT, compose_run

ARGS = ["profile=smoke", "model.dropout=0.0", "attention.attn_dropout=0.0", "trainer.max_steps=20",
        "trainer.eval_every=10", "trainer.batch_size=16"]


def launch(tmp_path, name, prefix):
    env = {**os.environ, "LRA_RESULTS_DIR": str(tmp_path / name), "LRA_CACHE_DIR": str(tmp_path / "cache"),
           "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*prefix, "run.py", *ARGS], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    (record,) = read_records(tmp_path / name)
    return record


@pytest.mark.slow
def test_ddp_two_processes_match_single_process(tmp_path):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each rank (OMP_NUM_THREADS=1): the same float sums
    try:
        single = run(compose_run(ARGS, tmp_path))  # in this process: what `python run.py ARGS` runs
    finally:
        torch.set_num_threads(threads)
    ddp = launch(tmp_path, "ddp", [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                   "--nproc_per_node=2"])
    assert ddp["throughput"]["processes"] == 2 and single["throughput"]["processes"] == 1
    assert ddp["config_hash"] == single["config_hash"]  # same experiment, only the launch differs
    assert ddp["evals"] == single["evals"] and ddp["test_acc"] == single["test_acc"]
    assert ddp["best_step"] == single["best_step"]
    # examples/s counts the global batch (both ranks' halves)
    t = ddp["throughput"]
    assert t["examples_per_s"] == t["steps_per_s"] * 16
