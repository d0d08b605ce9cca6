"""The planning table (``scripts/plan.py``): whole-run wall time measured from full runs, projected from probes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from lra_bench.reports.planning import Protocol, planning_markdown, planning_table, whole_run_seconds
from lra_bench.run.runner import run

ROOT = Path(__file__).resolve().parents[1]


def probe_record(attention: str = "flash", steps: int = 100, max_steps: int = 100, **over) -> dict:
    record = {
        "status": "ok", "task": "listops", "attention": attention, "device": "H200", "compiled": True,
        "config": {"trainer": {"max_steps": max_steps, "eval_every": 50}}, "steps": steps,
        "throughput": {"steps_per_s": 10.0}, "wall_time_s": 25.0, "finished_at": "2026-12-01T00:00:00",
        "phases": {"data_s": 5.0, "train_loop_s": 17.0, "val_eval_s": 4.0, "val_evals": 2, "test_eval_s": 1.0},
    }
    return {**record, **over}


def test_projection_adds_every_phase_at_full_scale():
    # loop 17 s = 100 steps x 0.1 s + 2 evals x 2 s + 3 s fixed; other = 25 - 5 - 17 - 1 = 2 s
    seconds, how = whole_run_seconds(probe_record(), Protocol(max_steps=1000, eval_every=50))
    assert how == "projected from 100 steps"
    assert seconds == pytest.approx(5 + 3 + 1000 * 0.1 + 20 * 2 + 1 + 2)
    assert Protocol(1000, 50).evals == 20 and Protocol(1010, 50).evals == 21


def test_a_full_run_is_measured_and_preferred_over_a_probe():
    protocol = Protocol(max_steps=100, eval_every=50)
    full = probe_record(finished_at="2026-01-01T00:00:00")
    assert whole_run_seconds(full, protocol) == (25.0, "measured")
    newer_probe = probe_record(steps=20, max_steps=20, finished_at="2026-12-24T00:00:00")
    table = planning_table([full, newer_probe, probe_record("linformer", status="oom")], {"listops": protocol})
    assert table.to_dict("records")[0]["how"] == "measured" and len(table) == 1
    md = planning_markdown(table)
    assert re.search(r"\|\s*listops\s*\|\s*flash\s*\|", md) and "fits in one night" in md


def test_a_self_pretrained_run_is_not_a_measure_of_the_protocol_from_scratch():
    protocol = Protocol(max_steps=100, eval_every=50)
    pretrained = probe_record(finished_at="2026-12-24T00:00:00", wall_time_s=50.0)
    pretrained["config"] = {**pretrained["config"], "pretrain": {"name": "mlm", "max_steps": 100}}
    table = planning_table([probe_record(finished_at="2026-01-01T00:00:00"), pretrained], {"listops": protocol})
    assert table.to_dict("records")[0]["hours"] == pytest.approx(25.0 / 3600) and len(table) == 1


def test_tasks_that_need_a_cluster_are_named():
    table = planning_table([probe_record(a) for a in ("flash", "softmax", "bigbird")],
                           {"listops": Protocol(max_steps=200_000, eval_every=50)})
    assert (table.hours > 5).all()
    assert "needs 2 nights on one device, or a cluster (`hydra/launcher=slurm`)" in planning_markdown(table)


@pytest.mark.slow
def test_plan_script_from_a_real_probe(smoke_cfg, tmp_path):
    """A shortened smoke run records its phases; plan.py projects the smoke protocol from it."""
    record = run(smoke_cfg("trainer.max_steps=10", "trainer.eval_every=5"))
    ph = record["phases"]
    assert ph["val_evals"] == len(record["evals"]) == 2
    assert 0 < ph["val_eval_s"] < ph["train_loop_s"] and ph["test_eval_s"] > 0 and ph["data_s"] > 0
    assert ph["data_s"] + ph["train_loop_s"] + ph["test_eval_s"] <= record["wall_time_s"]
    out = tmp_path / "planning.md"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "plan.py"), "--runs-dir", str(tmp_path / "runs"),
                           "--profile", "smoke", "--out", str(out)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    text = out.read_text()
    assert re.search(r"\|\s*listops\s*\|\s*softmax\s*\|", text) and "projected from 10 steps" in text
    assert out.with_suffix(".csv").is_file()
