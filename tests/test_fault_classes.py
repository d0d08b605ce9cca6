"""The fault catalogue of issue 40 as the project's own tests: each case reproduces a fault of the second hostile
pass (it failed on 499046a) and checks the fix, which holds for the whole class -- every setting, every mixer, every
child process, every record. docs/reliability.md lists the cases and their outcomes; its last section is checked
against this file.

Classes: one validation at compose time (A), record identity in records and in the report (B), checkpoint identity
and reruns (C), the run-time mixer contract (D), sweeps (E), child processes (F), folders and files (G)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict, read_write

from lra_bench.attention import list_attentions
from lra_bench.attention.base import TokenMixer, get_attention_class
from lra_bench.checks import check_kwargs
from lra_bench.config.attention import ENCODER_SUPPLIED
from lra_bench.config.plan import TASK_SUPPLIED_TO_ENCODER, plan
from lra_bench.config.sections import group_options, resolve_class
from lra_bench.data.listops.generate import ListOpsSpec
from lra_bench.data.pathfinder.generate import PathfinderSpec
from lra_bench.data.task import Task
from lra_bench.errors import ConfigError, LRABenchError
from lra_bench.infra.loggers import LoggerSettings
from lra_bench.models.encoder import Encoder
from lra_bench.models.mega import SUPPLIED as MEGA_SUPPLIED
from lra_bench.models.mega import mega_classifier
from lra_bench.models.ssm import SSMEncoder
from lra_bench.reports.table1 import load_runs, table1
from lra_bench.run.runner import StopSignals, run
from lra_bench.store.records import REQUIRED_FIELDS, read_records, semantic_hash, write_record
from lra_bench.train import checkpoint
from lra_bench.train.estimate import GuardSettings
from lra_bench.train.loop import Preempted
from lra_bench.train.settings import PretrainSettings, TrainerSettings
from tests.conftest import CONFIGS, ROOT, compose_run

SMOKE = ["profile=smoke", "trainer.max_steps=40", "trainer.eval_every=20", "trainer.checkpoint_every=10"]
SAME = ("status", "best_val_acc", "best_step", "test_acc", "evals", "config_hash", "dataset_fingerprint",
        "test_predictions")
FAULT_MIXERS = "tests.helpers.fault_mixers"


def env_for(root: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "LRA_RESULTS_DIR": str(root / "runs"), "LRA_CACHE_DIR": str(root / "cache"),
            "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), **extra}


def run_py(root: Path, *args: str, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "run.py", *args], cwd=ROOT, env=kwargs.pop("env", env_for(root)),
                          capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.fixture
def fault_mixers():
    """The test doubles of tests/helpers/fault_mixers.py, taken out of the registry again afterwards."""
    import tests.helpers.fault_mixers as module

    yield module
    for name in module.NAMES:
        TokenMixer._registry.pop(name, None)


def mixer(cls_name: str) -> list[str]:
    """Overrides that put a test double in place of softmax (which brings an attn_dropout the doubles lack)."""
    return [f"attention._target_={FAULT_MIXERS}.{cls_name}", "~attention.attn_dropout"]


# --------------------------------------------------------------- A: one validation at compose time, every setting


def config_classes() -> list[tuple[str, type, tuple[str, ...], str]]:
    """(where, class, arguments the harness supplies, key prefix) of every class a config section builds: every
    registered mixer, the three model blocks, every task of configs/task, the generators, trainer, logger, guard and
    pretrain."""
    out = [(f"attention={n}", get_attention_class(n), ENCODER_SUPPLIED, "attention") for n in list_attentions()]
    out += [("model", block, TASK_SUPPLIED_TO_ENCODER, "model") for block in (Encoder, SSMEncoder)]
    out.append(("model", mega_classifier, MEGA_SUPPLIED, "model"))
    tasks = {resolve_class(_yaml(CONFIGS / "task" / f"{n}.yaml")["_target_"], Task, "task", [])
             for n in group_options("task")}
    out += [("task", cls, (), "task") for cls in sorted(tasks, key=lambda c: c.__name__)]
    out += [("task.generator", ListOpsSpec, (), "task.generator"), ("task.generator", PathfinderSpec, (),
                                                                      "task.generator"),
            ("trainer", TrainerSettings, (), "trainer"), ("logger", LoggerSettings, (), "logger"),
            ("guard", GuardSettings, (), "guard"), ("pretrain", PretrainSettings, (), "pretrain")]
    return out


def _yaml(path: Path) -> dict:
    from omegaconf import OmegaConf

    return OmegaConf.to_container(OmegaConf.load(path))


def settings(cls: type, supplied: tuple[str, ...]) -> dict[str, object]:
    import inspect

    from lra_bench.checks import _hints

    hints = _hints(cls)
    return {k: hints.get(k) for k in inspect.signature(cls).parameters if k not in ("self", *supplied)}


def test_every_numeric_setting_of_every_mixer_and_section_declares_its_range():
    from lra_bench.checks import declared_range, is_numeric

    missing = [f"{where}: {cls.__name__}.{key} ({annotation})" for where, cls, supplied, _ in config_classes()
               for key, annotation in settings(cls, supplied).items()
               if is_numeric(annotation) and declared_range(annotation) is None]
    assert not missing, "numeric settings without a declared Range (checks.Range / Count / DropRate ...): " + \
        "; ".join(missing)


def bad_values(annotation: object) -> list[object]:
    """Values outside a setting's declared range: beyond each bound, NaN, inf, and a float where an int must be."""
    from lra_bench.checks import declared_range

    rng = declared_range(annotation)
    integer = "int" in str(annotation) and "float" not in str(annotation)
    out: list[object] = [math.nan, math.inf]
    if rng.lo is not None:
        out.append(rng.lo if rng.lo_open else rng.lo - (1 if integer else 0.5))
    if rng.hi is not None:
        out.append(rng.hi if rng.hi_open else rng.hi + (1 if integer else 0.5 + abs(rng.hi)))
    if integer:
        out.append(2.5)
    if "list" in str(annotation) or "tuple" in str(annotation):
        return [[v] for v in out]
    return out


