"""The result record: every field, atomic writes, nothing half-written."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from lra_bench.run.runner import run
from lra_bench.store import files, predictions
from lra_bench.store.files import write_json_atomic
from lra_bench.store.records import REQUIRED_FIELDS, read_records, write_record


def test_smoke_run_writes_one_complete_record(smoke_cfg, tmp_path):
    record = run(smoke_cfg())
    files = list((tmp_path / "runs").rglob("*"))
    paths = [p for p in files if p.is_file() and p.name != "run.lock"]  # the lock stays (infra/runlock.py)
    assert len(paths) == 1 and paths[0].name == "record.json"
    on_disk = json.loads(paths[0].read_text())
    assert on_disk == json.loads(json.dumps(record))
    for key in REQUIRED_FIELDS:
        assert key in on_disk, key
    assert on_disk["status"] == "ok" and on_disk["attention"] == "softmax" and on_disk["task"] == "listops"
    assert on_disk["profile"] == "smoke" and on_disk["seed"] == 0
    assert 0.0 <= on_disk["test_acc"] <= 1.0 and 0.0 <= on_disk["best_val_acc"] <= 1.0
    assert on_disk["test_examples"] == 128 and on_disk["params"] > 0
    t = on_disk["throughput"]
    assert t["steps_per_s"] > 0 and t["examples_per_s"] == pytest.approx(t["steps_per_s"] * t["batch_size"])
    assert t["timed_steps"] == on_disk["steps"] - t["warmup_steps_excluded"]
    assert on_disk["memory"]["peak_bytes"] > 0 and on_disk["memory"]["kind"] == "cpu_peak_rss"
    assert len(on_disk["config_hash"]) == 64 and len(on_disk["dataset_fingerprint"]) == 64
    assert on_disk["torch_version"] and on_disk["device"] == "cpu"
    assert on_disk["config"]["attention"]["_target_"].endswith("SoftmaxAttention")
    assert paths[0].parent.parent.name == "softmax" and paths[0].parent.name.startswith("smoke-seed0-")
    predicted, correct = predictions.decode(on_disk[predictions.FIELD])  # under the checksum like every field
    assert len(predicted) == len(correct) == 128 and correct.mean() == on_disk["test_acc"]
    assert len(on_disk[predictions.FIELD]["test_fingerprint"]) == 64


def test_predictions_round_trip_and_malformed_fields():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 10, 1001)
    predicted = np.where(rng.random(1001) < 0.4, labels, (labels + 1) % 10)
    field = predictions.encode(predicted, labels, "f" * 64)
    assert field["dtype"] == "uint8" and len(field["predicted"]) <= 4 * 1001 / 3 + 4  # one byte per example
    back, correct = predictions.decode(json.loads(json.dumps(field)))
    assert np.array_equal(back, predicted) and np.array_equal(correct, predicted == labels)
    assert predictions.decode(predictions.encode(np.array([300, 2]), np.array([300, 1]), "f"))[0].dtype == np.uint16
    fp = predictions.test_fingerprint(np.zeros((3, 4), np.uint8), labels[:3])
    assert fp != predictions.test_fingerprint(np.zeros((3, 4), np.uint8), labels[1:4])
    for bad in ({**field, "n": 1000}, {**field, "predicted": "not base64!"}, {k: field[k] for k in ("n", "dtype")}):
        with pytest.raises(ValueError, match="malformed test_predictions"):
            predictions.decode(bad)


def test_config_hash_ignores_paths_but_not_semantics(smoke_cfg, tmp_path):
    from lra_bench.config.sections import config_hash

    base = config_hash(smoke_cfg())
    assert config_hash(smoke_cfg(f"paths.results_dir={tmp_path}/elsewhere")) == base
    assert config_hash(smoke_cfg("rerun=true", "logger=wandb")) == base
    assert config_hash(smoke_cfg("seed=1")) != base
    assert config_hash(smoke_cfg("model.dim=64")) != base


def test_atomic_write_keeps_previous_file_when_interrupted(tmp_path, monkeypatch):
    target = tmp_path / "r" / "record.json"
    write_json_atomic(target, {"v": 1})

    def failing_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", failing_replace)
    with pytest.raises(OSError):
        write_json_atomic(target, {"v": 2})
    monkeypatch.undo()
    assert json.loads(target.read_text()) == {"v": 1}
    assert os.listdir(target.parent) == ["record.json"], "temporary file left behind"


def test_atomic_write_crash_during_dump_leaves_no_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "record.json"
    with pytest.raises(TypeError):  # not JSON-serialisable: fails mid-dump
        write_json_atomic(target, {"bad": object()})
    assert not target.exists() and os.listdir(tmp_path) == []


def test_record_validation_and_reading(tmp_path):
    with pytest.raises(ValueError, match="lacks fields"):
        write_record({"status": "ok"}, tmp_path)
    rec = {k: None for k in REQUIRED_FIELDS} | {
        "status": "weird", "task": "listops", "attention": "softmax", "profile": "smoke", "seed": 0,
        "config_hash": "a" * 64,
    }
    with pytest.raises(ValueError, match="status"):
        write_record(rec, tmp_path)
    write_record(rec | {"status": "failed", "message": "x"}, tmp_path)
    (tmp_path / "listops" / ".record.json.123.tmp").write_text("{partial")
    assert [r["status"] for r in read_records(tmp_path)] == ["failed"]


def test_training_failure_is_recorded_with_status(smoke_cfg, tmp_path, monkeypatch):
    import lra_bench.run.runner as runner

    def explode(*a, **k):
        raise RuntimeError("kaboom")

    monkeypatch.setattr(runner, "train", explode)
    record = run(smoke_cfg())
    assert record["status"] == "failed" and "kaboom" in record["message"] and record["test_acc"] is None
    assert len(read_records(tmp_path / "runs")) == 1

    def oom(*a, **k):
        raise torch_oom()

    def torch_oom():
        import torch

        return torch.OutOfMemoryError("CUDA out of memory")

    monkeypatch.setattr(runner, "train", oom)
    assert run(smoke_cfg("seed=1"))["status"] == "oom"
