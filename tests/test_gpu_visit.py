"""``tools/gpu_visit.sh``: one command per GPU visit; its stages, time limits and the one archive that comes back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile

import pytest

from tests.conftest import ROOT


@pytest.mark.slow
def test_visit_runs_its_stages_and_packs_one_archive(tmp_path):
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "STAGES": "peers bench listops nonsense",
           "PEERS_ARGS": "--pairs flash --n 128 --batch 1 --warmup 0 --repeats 1",
           "BENCH_VARIANTS": "linear", "BENCH_LENS": "64",
           "BENCH_ARGS": "bench.batch_size=1 bench.warmup=0 bench.repeats=1",
           "LISTOPS_VARIANTS": "linear softmax", "LISTOPS_ARGS": "profile=smoke trainer.max_steps=4",
           "LISTOPS_S": "31"}  # the second run finds too little time left and is not started
    proc = subprocess.run(["bash", str(ROOT / "tools" / "gpu_visit.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["summary.txt", "visit.tgz"]  # well inside the 8 files
    summary = (out / "summary.txt").read_text()
    for line in ("peers: exit 0", "bench: exit 0", "unknown stage nonsense", "finished"):
        assert line in summary, summary
    assert "listops-linear: exit " in summary  # 0, or 124 if a slow machine needed more than its 31 s
    assert "listops-softmax: not started, no time left" in summary
    with tarfile.open(out / "visit.tgz") as tar:
        names = tar.getnames()
        cells = [n for n in names if n.startswith("./bench/") and n.endswith(".json")]
        assert len(cells) == 1 and "./peers/peers.md" in names
        rows = json.load(tar.extractfile("./peers/peers.json"))["rows"]
    assert {r["status"] for r in rows} == {"ok"}


@pytest.mark.slow
def test_runs_stage_runs_a_file_of_runs_in_parallel_and_says_which_failed(tmp_path):
    jobs = tmp_path / "jobs.txt"
    jobs.write_text("# two runs and a typo\n\nattention=linear task=listops profile=smoke seed=0\n"
                    "attention=softmax task=listops profile=smoke seed=1\n"
                    "attention=softmax task=listops profile=smoke seed=2 trainer.no_such_key=1\n")
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "STAGES": "runs", "RUNS_FILE": str(jobs), "RUNS_PARALLEL": "2",
           "RUNS_ARGS": "trainer.max_steps=4 trainer.device=cpu", "VISIT_RUNS": str(tmp_path / "visit-runs")}
    proc = subprocess.run(["bash", str(ROOT / "tools" / "gpu_visit.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    summary = (out / "summary.txt").read_text()
    assert "runs: exit 0" in summary and "runs: 2 of 3 runs finished with exit 0" in summary, summary
    with tarfile.open(out / "visit.tgz") as tar:
        names = tar.getnames()
        lines = tar.extractfile("./runs.txt").read().decode().splitlines()
        records = [json.load(tar.extractfile(n)) for n in names if n.endswith("/record.json")]
    assert sorted(r["seed"] for r in records) == [0, 1] and {r["status"] for r in records} == {"ok"}
    assert {r["steps"] for r in records} == {4}  # RUNS_ARGS comes after the line's own overrides
    assert sorted(line.split(":")[0] for line in lines) == ["exit 0", "exit 0", "exit 2"]
    assert sum(n.startswith("./logs/") and n.endswith(".log") for n in names) == 3

    # the same command again (a still-warm machine): the finished runs are skipped, their records come back again
    shutil.rmtree(out)
    proc = subprocess.run(["bash", str(ROOT / "tools" / "gpu_visit.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    with tarfile.open(out / "visit.tgz") as tar:
        again = [json.load(tar.extractfile(n)) for n in tar.getnames() if n.endswith("/record.json")]
        logs = [tar.extractfile(n).read().decode() for n in tar.getnames() if n.endswith("seed=0.log")]
    assert sorted(r["checksum"] for r in again) == sorted(r["checksum"] for r in records)
    assert "finished record with status ok exists" in logs[0]
    # a fresh machine: the earlier visit's records, carried (RUNS_FROM), are skipped the same way
    carried = tmp_path / "carried"
    with tarfile.open(out / "visit.tgz") as tar:
        tar.extractall(carried, members=[m for m in tar.getmembers() if m.name.startswith("./runs/")],
                       filter="data")
    shutil.rmtree(out)
    fresh = {**env, "VISIT_RUNS": str(tmp_path / "fresh-runs"), "RUNS_FROM": str(carried / "runs")}
    proc = subprocess.run(["bash", str(ROOT / "tools" / "gpu_visit.sh")], cwd=ROOT, env=fresh, capture_output=True,
                          text=True, timeout=600)
    with tarfile.open(out / "visit.tgz") as tar:
        logs = [tar.extractfile(n).read().decode() for n in tar.getnames() if n.endswith("seed=1.log")]
    assert "finished record with status ok exists" in logs[0]

    jobs.write_text("attention=softmax task=listops profile=smoke seed=0 trainer.no_such_key=1\n")  # fails to prepare
    shutil.rmtree(out)
    proc = subprocess.run(["bash", str(ROOT / "tools" / "gpu_visit.sh")], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    summary = (out / "summary.txt").read_text()
    assert proc.returncode == 0 and "runs: 0 of 1 runs finished with exit 0" in summary, summary