def test_every_out_of_range_value_of_every_setting_fails_naming_the_key_the_value_and_what_is_allowed():
    from lra_bench.checks import declared_range

    checked, wrong = 0, []
    for where, cls, supplied, prefix in config_classes():
        for key, annotation in settings(cls, supplied).items():
            if declared_range(annotation) is None:
                continue
            for value in bad_values(annotation):
                checked += 1
                try:
                    check_kwargs(cls, {key: value}, where, supplied, prefix=prefix)
                except ConfigError as e:
                    message = str(e)
                    if f"{prefix}.{key}=" not in message or "\n" in message or not re.search(
                            r"allowed|finite|integer", message):
                        wrong.append(f"{where} {key}={value!r}: {message}")
                    continue
                wrong.append(f"{where} {key}={value!r}: accepted")
    assert checked > 300 and not wrong, "\n".join(wrong[:40])


ISSUE_CASES = [  # the second pass's cases, through the whole compose -> plan path
    ("attention.attn_dropout=1.0", "attention.attn_dropout=1.0 (attention=softmax) is out of range: allowed [0, 1)"),
    ("attention=sinkhorn attention.attn_dropout=1.0", "attention.attn_dropout=1.0 (attention=sinkhorn) is out of"),
    ("attention.attn_dropout=1.5", "attention.attn_dropout=1.5 (attention=softmax) is out of range"),
    ("attention.attn_dropout=nan", "attention.attn_dropout=nan is not a finite number"),
    ("model.depth=0", "model.depth=0 is out of range: allowed >= 1"),
    ("model.depth=-1", "model.depth=-1 is out of range: allowed >= 1"),
    ("model.mlp_dim=0", "model.mlp_dim=0 is out of range: allowed >= 1"),
    ("attention=lru attention.ssm_lr=inf", "attention.ssm_lr=inf is not a finite number"),
    ("seed=1e20", "seed=1e+20 must be an integer"),
    ("trainer.lr=1e308", "trainer.lr=1e+308 is out of range: allowed (0, 10]"),
    ("trainer.precision=fp16", "trainer.precision='fp16' is not allowed: must be one of 'bf16', 'fp32'"),
]


