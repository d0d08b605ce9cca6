"""Records made before a change of the config layout are carried across (lra_bench/store/migrate.py): after
``scripts/migrate_records.py`` the runner finds them as finished runs of the same experiment, and nothing committed
still names a moved class."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from lra_bench.config.plan import plan
from lra_bench.run.runner import finished_record, run
from lra_bench.store import migrate, predictions
from lra_bench.store.files import write_json_atomic
from lra_bench.store.records import RECORD_NAME, checksum, read_records, run_dir, semantic_hash
from tests.conftest import ROOT

OLD = {new: old for old, new in migrate.RENAMES.items()}


def as_made_before(record: dict, results) -> tuple[dict, object]:
    """The record as the code before the rename wrote it: the old ``_target_``, its hash and folder."""
    config = {**record["config"], "task": {**record["config"]["task"],
                                           "_target_": OLD[record["config"]["task"]["_target_"]]}}
    old = {**record, "config": config, "config_hash": semantic_hash(config)}
    folder = run_dir(results, old["task"], old["attention"], old["profile"], old["seed"], old["config_hash"])
    old["run_id"] = folder.name
    old["checksum"] = checksum(json.loads(json.dumps(old)))
    return old, folder


def test_a_record_made_before_the_move_is_found_as_finished_after_migration(smoke_cfg, tmp_path):
    cfg = smoke_cfg("trainer.max_steps=4", "trainer.eval_every=2")
    record = run(cfg)
    p = plan(cfg)
    old, folder = as_made_before(record, p.results_dir)
    write_json_atomic(folder / RECORD_NAME, old)
    (p.run_dir / RECORD_NAME).unlink()
    assert finished_record(p) is None  # before migration: a resumed sweep would run it again
    proc = subprocess.run([sys.executable, "scripts/migrate_records.py", str(p.results_dir)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "1 run folder(s) moved" in proc.stdout and not folder.exists()
    found = finished_record(p)
    assert found is not None
    same = ("test_acc", "best_val_acc", "evals", predictions.FIELD, "git_commit", "finished_at", "dataset_fingerprint")
    assert {k: found[k] for k in same} == {k: record[k] for k in same}
    again = subprocess.run([sys.executable, "scripts/migrate_records.py", str(p.results_dir)], cwd=ROOT,
                           capture_output=True, text=True, timeout=120)
    assert "0 run folder(s) moved" in again.stdout  # idempotent


def test_a_record_whose_hash_is_not_its_configs_is_left_as_it_was(tmp_path):
    config = {"task": {"_target_": next(iter(migrate.RENAMES)), "name": "listops"}, "seed": 0}
    record = {"task": "listops", "attention": "softmax", "profile": "smoke", "seed": 0, "config": config,
              "config_hash": "0" * 64, "run_id": "x"}
    record["checksum"] = checksum(record)
    folder = run_dir(tmp_path, "listops", "softmax", "smoke", 0, "0" * 64)
    write_json_atomic(folder / RECORD_NAME, record)
    moved, problems = migrate.migrate_tree(tmp_path)
    assert moved == [] and len(problems) == 1 and "not the hash of its config" in problems[0][1]
    assert (folder / RECORD_NAME).exists()


def test_no_committed_record_names_a_moved_class():
    renamed = [r["run_id"] for r in read_records(ROOT / "results")
               if r["config"]["task"].get("_target_") in migrate.RENAMES]
    assert not renamed, f"run scripts/migrate_records.py on the folders of: {renamed[:5]}"


@pytest.mark.slow
def test_every_committed_experiment_composes_to_its_records_hash(tmp_path):
    """Today's code gives every committed record's experiment the record's own config hash: a knob added since
    (records.NEUTRAL_DEFAULTS) or a moved class (migrate.RENAMES) changed no identity, so reports pair old records
    with new runs and a resumed sweep skips what is done. One record per folder, task, mixer, protocol and budget."""
    import json

    from omegaconf import OmegaConf

    from lra_bench.config.sections import config_hash
    from lra_bench.store.records import NEUTRAL_DEFAULTS
    from tests.conftest import compose_run

    seen, checked = set(), 0
    for path in sorted((ROOT / "results").rglob("record.json")):
        record = json.loads(path.read_text())
        config = record["config"]
        pretrain = (config.get("pretrain") or {}).get("name", "none")  # issue 44: the protocol's group
        key = (path.relative_to(ROOT / "results").parts[:2], record["task"], record["attention"], pretrain,
               config["trainer"]["max_steps"], config["model"].get("block"), config["model"].get("depth"))
        if key in seen:
            continue
        seen.add(key)
        overrides = [f"attention={record['attention']}", f"task={record['task']}", f"profile={record['profile']}",
                     f"seed={record['seed']}"] + (["model=ssm"] if config["model"].get("block") == "ssm" else []) + (
                         [f"pretrain={pretrain}"] if pretrain != "none" else [])
        composed = OmegaConf.to_container(compose_run(overrides, tmp_path), resolve=True)
        for section, values in (("attention", config["attention"]), ("task", config["task"]),
                                ("task.generator", config["task"].get("generator") or {}),
                                ("trainer", config["trainer"]),  # a compute-matched control's steps
                                ("model", config["model"])):  # a probe's depth, the s4 block's own sizes
            now = composed["task"].get("generator") or {} if section == "task.generator" else composed[section]
            overrides += [f"{section}.{k}={json.dumps(v)}" for k, v in values.items()
                          if not isinstance(v, dict) and now.get(k) != v]
        overrides += [f"~model.{k}" for k in composed["model"]  # e.g. model=ssm at quick drops the encoder's sizes
                      if k not in config["model"] and ("model", k) not in NEUTRAL_DEFAULTS]
        # a knob added since the record was made, which today's profile sets (quick's task.max_val_examples): the
        # record ran with its neutral value (records.NEUTRAL_DEFAULTS), which is what the record's hash leaves out
        overrides += [f"{section}.{k}={json.dumps(neutral)}" for (section, k), neutral in NEUTRAL_DEFAULTS.items()
                      if k not in config.get(section, {}) and composed.get(section, {}).get(k, neutral) != neutral]
        assert config_hash(compose_run(overrides, tmp_path)) == record["config_hash"], (path, overrides)
        checked += 1
    assert checked >= 100
