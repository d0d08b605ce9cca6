"""Every curated table regenerates exactly from the raw records committed beside it, and a casual report run never
touches a curated folder."""

from __future__ import annotations

import pytest

from tests.conftest import ROOT

CURATED = sorted(p.parent for p in (ROOT / "results").glob("*/CURATED"))
TEXT_OUTPUTS = ("table1.md", "table1.csv", "bubble.csv", "table2_model.md", "table2_model.csv")


@pytest.mark.parametrize("folder", CURATED, ids=[p.name for p in CURATED])
def test_curated_tables_regenerate_exactly_from_committed_records(folder, tmp_path, report_script):
    assert list((folder / "runs").rglob("record.json")), f"{folder}/runs holds no committed record"
    assert list((folder / "bench").rglob("*.json")), f"{folder}/bench holds no committed benchmark cell"
    done = report_script("--curated", folder.name, "--out", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    compared = 0
    for name in TEXT_OUTPUTS:
        if (folder / name).exists():
            assert (tmp_path / name).read_text() == (folder / name).read_text(), f"{folder.name}/{name} is stale"
            compared += 1
    assert compared >= 3


def test_a_casual_report_never_overwrites_curated_results(tmp_path, report_script):
    folder = CURATED[0]
    before = {p: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    done = report_script("--out", folder)
    assert done.returncode == 2 and "holds curated results" in done.stderr
    assert {p: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    done = report_script("--runs-dir", tmp_path / "none", "--bench-dir", tmp_path / "none", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "results" / "report" / "REPORT.md").exists(), "the default output is results/report/"
    assert "into results/report" in done.stdout
