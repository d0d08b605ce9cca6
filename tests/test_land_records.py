"""scripts/land_records.py: a sweep's finished records copied into a curated folder, losing and faking nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from lra_bench.errors import ConfigError
from lra_bench.store import predictions
from lra_bench.store.land import land, summary
from lra_bench.store.records import REQUIRED_FIELDS, read_records, write_record
from tests.conftest import ROOT

PREDICTED = predictions.encode(np.array([0, 1, 2]), np.array([0, 1, 1]), "f" * 64)


def record(seed: int, status: str = "ok", commit: str = "6ebdfac" + "0" * 33, **extra) -> dict:
    r = {k: None for k in REQUIRED_FIELDS}
    r.update({"run_id": f"r{seed}", "attention": "softmax", "task": "listops", "profile": "quick", "seed": seed,
              "config": {"trainer": {"max_steps": 10}}, "config_hash": f"{seed:010d}abcdef", "status": status,
              "message": None if status == "ok" else "boom", "test_acc": 0.4, "git_commit": commit,
              "wall_time_s": 120.0, "restarts": 0, "test_predictions": PREDICTED})
    r.update(extra)
    return r


def test_fit_records_are_copied_once_and_unfit_or_conflicting_ones_never(tmp_path):
    src, dest = tmp_path / "scratch", tmp_path / "curated"
    for r in (record(0), record(1), record(2, status="failed"), record(3, commit="6ebdfac" + "0" * 33 + "-dirty"),
              record(4, test_predictions=None), record(5, commit="1234567" + "0" * 33)):
        write_record(r, src)
    write_record(record(1, test_acc=0.5), dest)  # a curated record of the same run that differs: kept
    dry = land(src, dest, commit="6ebdfac", dry_run=True)
    assert [r["seed"] for _, r in dry.added] == [0] and len(read_records(dest)) == 1  # nothing copied dry
    out = land(src, dest, commit="6ebdfac")
    assert [r["seed"] for _, r in out.added] == [0]
    assert [p.parent.name for p, _ in out.conflicts] == [f"quick-seed1-{1:010d}"]
    reasons = dict((p.parent.name.split("-")[1], why) for p, why in out.refused)
    assert "status 'failed'" in reasons["seed2"] and "uncommitted" in reasons["seed3"]
    assert "predictions" in reasons["seed4"] and "not at the sweep's commit" in reasons["seed5"]
    curated = {r["seed"]: r for r in read_records(dest)}
    assert sorted(curated) == [0, 1] and curated[1]["test_acc"] == 0.5  # the curated record was not overwritten
    again = land(src, dest, commit="6ebdfac")
    assert not again.added and len(again.present) == 1  # running it twice copies nothing the second time
    assert len(land(src, dest, commit="6ebdfac", allow_dirty=True).added) == 1  # seed 3, when CURATED explains it


def test_predictions_that_do_not_decode_and_loose_commits_are_refused(tmp_path):
    src, dest = tmp_path / "scratch", tmp_path / "curated"
    write_record(record(0, test_predictions={"n": 3, "predicted": "AAEC"}), src)  # no dtype, no correct bits
    write_record(record(1), src)
    out = land(src, dest, commit="6EBDFAC")  # upper case is the same commit
    assert [r["seed"] for _, r in out.added] == [1]
    assert [why for _, why in out.refused] == ["malformed test_predictions: 'dtype': the paired tests cannot use it"]
    for loose in ("", "6", "6ebdfa", "not-a-sha"):
        with pytest.raises(ConfigError, match="7 to 40 hex digits"):
            land(src, dest, commit=loose)


def test_a_dry_run_reports_what_the_copy_does_even_for_one_run_twice_in_the_source(tmp_path):
    """The same run in two scratch folders: the first copy lands, a second identical one is already there, a
    different one is a conflict -- dry or not."""
    src, dest = tmp_path / "scratch", tmp_path / "curated"
    write_record(record(0), src / "a")
    write_record(record(0), src / "b")
    write_record(record(0, test_acc=0.6), src / "c")
    for dry in (True, False):
        out = land(src, dest, commit="6ebdfac", dry_run=dry)
        assert (len(out.added), len(out.present), len(out.conflicts)) == (1, 1, 1), dry


def test_a_failed_copy_stops_and_is_reported_with_what_was_added(tmp_path):
    src = tmp_path / "scratch"
    write_record(record(0), src)
    (tmp_path / "curated").write_text("a file where the curated folder must be")
    out = land(src, tmp_path / "curated", commit="6ebdfac")
    assert out.error is not None and "could not be copied" in out.error and not out.added


def test_the_summary_counts_a_run_resumed_in_its_pretraining(tmp_path):
    src, dest = tmp_path / "scratch", tmp_path / "curated"
    write_record(record(0, pretraining={"restarts": 2}, phases={"data_s": 1.0, "pretrain_s": 200.0,
                                                                "pretrain_reused": False, "train_loop_s": 80.0}), src)
    (line,) = summary(land(src, dest, commit="6ebdfac"))
    assert line.endswith("seeds 0, 4.7-4.7 min per run; 1 resumed from a checkpoint")


def test_the_script_reports_and_fails_on_what_it_could_not_land(tmp_path):
    src, dest = tmp_path / "scratch", tmp_path / "curated"
    write_record(record(0, wall_time_s=90.0), src)
    write_record(record(1, restarts=1, wall_time_s=10.0,
                        phases={"data_s": 1.0, "train_loop_s": 170.0, "test_eval_s": 9.0}), src)
    script = [sys.executable, str(ROOT / "scripts" / "land_records.py"), str(src), str(dest), "--commit", "6ebdfac"]
    proc = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "added listops: 2 record(s), 1 mixer(s) (softmax), seeds 0, 1, 1.5-3.0 min per run; 1 resumed" in proc.stdout
    bad = json.loads(next(src.rglob("record.json")).read_text())
    bad["test_acc"] = 0.9  # edited by hand: its checksum no longer matches
    next(src.rglob("record.json")).write_text(json.dumps(bad))
    proc = subprocess.run(script, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1 and "unreadable" in proc.stderr and "1 already there" in proc.stdout
    missing = subprocess.run([*script[:2], str(tmp_path / "nowhere"), str(dest), "--commit", "6ebdfac"],
                             capture_output=True, text=True)
    assert missing.returncode == 2 and "is not a folder of run records" in missing.stderr
    no_commit = subprocess.run(script[:4], capture_output=True, text=True)
    assert no_commit.returncode == 2 and "--commit" in no_commit.stderr
    short = subprocess.run([*script[:5], "6eb"], capture_output=True, text=True)
    assert short.returncode == 2 and "7 to 40 hex digits" in short.stderr
    (tmp_path / "blocked").write_text("a file where the curated folder must be")
    failed = subprocess.run([*script[:3], str(tmp_path / "blocked"), *script[4:]], capture_output=True, text=True)
    assert failed.returncode == 1 and "copying stopped there" in failed.stderr