@pytest.mark.parametrize("override, message", ISSUE_CASES, ids=[c[0] for c in ISSUE_CASES])
def test_the_passes_bad_values_fail_at_compose_time_in_one_line(tmp_path, override, message):
    with pytest.raises(ConfigError) as error:
        plan(compose_run(["profile=smoke", *override.split()], tmp_path))
    assert message in str(error.value) and "\n" not in str(error.value)


def test_a_mixer_constructor_that_raises_a_raw_error_is_one_config_error_naming_the_mixer(tmp_path, fault_mixers):
    cfg = compose_run(["profile=smoke", *mixer("Unbuildable"), "+attention.rate=1.5"], tmp_path)
    with pytest.raises(ConfigError, match=r"attention=test_unbuildable cannot be built with attention.rate=1.5: "
                                          r"ValueError: dropout probability"):
        plan(cfg)


def test_a_mixer_name_with_a_control_character_is_refused():
    with pytest.raises(ConfigError, match="cannot name a mixer"):
        type("Newline", (TokenMixer,), {"name": "evil\nname", "forward": lambda self, x, mask=None: x})
    assert "evil\nname" not in TokenMixer._registry


@pytest.mark.slow
def test_a_bad_value_on_the_command_line_is_one_line_exit_2_with_the_traceback_only_on_request(tmp_path):
    plain = run_py(tmp_path, "profile=smoke", "attention.attn_dropout=1.5")
    assert plain.returncode == 2, plain.stderr[-3000:]
    lines = [line for line in plain.stderr.splitlines() if line.strip()]
    assert lines == ["error: attention.attn_dropout=1.5 (attention=softmax) is out of range: allowed [0, 1) (1 would "
                     "drop everything and divide by zero); fix it in the config or on the command line"], lines
    full = run_py(tmp_path, "profile=smoke", "attention.attn_dropout=1.5", env=env_for(tmp_path, HYDRA_FULL_ERROR="1"))
    assert full.returncode == 2 and "Traceback" in full.stderr and "ConfigError" in full.stderr
    assert not list((tmp_path / "runs").rglob("record.json"))


# ------------------------------------------------------------------------------ B: record identity and the report


def fake(task: str = "listops", attention: str = "softmax", seed: int = 0, status: str = "ok", acc: float | None = 0.5,
         lr: float = 1e-3, test_set: str = "T1", finished: str = "2026-01-01T00:00:00") -> dict:
    """A record as the runner writes one (identity fields from its config)."""
    config = {"task": {"name": task}, "attention": {"_target_": attention}, "trainer": {"lr": lr},
              "profile": {"name": "p"}, "seed": seed}
    h = semantic_hash(config)
    rec = {k: None for k in REQUIRED_FIELDS}
    rec.update(run_id=f"p-seed{seed}-{h[:10]}", task=task, attention=attention, profile="p", seed=seed, config=config,
               config_hash=h, status=status, message="" if status == "ok" else f"simulated {status}",
               test_acc=acc if status == "ok" else None, test_examples=1000, test_majority_rate=0.1, params=1,
               throughput={}, memory={}, test_fingerprint=test_set, dataset_fingerprint=test_set,
               finished_at=finished, code_version="c", git_commit="g")
    return rec


def store(root: Path, *recs: dict) -> Path:
    for rec in recs:
        write_record(rec, root)
    return root


def cell(table, task: str = "listops", attention: str = "softmax") -> dict:
    row = table[table.attention == attention].iloc[0]
    return {"n": int(row[f"{task}_n"]), "mean": float(row[f"{task}_mean"]), "text": row[{"listops": "ListOps",
                                                                                      "text": "Text"}[task]]}


def test_records_of_two_configurations_never_share_a_cell(tmp_path):
    root = store(tmp_path, fake(seed=0, acc=0.10), fake(seed=1, acc=0.12),
                 fake(seed=2, acc=0.90, lr=2e-3, finished="2026-01-02T00:00:00"))
    table, md = table1(load_runs(root), "p")
    assert cell(table)["n"] == 1 and cell(table)["mean"] == pytest.approx(90.0), "two configs averaged in one cell"
    assert "**Left out**" in md and "2 record(s): 2 ok" in md


