"""No silent wrong answers (issue 20): one test per finding of the hostile-user pass. Each output that used to come
out silently wrong or misfiled (a truncated cache served, a crashed sweep job without a record, a checkpoint that
fails forever, a record in the wrong folder, an overridden name, a crash between two renames, a checkpoint shared by
two results folders, a late raw traceback, exit code 143, leaked files, an arbitrary ``_target_``) must now be
right or fail clearly."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from lra_bench.config.plan import plan
from lra_bench.data import cache
from lra_bench.errors import ConfigError, DiskFullError
from lra_bench.reports.table1 import load_runs, table1
from lra_bench.run.runner import run
from lra_bench.store import records
from lra_bench.store.records import RECORD_NAME, REQUIRED_FIELDS, read_records, write_record
from lra_bench.train import checkpoint
from tests.conftest import ROOT, compose_run

SMOKE = ["profile=smoke", "trainer.max_steps=40", "trainer.eval_every=20", "trainer.checkpoint_every=10"]
SAME = ("status", "best_val_acc", "best_step", "test_acc", "evals", "config_hash", "dataset_fingerprint")


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "LRA_RESULTS_DIR": str(root / "runs"), "LRA_CACHE_DIR": str(root / "cache")}


def fake_record(**extra) -> dict:
    rec = {k: None for k in REQUIRED_FIELDS}
    rec.update(run_id="r", task="listops", attention="softmax", profile="p", seed=0, config_hash="h" * 64,
               status="ok", message="", config={}, test_acc=0.5, params=1, finished_at="2026-12-01T00:00:00")
    rec.update(extra)
    return rec


def fail_training_at(monkeypatch, call: int) -> None:
    """Every forward pass from the ``call``-th on raises: the run ends ``failed`` with its checkpoints kept."""
    import lra_bench.models.encoder as enc

    real, calls = enc.Classifier.forward, {"n": 0}

    def forward(self, input_ids):
        calls["n"] += 1
        if self.training and calls["n"] >= call:
            raise RuntimeError("injected failure")
        return real(self, input_ids)

    monkeypatch.setattr(enc.Classifier, "forward", forward)


def checkpoint_dirs(root: Path) -> list[Path]:
    return sorted({p.parent for p in (root / "checkpoints").rglob("ckpt*.json")})


# ------------------------------------------------------------------------------- 1: the cache verifies itself


def test_a_truncated_cache_or_generated_file_is_rebuilt_not_served(tmp_path, caplog):
    cfg = compose_run(["profile=smoke"], tmp_path)
    first = run(cfg)
    assert first["examples"]["train"] == 512
    (arrow,) = (tmp_path / "cache" / "listops" / "arrow").glob("*/train/data-*.arrow")
    import pyarrow as pa

    table = pa.ipc.open_stream(arrow.read_bytes()).read_all()
    with pa.OSFile(str(arrow), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table.slice(0, 300))  # what a cut at a record-batch boundary leaves: a valid, short file
    again = run(compose_run(["profile=smoke", "rerun=true"], tmp_path))
    assert again["examples"]["train"] == 512, "a truncated cache entry was served"
    assert again["test_acc"] == first["test_acc"] and not again["data_cache_reused"]
    assert str(arrow.parent) in caplog.text

    (tsv,) = (tmp_path / "cache" / "listops" / "generated").glob("*/basic_train.tsv")
    tsv.write_text("".join(tsv.read_text().splitlines(keepends=True)[:300]))  # `head -300`: cut at a line end
    caplog.clear()
    third = run(compose_run(["profile=smoke", "rerun=true"], tmp_path))
    assert third["examples"]["train"] == 512, "a truncated generated file was used"
    assert third["dataset_fingerprint"] == first["dataset_fingerprint"]
    assert str(tsv) in caplog.text


# ---------------------------------------------------------- 2: every job of a sweep that does not end ok is recorded


CRASH_LINEAR_JOB = """
import os, sys
if os.environ.get("LRA_BENCH_JOB_CHILD") and "attention=linear" in sys.argv:
    os._exit(1)  # a job that dies before it could write anything
