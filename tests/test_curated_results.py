"""Every curated table regenerates exactly from the raw records committed beside it, and a casual report run never
touches a curated folder."""

from __future__ import annotations

import pytest
from scipy import stats

from lra_bench.reports.significance import compare, sample
from lra_bench.store.records import read_records
from tests.conftest import ROOT

CURATED = sorted(p.parent for p in (ROOT / "results").glob("*/CURATED"))
TEXT_OUTPUTS = ("table1.md", "table1.csv", "bubble.csv", "table2_model.md", "table2_model.csv", "table1_mlm.md",
                "table1_matched.md", "protocols.md", "protocols.csv", "protocols_spread.csv")  # those present


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


def _held_out(folder, attention):
    """(the report's Sample of one mixer's committed held-out ListOps records, the records), seeds 0-2."""
    records = sorted((r for r in read_records(folder) if r["attention"] == attention), key=lambda r: r["seed"])
    assert [r["seed"] for r in records] == [0, 1, 2], f"{folder.name}/{attention}: expected seeds 0, 1, 2"
    cell = sample([100 * r["test_acc"] for r in records], [r.get("test_predictions") for r in records])
    assert cell.correct is not None, f"{folder.name}/{attention}: {cell.why_unpaired}"
    return cell, records


def test_the_held_out_listops_verdict_the_docs_quote_regenerates_from_its_records():
    """docs/benchmark.md judges the issue's "softmax - 1" ListOps bar on two held-out data draws by a rule committed
    before the second draw's runs (results/cpu_ssm/CURATED): the mean of the two draws' S4D - softmax gaps. The gaps,
    their mean and LRU's gap are recomputed here from the committed records and must be the figures the docs quote."""
    def signed(x: float) -> str:  # the docs' style: +0.89, −1.27 (a true minus sign)
        return f"{x:+.2f}".replace("-", "\u2212")

    docs = " ".join((ROOT / "docs" / "benchmark.md").read_text().split())  # line breaks do not matter
    gaps, quoted = {}, []
    draws = (("holdout", 1, 1000, ("s4d",)), ("holdout2", 2, 5000, ("s4d", "lru")))
    for folder, generator_seed, num_test, mixers in draws:
        path = ROOT / "results" / "cpu_ssm" / folder
        ref, ref_records = _held_out(path, "softmax")
        for mixer in mixers:
            cell, records = _held_out(path, mixer)
            for r in records + ref_records:
                gen = r["config"]["task"]["generator"]
                assert r["status"] == "ok" and not r["git_commit"].endswith("-dirty"), r["run_id"]
                assert (gen["seed"], gen["num_test"], r["test_examples"]) == (generator_seed, num_test, num_test)
            if mixer == "s4d":
                attention = records[0]["config"]["attention"]
                assert (attention["init"], attention["dt_min"], attention["dt_max"]) == ("inv", 0.01, 1.0)
            result = compare(cell, ref)  # (gap in points, se, df, method); None when on different test sets
            assert result is not None and result[3] == "paired", f"{folder}: {mixer} and softmax not paired"
            d, se, df, _ = result
            half = stats.t.ppf(0.975, df) * se
            gaps[folder, mixer] = d
            quoted.append(f"{signed(d)} [{signed(d - half)}, {signed(d + half)}]")
    held_out_mean = (gaps["holdout", "s4d"] + gaps["holdout2", "s4d"]) / 2  # the rule, on the unrounded gaps
    assert round(held_out_mean, 2) == -0.96
    # the gap with its paired 95 % interval, as the table quotes it (LRU's in the text, "+0.89 (paired [...])")
    assert quoted == ["−1.27 [−3.58, +1.05]", "−0.65 [−2.72, +1.41]", "+0.89 [−1.14, +2.91]"]
    for figure in (quoted[0], quoted[1], "**−0.96**", "+0.89 (paired [−1.14, +2.91])"):
        assert figure in docs, f"docs/benchmark.md no longer quotes {figure!r}"
    assert held_out_mean >= -1.0 and gaps["holdout2", "lru"] >= -1.0
