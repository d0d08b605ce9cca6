"""Every curated table regenerates exactly from the raw records committed beside it, and a casual report run never
touches a curated folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

CURATED = sorted(p.parent for p in (ROOT / "results").glob("*/CURATED"))
TEXT_OUTPUTS = ("table1.md", "table1.csv", "bubble.csv", "table2_model.md", "table2_model.csv")


def report(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "report.py"), *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("folder", CURATED, ids=[p.name for p in CURATED])
def test_curated_tables_regenerate_exactly_from_committed_records(folder, tmp_path):
    assert list((folder / "runs").rglob("record.json")), f"{folder}/runs holds no committed record"
    assert list((folder / "bench").rglob("*.json")), f"{folder}/bench holds no committed benchmark cell"
    done = report("--curated", folder.name, "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    compared = 0
    for name in TEXT_OUTPUTS:
        if (folder / name).exists():
            assert (tmp_path / name).read_text() == (folder / name).read_text(), f"{folder.name}/{name} is stale"
            compared += 1
    assert compared >= 3


def test_a_casual_report_never_overwrites_curated_results(tmp_path):
    folder = CURATED[0]
    before = {p: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    done = report("--out", str(folder))
    assert done.returncode == 2 and "holds curated results" in done.stderr
    assert {p: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    done = report("--runs-dir", str(tmp_path / "none"), "--bench-dir", str(tmp_path / "none"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "results" / "report" / "REPORT.md").exists(), "the default output is results/report/"
    assert "into results/report" in done.stdout