"""


@pytest.mark.slow
def test_a_sweep_job_failing_outside_training_leaves_a_record_and_the_sweep_says_so(tmp_path):
    bad = tmp_path / "bad"  # release-format files whose train split is malformed: fails while loading data
    bad.mkdir()
    for split in ("train", "val", "test"):
        (bad / f"basic_{split}.tsv").write_text("Source\tTarget\n( MAX 1 2 )\t2\n" + ("oops\n" if split == "train"
                                                                                        else ""))
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(CRASH_LINEAR_JOB)
    env = {**env_for(tmp_path), "PYTHONPATH": f"{tmp_path / 'site'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    done = subprocess.run([sys.executable, "run.py", "-m", "attention=softmax,linear", *SMOKE, "task.source=files",
                           f"task.data_dir={bad}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode != 0, f"a sweep whose jobs failed exited 0: {out[-3000:]}"
    recs = {r["attention"]: r for r in read_records(tmp_path / "runs")}
    assert sorted(recs) == ["linear", "softmax"], out[-3000:]
    assert recs["softmax"]["status"] == "failed" and "basic_train.tsv:3" in recs["softmax"]["message"]
    assert recs["linear"]["status"] == "failed" and "exited with code 1" in recs["linear"]["message"]


# --------------------------------------------------------------- 3: an unusable checkpoint does not fail forever


def test_an_unusable_checkpoint_is_set_aside_and_the_run_starts_over(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="lra_bench")
    cfg = compose_run(SMOKE, tmp_path)
    fail_training_at(monkeypatch, 15)
    assert run(cfg)["status"] == "failed"
    monkeypatch.undo()
    (directory,) = checkpoint_dirs(tmp_path / "cache")
    state = checkpoint.load(directory)
    assert state["step"] == 10
    del state["model"]["encoder.embed.weight"]  # what a code change adding a parameter or buffer looks like
    # a valid checksum and this run's identity (issue 40: another config's or code's is refused before loading):
    checkpoint.save(directory, state, identity=checkpoint.stored_identity(directory))  # only the model fails
    rec = run(cfg)
    assert rec["status"] == "ok", rec["message"]
    assert "setting aside" in caplog.text and "Missing key" in caplog.text
    (aside,) = directory.parent.glob(f"{directory.name}.unusable-*")  # kept for inspection, named in the log
    assert str(aside) in caplog.text and list(aside.glob("ckpt*.pt"))
    reference = run(compose_run(SMOKE, tmp_path / "ref"))
    for key in SAME:
        assert rec[key] == reference[key], key

    meta_array = tmp_path / "array"
    checkpoint.save(meta_array, {"step": 1})
    for meta in meta_array.glob("ckpt*.json"):
        meta.write_text("[1, 2]")
    assert checkpoint.load(meta_array) is None  # skipped with a warning, no AttributeError
    assert "not a JSON object" in caplog.text


# ------------------------------------------------------------------- 4: a record counts only in its own folder


def test_a_record_counts_only_in_its_own_folder_and_the_report_names_what_it_drops(tmp_path, monkeypatch, caplog):
    import lra_bench.run.runner as runner

    cfg = compose_run(SMOKE, tmp_path)
    p = plan(cfg)
    linear = write_record(fake_record(attention="linear", task=p.task.name, profile=p.profile, seed=p.seed,
                                      config_hash="l" * 64), p.results_dir)
    p.run_dir.mkdir(parents=True)
    shutil.copy(linear, p.run_dir / RECORD_NAME)  # linear's record in the softmax run's folder
    monkeypatch.setattr(runner, "_run_locked", lambda *a, **k: {"status": "trained"})
    assert run(cfg)["status"] == "trained", "a record of another run made this one skip"
    seed5 = write_record(fake_record(attention="softmax", task=p.task.name, profile=p.profile, seed=0,
                                     config_hash="5" * 64), tmp_path / "other")
    moved = json.loads(seed5.read_text())
    moved["seed"] = 5
    moved["checksum"] = records.checksum(moved)
    seed5.write_text(json.dumps(moved))  # a valid record claiming seed 5 in the seed-0 folder
    caplog.clear()
    assert [r["config_hash"] for r in read_records(tmp_path)] == ["l" * 64]  # the one in its own folder
    assert "does not match its folder" in caplog.text and str(p.run_dir) in caplog.text

    store = tmp_path / "two"
    write_record(fake_record(config_hash="a" * 64, test_acc=0.4, finished_at="2026-12-01T01:00:00"), store)
    newer = write_record(fake_record(config_hash="b" * 64, test_acc=0.6, finished_at="2026-12-01T02:00:00",
                                     config={"trainer": {"max_steps": 60}}), store)
    table, md = table1(load_runs(store))  # issue 40: one configuration per cell, the others listed below it
    assert table.loc[0, "listops_mean"] == pytest.approx(60.0) and table.loc[0, "listops_n"] == 1
    assert "**Left out**" in md and "aaaaaaaaaa" in md, "the dropped config must be named"
    assert newer.exists()


# ------------------------------------------------------------------- 5: names come from the composed groups


def test_a_misspelt_top_level_key_fails_instead_of_training_the_defaults(tmp_path):
    """'+trainr.max_steps=4' (or 'trainr:' in a YAML file of one's own) added a section nothing reads: the run trained
    the default budget under a new config hash. Now it is refused, with the section it was meant for."""
    with pytest.raises(ConfigError, match="unknown top-level config key 'trainr': did you mean trainer"):
        plan(compose_run(["profile=smoke", "+trainr.max_steps=4"], tmp_path))
    with pytest.raises(ConfigError, match="unknown top-level config key 'foo'"):
        plan(compose_run(["profile=smoke", "+foo=1"], tmp_path))
    assert plan(compose_run(["profile=smoke", "rerun=true"], tmp_path)).rerun  # the known ones still compose


def test_task_and_profile_names_cannot_be_overridden_and_paths_stay_inside(tmp_path):
    with pytest.raises(ConfigError, match=r"task.name.*task=text"):
        plan(compose_run(["profile=smoke", "task.name=text"], tmp_path))
    with pytest.raises(ConfigError, match="profile.name"):
        plan(compose_run(["profile=smoke", "profile.name=../../../../tmp/x"], tmp_path))
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose("run", [f"paths.results_dir={tmp_path}", "profile=smoke", "profile.name=cpu"],
                      return_hydra_config=True)  # as run.py sees it: Hydra knows the composed choices
    HydraConfig.instance().set_config(cfg)
    try:
        with pytest.raises(ConfigError, match=r"profile.name='cpu' is not the composed profile \(smoke\)"):
            plan(cfg)  # a smoke run filed as cpu
    finally:
        HydraConfig.instance().cfg = None
    with pytest.raises(ValueError, match="inside"):
        write_record(fake_record(profile="../../../../escaped"), tmp_path / "runs")
    assert not list(tmp_path.parent.rglob("escaped*"))


# ---------------------------------------------------------------- 6: a kill at any rename of a checkpoint save


class Killed(BaseException):
    """Stands for SIGKILL inside ``checkpoint.save``: nothing after it runs (no clean-up either)."""


def test_a_kill_at_every_step_of_a_checkpoint_save_leaves_one_to_resume(tmp_path, monkeypatch):
    real_replace = os.replace
    for kill_at in range(6):
        directory = tmp_path / f"kill{kill_at}"
        checkpoint.save(directory, {"step": 1, "x": torch.ones(2)})
        checkpoint.save(directory, {"step": 2, "x": torch.ones(2) * 2})
        calls = {"n": 0}

        def replace(src, dst, _kill_at=kill_at, _calls=calls):
            if _calls["n"] == _kill_at:
                raise Killed
            _calls["n"] += 1
            return real_replace(src, dst)

        monkeypatch.setattr(os, "replace", replace)
        try:
            checkpoint.save(directory, {"step": 3, "x": torch.ones(2) * 3})
        except Killed:
            pass
        monkeypatch.setattr(os, "replace", real_replace)
        state = checkpoint.load(directory)
        assert state is not None and state["step"] >= 2, f"kill before rename {kill_at}: nothing to resume"
        assert torch.equal(state["x"], torch.ones(2) * state["step"])


# ------------------------------------------------------------- 7: a checkpoint belongs to one results folder


def test_two_results_folders_never_share_a_checkpoint(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="lra_bench")
    shared_cache = str(tmp_path / "cache")
    first, second = compose_run(SMOKE, tmp_path / "a"), compose_run(SMOKE, tmp_path / "b")
    first.paths.cache_dir = second.paths.cache_dir = shared_cache
    fail_training_at(monkeypatch, 15)
    assert run(first)["status"] == "failed"  # its checkpoint at step 10 stays for its own rerun
    monkeypatch.undo()
    caplog.clear()
    rec = run(second)
    assert rec["status"] == "ok" and "resuming from" not in caplog.text, "resumed another folder's run"
    assert run(first)["status"] == "ok" and "resuming from" in caplog.text


# --------------------------------------------------------------------------- 8: early, clear errors


def test_bad_values_and_broken_cache_files_fail_early_naming_the_key_or_file(tmp_path, monkeypatch, caplog):
    for override, key in (("model.dropout=1.5", "model.dropout"), ("trainer.lr=nan", "trainer.lr"),
                          ("trainer.lr=inf", "trainer.lr"), ("trainer.weight_decay=nan", "trainer.weight_decay")):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            plan(compose_run(["profile=smoke", override], tmp_path))

    def build():
        x = np.arange(12, dtype=np.uint8).reshape(4, 3)
        return {s: (x, np.arange(4)) for s in ("train", "val", "test")}, {"fingerprint": "f"}

    from datasets import Dataset

    def full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Dataset, "save_to_disk", full)
    with pytest.raises(DiskFullError, match=f"no space left on {tmp_path / 'c' / 'k'}"):
        cache.load_or_build(tmp_path / "c", "k", {"a": 1}, build)
    monkeypatch.undo()
    entry = cache.load_or_build(tmp_path / "c", "k", {"a": 1}, build).path
    (entry / cache.META).write_text('{"splits": {"tra')  # truncated meta.json
    again = cache.load_or_build(tmp_path / "c", "k", {"a": 1}, build)
    assert not again.reused and str(entry / cache.META) in caplog.text
    assert again.inputs["train"].tolist() == build()[0]["train"][0].tolist()


# ------------------------------------------------------------------ 9: SIGTERM in the first seconds is a requeue


@pytest.mark.slow
@pytest.mark.parametrize("sweep", [False, True])
def test_sigterm_while_starting_exits_for_requeue(tmp_path, sweep):
    args = ["run.py", *(["-m", "attention=softmax,linear"] if sweep else []), *SMOKE]
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env_for(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)  # imports, config composition, torch: before any job or run has started
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 75, out[-2000:]
    assert "rerun the same" in out
    assert not list((tmp_path / "runs").rglob(RECORD_NAME))


# a __del__ that gets the signal while run.py imports hydra: Python swallows the handler's SystemExit there
SWALLOWED_SIGTERM = """
import os, runpy, signal, sys

class Bomb:
    def __del__(self):
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(100_000):  # the handler runs here, inside __del__
            pass

class OnHydraImport:
    def find_spec(self, name, path=None, target=None):
        if name == "hydra":
            sys.meta_path.remove(self)
            Bomb()  # dropped at once: its __del__ runs now, after run.py installed its handlers
        return None

sys.meta_path.insert(0, OnHydraImport())
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""


@pytest.mark.slow
@pytest.mark.parametrize("sweep", [False, True])
def test_sigterm_whose_exit_python_swallowed_still_stops_before_any_run(tmp_path, sweep):
    args = [*(["-m", "attention=softmax,linear"] if sweep else []), *SMOKE]
    out = subprocess.run([sys.executable, "-c", SWALLOWED_SIGTERM, *args], cwd=ROOT, env=env_for(tmp_path),
                         capture_output=True, text=True, timeout=300)
    assert "Exception ignored" in out.stderr and "SystemExit: 75" in out.stderr, out.stderr[-3000:]  # swallowed
    assert out.returncode == 75, out.stderr[-3000:]
    assert "rerun the same" in out.stderr
    assert not list((tmp_path / "runs").rglob(RECORD_NAME))


# SIGTERM while Hydra composes a config (the first composition: run.py's check of the overrides). Raised there, the
# handler's SystemExit left Hydra half-way: seen in CI as SIGABRT (-6), and here as exit 1 ("'NoneType' object has
# no attribute '_invalidate_flags_cache'"). The handler now waits for the composition to return, then stops.
SIGTERM_IN_COMPOSE = """
import os, runpy, signal, sys
from hydra._internal import config_loader_impl

original = config_loader_impl.ConfigLoaderImpl._compose_config_from_defaults_list
sent = []

def composing(self, *args, **kwargs):
    out = original(self, *args, **kwargs)
    if not sent:
        sent.append(True)
        os.kill(os.getpid(), signal.SIGTERM)  # inside Hydra's code: its handler runs here
        for _ in range(100_000):
            pass
        print("composition returned", file=sys.stderr, flush=True)
    return out

config_loader_impl.ConfigLoaderImpl._compose_config_from_defaults_list = composing
sys.argv = ["run.py", *sys.argv[1:]]
runpy.run_path("run.py", run_name="__main__")
"""


@pytest.mark.slow
@pytest.mark.parametrize("sweep", [False, True])
def test_sigterm_while_hydra_composes_waits_for_the_composition_then_exits_for_requeue(tmp_path, sweep):
    args = [*(["-m", "attention=softmax,linear"] if sweep else []), *SMOKE]
    out = subprocess.run([sys.executable, "-c", SIGTERM_IN_COMPOSE, *args], cwd=ROOT, env=env_for(tmp_path),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 75, out.stderr[-3000:]
    assert "composition returned" in out.stderr, out.stderr[-3000:]  # not raised inside Hydra's code
    assert out.stderr.count("preempted: SIGTERM while starting") == 1 and "Traceback" not in out.stderr
    assert not list((tmp_path / "runs").rglob(RECORD_NAME))


# --------------------------------------------------------------------------- 10: nothing leaks after a kill


def test_leftovers_of_a_kill_after_the_record_are_cleared_and_rerun_trains_afresh(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="lra_bench")
    cfg = compose_run(SMOKE, tmp_path)
    monkeypatch.setattr(checkpoint, "clear", lambda directory: None)  # killed after the record, before clean-up
    first = run(cfg)
    monkeypatch.undo()
    assert checkpoint_dirs(tmp_path / "cache")
    folder = plan(cfg).run_dir
    (folder / ".record.json.killed.tmp").write_text('{"half": ')  # a record write killed half-way
    caplog.clear()
    again = run(compose_run([*SMOKE, "rerun=true"], tmp_path))
    assert "resuming from" not in caplog.text, "rerun=true resumed the finished run's leftover checkpoint"
    assert again["throughput"]["timed_steps"] == first["throughput"]["timed_steps"] > 0
    assert again["wall_time_s"] != first["wall_time_s"]
    assert not checkpoint_dirs(tmp_path / "cache"), "checkpoints left after the record"
    assert not list(folder.rglob("*.tmp")), "a killed write's temporary file was left"


# --------------------------------------------------------------- 11: only the harness's own classes are built


class NotATask:
    """Takes the task section's keys, like any callable an override could name."""

    built = 0

    def __init__(self, name: str, source: str, data_dir: str | None, max_len: int, synthetic_sizes: list[int],
                 generator: dict) -> None:
        NotATask.built += 1


def test_task_target_must_be_a_task_class(tmp_path):
    for target in (f"{__name__}.NotATask", "subprocess.Popen", "os.system"):
        with pytest.raises(ConfigError, match=r"task\._target_.*listops.*pathfinder"):
            plan(compose_run(["profile=smoke", f"task._target_={target}"], tmp_path))
    assert NotATask.built == 0, "an arbitrary class named by task._target_ was called"
