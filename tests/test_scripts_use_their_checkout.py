"""Every script and tool imports the lra_bench of the checkout it sits in (scripts/_repo.py, tools/_repo.py), not
another one installed or earlier on the path: a benchmark run from a clean worktree must run that worktree's code, as
its records say."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SCRIPTS = sorted(p for folder in ("scripts", "tools") for p in (ROOT / folder).glob("*.py")
                 if p.name not in ("_repo.py", "architecture.py"))


def test_every_script_that_uses_the_package_imports_repo_first():
    for path in SCRIPTS:
        lines = path.read_text().splitlines()
        first = next(i for i, line in enumerate(lines) if line.startswith(("from lra_bench", "import lra_bench")))
        assert any(line.startswith("import _repo") for line in lines[:first]), f"{path.name}: import _repo first"


@pytest.mark.slow
def test_a_decoy_lra_bench_on_the_path_is_not_imported(tmp_path):
    decoy = tmp_path / "decoy" / "lra_bench"
    decoy.mkdir(parents=True)
    (decoy / "__init__.py").write_text("raise ImportError('the decoy lra_bench was imported')\n")
    env = {**os.environ, "PYTHONPATH": str(decoy.parent), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "peers"
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench_peers.py"), "--pairs", "flash", "--n", "64",
                           "--batch", "1", "--warmup", "0", "--repeats", "1", "--out", str(out)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads((out / "peers.json").read_text())["rows"]
    assert {r["status"] for r in rows} == {"ok"}, rows  # the cells are child processes: they too
    for script in ("scripts/plan.py", "scripts/report.py", "tools/check_flex_paths.py"):
        proc = subprocess.run([sys.executable, str(ROOT / script), "--help"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{script}: {proc.stderr[-500:]}"
