"""scripts/land_records.py: a sweep's finished records copied into a curated folder, losing and faking nothing."""

from __future__ import annotations

import json
import subprocess
import sys

from lra_bench.store.land import land
from lra_bench.store.records import REQUIRED_FIELDS, read_records, write_record
from tests.conftest import ROOT


def record(seed: int, status: str = "ok", commit: str = "6ebdfac" + "0" * 33, **extra) -> dict:
    r = {k: None for k in REQUIRED_FIELDS}
    r.update({"run_id": f"r{seed}", "attention": "softmax", "task": "listops", "profile": "quick", "seed": seed,
              "config": {"trainer": {"max_steps": 10}}, "config_hash": f"{seed:010d}abcdef", "status": status,
              "message": None if status == "ok" else "boom", "test_acc": 0.4, "git_commit": commit,
              "wall_time_s": 120.0, "restarts": 0, "test_predictions": {"n": 3, "predicted": "AAEC"}})
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
    missing = subprocess.run([*script[:2], str(tmp_path / "nowhere"), str(dest)], capture_output=True, text=True)
    assert missing.returncode == 2 and "is not a folder of run records" in missing.stderr
