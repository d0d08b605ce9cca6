"""``tools/gpu_visit.sh``: one command per GPU visit; its stages, time limits and the one archive that comes back."""

from __future__ import annotations

import json
import os
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