def test_records_scored_on_two_test_sets_never_share_a_cell(tmp_path):
    root = store(tmp_path, fake(seed=0, acc=0.10, test_set="A"), fake(seed=1, acc=0.12, test_set="A"),
                 fake(seed=2, acc=0.90, test_set="B", finished="2026-01-02T00:00:00"))
    table, md = table1(load_runs(root), "p")
    assert cell(table)["n"] == 1 and cell(table)["mean"] == pytest.approx(90.0), "two test sets averaged in one cell"
    assert "test set A" in md and "test set B" in md


def test_a_later_success_replaces_an_earlier_failure_of_another_config_which_is_listed_below(tmp_path):
    """Issue 41 item 6: an offline attempt (its own config hash) left a FAIL row even after the variant's success."""
    root = store(tmp_path, fake(status="failed", lr=5e-4, finished="2026-01-01T00:00:00"),
                 fake(acc=0.40, finished="2026-01-02T00:00:00"),
                 fake(status="failed", lr=3e-3, finished="2026-01-03T00:00:00"),  # a newer failure of a third config
                 fake(task="text", attention="linear", status="failed", finished="2026-01-01T00:00:00"))
    table, md = table1(load_runs(root), "p")
    assert cell(table)["text"].startswith("40.00 [") and "FAIL" not in cell(table)["text"]  # no FAIL in the cell
    assert cell(table, "text", "linear")["text"] == "FAIL"  # a cell with nothing else still says so
    left = md.split("**Left out**")[1]
    assert left.count("\n- softmax / ListOps") == 2 and "1 failed" in left


def test_every_record_carries_its_identity_and_the_names_of_what_was_built(tmp_path):
    rec = run(compose_run(["profile=smoke", "trainer.max_steps=2", "trainer.eval_every=2"], tmp_path))
    assert (rec["task"], rec["attention"], rec["model"]) == ("listops", "softmax", "encoder")
    assert len(rec["config_hash"]) == 64 and re.fullmatch(r"[0-9a-f]{16}", rec["code_version"])
    assert rec["test_fingerprint"] == rec["test_predictions"]["test_fingerprint"]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):  # as run.py sees it: task=text chosen
        cfg = compose("run", [f"paths.results_dir={tmp_path}", f"paths.cache_dir={tmp_path}", "profile=smoke",
                              "task=text", "task._target_=lra_bench.data.listops.task.ListOpsTask"],
                      return_hydra_config=True)
    HydraConfig.instance().set_config(cfg)
    try:
        with pytest.raises(ConfigError, match="builds the listops task, but this config is task.name='text'"):
            plan(cfg)
    finally:
        HydraConfig.instance().cfg = None


def test_control_characters_in_stored_names_never_split_a_table_row(tmp_path):
    root = store(tmp_path, fake(), fake(attention="my\nmixer|x\x1b[31m"))
    _, md = table1(load_runs(root), "p")
    assert "| my\\nmixer\\|x\\x1b[31m " in md, md  # one row, the characters shown escaped
    assert "\x1b" not in md and "my\nmixer" not in md


def test_the_report_exits_non_zero_on_nothing_to_report_or_an_unknown_profile(tmp_path, report_script, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = report_script("--runs-dir", empty, "--bench-dir", empty, "--out", tmp_path / "o1")
    assert nothing.returncode == 1 and "nothing to report" in nothing.stderr
    missing = report_script("--runs-dir", tmp_path / "nonexistent", "--bench-dir", empty, "--out", tmp_path / "o2")
    assert missing.returncode == 1 and f"--runs-dir {tmp_path / 'nonexistent'} is not a folder" in missing.stderr
    runs = store(tmp_path / "runs", fake())
    nosuch = report_script("--runs-dir", runs, "--bench-dir", empty, "--profile", "nosuch", "--out", tmp_path / "o3")
    assert nosuch.returncode == 2 and "--profile 'nosuch'" in nosuch.stderr and "it has p" in nosuch.stderr
    monkeypatch.setenv("LRA_RESULTS_DIR", "")
    unset = report_script("--bench-dir", empty, "--out", tmp_path / "o4")
    assert unset.returncode == 2 and "LRA_RESULTS_DIR is set but empty" in unset.stderr


def test_a_report_warns_once_lists_the_warning_in_REPORT_md_and_leaves_no_stale_files(tmp_path, report_script):
    recs = [fake(task=t, attention=a, seed=s, acc=0.3 + 0.01 * s, lr=lr, finished=f"2026-01-0{1 + (lr > 1e-3)}T00")
            for t in ("listops", "text") for a in ("softmax", "linear") for s in (0, 1) for lr in (1e-3, 2e-3)]
    runs = store(tmp_path / "runs", *recs)
    out = tmp_path / "report"
    out.mkdir()
    (out / "bubble.png").write_bytes(b"an earlier report's chart")  # another report's file: must not survive
    (out / "table2_model.md").write_text("an earlier report's table")
    (out / "notes.txt").write_text("the user's own file")
    (tmp_path / "bench").mkdir()
    done = report_script("--runs-dir", runs, "--bench-dir", tmp_path / "bench", "--out", out)
    assert done.returncode == 0, done.stderr[-3000:]
    warned = [line for line in done.stderr.splitlines() if "left out of Table 1" in line]
    assert len(warned) == 1, done.stderr
    report = (out / "REPORT.md").read_text()
    assert report.count("left out of Table 1") == 1 and "Warnings (each once)" in report
    assert not (out / "bubble.png").exists() and not (out / "table2_model.md").exists()
    assert (out / "notes.txt").exists() and "removed an earlier report's" in done.stdout


# ------------------------------------------------------------------------- C: checkpoint identity and reruns


def preempt_at(monkeypatch, step: int) -> None:
    """The run stops as on SIGTERM after optimizer step ``step`` (checkpoint written, Preempted raised)."""
    calls = {"n": 0}

    def requested(self) -> bool:
        calls["n"] += 1  # once before training, then after every step
        return calls["n"] > step

    monkeypatch.setattr(StopSignals, "requested", requested)


def checkpoint_dir(root: Path) -> Path:
    (directory,) = sorted({p.parent for p in (root / "cache" / "checkpoints").rglob("ckpt.json")})
    return directory


@pytest.mark.slow
def test_a_checkpoint_of_another_config_or_of_older_code_is_refused_in_one_line(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="lra_bench")
    preempt_at(monkeypatch, 10)
    with pytest.raises(Preempted):
        run(compose_run(SMOKE, tmp_path / "a"))
    monkeypatch.undo()
    other = compose_run([*SMOKE, "trainer.lr=2e-3"], tmp_path / "b")  # same shapes, another config
    target = plan(other).checkpoint_dir
    shutil.copytree(checkpoint_dir(tmp_path / "a"), target)  # copied by hand
    with pytest.raises(LRABenchError) as error:  # on 499046a: resumed silently
        run(other)
    message = str(error.value)
    assert type(error.value).__name__ == "CheckpointMismatch"
    assert "\n" not in message and str(target) in message and "another config_hash" in message
    assert "rerun=true" in message and "resume=force" in message
    (refused,) = read_records(tmp_path / "b" / "runs")  # the refused attempt is recorded, with why
    assert refused["status"] == "failed" and "CheckpointMismatch" in refused["message"]
    forced = run(compose_run([*SMOKE, "trainer.lr=2e-3", "resume=force"], tmp_path / "b"))
    assert forced["restarts"] == 1 and "resume=force" in caplog.text

    preempt_at(monkeypatch, 10)
    with pytest.raises(Preempted):
        run(compose_run(SMOKE, tmp_path / "c"))
    monkeypatch.undo()
    meta_path = checkpoint_dir(tmp_path / "c") / "ckpt.json"
    meta = json.loads(meta_path.read_text())
    del meta["identity"]  # what a checkpoint of the code before identities looks like (the checksum is the .pt's)
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(LRABenchError, match="an older lra-bench that stored no identity"):
        run(compose_run(SMOKE, tmp_path / "c"))
    fresh = run(compose_run([*SMOKE, "rerun=true"], tmp_path / "c"))  # starts over, the old one set aside
    assert fresh["status"] == "ok" and fresh["restarts"] == 0
    assert list((tmp_path / "c" / "cache" / "checkpoints").rglob("*.unusable-*"))


@pytest.mark.slow
def test_a_preempted_rerun_resumes_its_own_checkpoint_and_equals_an_uninterrupted_run(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="lra_bench")
    first = run(compose_run(SMOKE, tmp_path))
    preempt_at(monkeypatch, 10)
    with pytest.raises(Preempted):
        run(compose_run([*SMOKE, "rerun=true"], tmp_path))  # a rerun, preempted at step 10
    monkeypatch.undo()
    assert checkpoint_dir(tmp_path).is_dir(), "the rerun's checkpoint was deleted"
    skipped = run(compose_run(SMOKE, tmp_path))  # without rerun=true: the finished record; the rerun's stays
    assert skipped["checksum"] == first["checksum"] and checkpoint_dir(tmp_path).is_dir()
    caplog.clear()
    again = run(compose_run([*SMOKE, "rerun=true"], tmp_path))  # the requeued rerun
    assert "(step 10)" in caplog.text and again["restarts"] == 1, "the rerun started over: its progress was lost"
    for key in SAME:
        assert again[key] == first[key], key
    t, t0 = again["throughput"], first["throughput"]  # the resumed process's own warm-up is not timed either
    assert t["warmup_steps_excluded"] == 2 * t0["warmup_steps_excluded"] > 0
    assert t["timed_steps"] == again["steps"] - t["warmup_steps_excluded"]
    assert not (tmp_path / "cache" / "checkpoints").exists() or not list(
        (tmp_path / "cache" / "checkpoints").rglob("ckpt.pt"))


# --------------------------------------------------------------------------- D: the run-time mixer contract


@pytest.mark.parametrize("double, reason", [("ShapeBreaker", "returned shape (16, 1, 32) for an input of shape "
                                                              "(16, 65, 32)"),
                                            ("EvalNaN", "first evaluation batch: it returned")])
def test_a_mixer_breaking_the_contract_at_run_time_fails_the_run_with_the_reason(tmp_path, fault_mixers, double,
                                                                                 reason):
    rec = run(compose_run([*SMOKE, *mixer(double)], tmp_path))
    assert rec["status"] == "failed" and "MixerContractError" in rec["message"] and reason in rec["message"], rec[
        "message"]


@pytest.mark.slow
def test_an_exit_inside_the_run_leaves_a_failed_record_and_a_non_zero_exit(tmp_path):
    done = run_py(tmp_path, *SMOKE, *mixer("Exits"))
    assert done.returncode == 1, done.stderr[-3000:]
    (rec,) = read_records(tmp_path / "runs")
    assert rec["status"] == "failed" and "SystemExit(0)" in rec["message"]
    assert "Traceback" not in done.stderr


# ------------------------------------------------------------------------------------------------- E: sweeps


def test_every_job_of_a_sweep_is_in_its_summary_those_never_started_too(tmp_path):
    from lra_bench.run import sweeps

    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("run", ["profile=smoke", f"hydra.sweep.dir={tmp_path / 'sweep'}"], return_hydra_config=True)
        with read_write(cfg), open_dict(cfg):  # what `run.py -m attention=softmax,linear,local ...` composes
            cfg.hydra.overrides.task = ["attention=softmax,linear,local", "profile=smoke"]
        sweeps.SweepSummary().on_multirun_start(cfg)
    try:
        sweeps.note_job(tmp_path / "sweep", 0, ["attention=softmax", "profile=smoke"], "interrupted",
                        message="Ctrl-C")
        text = sweeps.summary(sweeps.read_jobs(tmp_path / "sweep", sweeps._state["planned"]))
    finally:
        sweeps._state.update(sweep_dir=None, planned=[])
    assert "3 jobs: 1 interrupted, 2 not started" in text, text
    assert re.search(r"^2 +not started .*attention=local profile=smoke", text, re.M), text


def hold_sweep_folder(folder: Path) -> subprocess.Popen:
    """Another sweep's process holding ``folder`` (it claims it, prints it, waits for stdin to close)."""
    code = ("import sys; from lra_bench.run.sweeps import claim_sweep_dir; print(claim_sweep_dir(sys.argv[1]), "
            "flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", code, str(folder)], cwd=ROOT, env=env_for(folder),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == str(folder)
    return holder


@pytest.mark.slow
def test_sweeps_get_their_own_folders_and_an_invalid_job_leaves_a_record(tmp_path):
    base = tmp_path / "multirun" / "12-00-00"
    holder = hold_sweep_folder(base)  # a sweep started in the same second
    try:
        done = run_py(tmp_path, "-m", "profile=smoke", "trainer.max_steps=2", "trainer.eval_every=2",
                      "attention.attn_dropout=nan,0.1", f"hydra.sweep.dir='${{lra_sweep_dir:{base}}}'")
        busy = run_py(tmp_path, "-m", "profile=smoke", f"hydra.sweep.dir={base}")  # a folder given by hand
    finally:
        holder.stdin.close()
        holder.wait()
    assert done.returncode == 1, done.stderr[-3000:]
    folder = base.with_name("12-00-00-2")
    summary = (folder / "summary.txt").read_text()
    assert "2 jobs: 1 invalid configuration, 1 ok" in summary, summary
    assert not (base / "jobs.jsonl").exists(), "the second sweep wrote into the first one's folder"
    invalid = json.loads((folder / "0" / "record.json").read_text())
    assert invalid["status"] == "invalid" and "attention.attn_dropout=nan" in invalid["message"]
    assert str(folder / "0" / "record.json") in summary
    assert busy.returncode == 2 and f"another sweep is running in {base}" in busy.stderr
    assert "Traceback" not in busy.stderr


# ------------------------------------------------------------------------------------- F: child processes


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    out, todo = [], [pid]
    while todo:
        found = children.get(todo.pop(), [])
        out += found
        todo += found
    return out


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_until(condition, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.05)


GENERATING = ["profile=smoke", "task.generator.num_train=50000", "task.generator.workers=2"]  # a pool of 2 workers


def handles(pid: int, sig: int) -> bool:
    """Whether process ``pid`` has a disposition of its own for ``sig`` (a handler, or ignored)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    masks = dict(re.findall(r"^(SigCgt|SigIgn):\s*([0-9a-f]+)$", status, re.M))
    return bool((int(masks.get("SigCgt", "0"), 16) | int(masks.get("SigIgn", "0"), 16)) & (1 << (sig - 1)))


def workers(pid: int) -> list[int]:
    """The process-pool workers below ``pid`` (multiprocessing's spawned children, not its resource tracker)."""
    found = []
    for child in descendants(pid):
        try:
            if b"--multiprocessing-fork" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:
            continue
    return found


def start_generating(root: Path, **kwargs) -> subprocess.Popen:
    """``run.py`` generating ListOps with a pool of 2 workers, returned once both workers are past their start-up
    (their SIGUSR2 disposition is set: run.py's start-up handler, or ignored by the pool's initializer)."""
    proc = subprocess.Popen([sys.executable, "run.py", *GENERATING], cwd=ROOT, env=env_for(root),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kwargs)
    for line in proc.stdout:  # hydra logs to stdout
        if "with 2 processes" in line:
            break
    wait_until(lambda: len(found := workers(proc.pid)) == 2 and all(handles(w, signal.SIGUSR2) for w in found),
               "the pool's 2 workers past their start-up")
    return proc


def sigkill_and_wait_for_its_children(proc: subprocess.Popen, what: str) -> None:
    """SIGKILL ``proc`` and wait for every process below it to end (killed afterwards when they do not)."""
    children = descendants(proc.pid)
    proc.kill()
    proc.wait()
    try:
        wait_until(lambda: not any(alive(pid) for pid in children), what, 60)
    finally:
        for pid in children:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_data_generation_workers_end_with_a_sigkilled_run(tmp_path):
    proc = start_generating(tmp_path)
    sigkill_and_wait_for_its_children(proc, "the workers outlived the killed run")


@pytest.mark.slow
def test_a_stop_signal_to_the_process_group_during_generation_is_one_line_and_exit_75(tmp_path):
    proc = start_generating(tmp_path, start_new_session=True)
    os.killpg(proc.pid, signal.SIGUSR2)  # what `kill -USR2 -PGID` or a scheduler sends to the whole group
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 75, out[-3000:]
    assert "Traceback" not in out and out.count("preempted") == 1, out[-3000:]


@pytest.mark.slow
def test_a_sweeps_job_process_ends_with_a_sigkilled_sweep(tmp_path):
    proc = subprocess.Popen([sys.executable, "run.py", "-m", "attention=softmax,linear", "profile=smoke",
                             "trainer.max_steps=2000", "trainer.checkpoint_every=10",
                             f"hydra.sweep.dir={tmp_path / 'sweep'}"], cwd=ROOT, env=env_for(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_until(lambda: list((tmp_path / "cache" / "checkpoints").rglob("ckpt.json")), "the job's first checkpoint")
    sigkill_and_wait_for_its_children(proc, "the job outlived its killed sweep")
    assert checkpoint.load(checkpoint_dir(tmp_path)) is not None  # it checkpointed on its way out (SIGTERM)


# ------------------------------------------------------------------------------------- G: folders and files


def test_an_empty_lra_results_dir_is_an_error_not_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("LRA_RESULTS_DIR", "")
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose("run", ["profile=smoke", f"paths.cache_dir={tmp_path}"])
    with pytest.raises(ConfigError, match="paths.results_dir is empty .LRA_RESULTS_DIR set to an empty string"):
        plan(cfg)


@pytest.mark.parametrize("blocked", ["runs", "cache/checkpoints"])
def test_a_file_where_a_folder_must_be_is_one_line_naming_it(tmp_path, blocked):
    (tmp_path / blocked).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / blocked).write_text("in the way")
    with pytest.raises(OSError) as error:  # a StorageError: an LRABenchError and an OSError
        run(compose_run(SMOKE, tmp_path))
    assert f"{tmp_path / blocked} is a file where a folder must be" in str(error.value)
    assert "\n" not in str(error.value)


@contextlib.contextmanager
def unwritable(folder: Path):
    """``folder`` made unwritable for this user: read-only permissions, or for root (whom permissions do not stop)
    the immutable attribute (chattr +i; skipped where the file system has none)."""
    if os.geteuid() != 0:
        os.chmod(folder, 0o555)
        try:
            yield
        finally:
            os.chmod(folder, 0o755)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(folder)]).returncode != 0:
        pytest.skip("root, and no immutable attribute here (chattr +i) to make a folder unwritable")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(folder)], check=True)


@pytest.mark.slow
def test_an_unwritable_results_folder_is_one_line_naming_it(tmp_path):
    (tmp_path / "runs").mkdir()
    with unwritable(tmp_path / "runs"):
        done = run_py(tmp_path, "profile=smoke")
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("error:")]
    assert str(tmp_path / "runs") in line and "not writable" in line and "LRA_RESULTS_DIR" in line


@pytest.mark.slow
def test_a_file_size_limit_is_one_line_naming_the_file_and_ulimit(tmp_path):
    limit = 128 * 1024  # more than any data file (73 KB) or record of a smoke run, less than a checkpoint (180 KB)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = run_py(tmp_path, *SMOKE, preexec_fn=limited)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if "ulimit -f" in ln]
    assert "ckpt.pt" in line and "file-size limit" in line
    (rec,) = read_records(tmp_path / "runs")
    assert rec["status"] == "failed" and "ulimit -f" in rec["message"]


# ---------------------------------------------------------------------------------- the catalogue's document


def test_docs_reliability_names_only_tests_that_exist():
    text = (ROOT / "docs" / "reliability.md").read_text()
    named = set(re.findall(r"`(test_[A-Za-z0-9]+(?:_[A-Za-z0-9]+){2,})`", text))  # tests, not `test_fingerprint`
    defined = {name for path in (ROOT / "tests").glob("test_*.py")
               for name in re.findall(r"^def (test_\w+)", path.read_text(), re.M)}
    assert named and not named - defined, sorted(named - defined)
    here = set(re.findall(r"^def (test_\w+)", Path(__file__).read_text(), re.M)) - {
        "test_docs_reliability_names_only_tests_that_exist"}
    assert not here - named, f"cases of this catalogue missing from docs/reliability.md: {sorted(here - named)}"
