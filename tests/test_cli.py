"""The command line: the main job, --help / --cfg, and every bad input failing clearly before training."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lra_bench.attention import list_attentions
from lra_bench.errors import LRABenchError
from lra_bench.run.runner import run
from tests.conftest import ROOT, compose_run


def run_cli(tmp_path: Path, *args: str, timeout: int = 180, **extra_env: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LRA_RESULTS_DIR": str(tmp_path / "runs"), "LRA_CACHE_DIR": str(tmp_path / "cache"),
           **extra_env}
    return subprocess.run([sys.executable, "run.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)


def records(tmp_path: Path) -> list[Path]:
    return sorted((tmp_path / "runs").rglob("record.json")) if (tmp_path / "runs").exists() else []


def test_smoke_run_end_to_end_without_importing_wandb(tmp_path):
    """A run, with the default logger (none): wandb is never imported (its import alone takes seconds)."""
    proc = run_cli(tmp_path, "attention=softmax", "task=listops", "profile=smoke", PYTHONPROFILEIMPORTTIME="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    (path,) = records(tmp_path)
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["test_acc"] is not None
    imported = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" in imported and "hydra" in imported, "python's import log (PYTHONPROFILEIMPORTTIME) is read"
    assert not {name for name in imported if name.split(".")[0] == "wandb"}, "wandb imported"


def test_cfg_job_prints_the_composed_config(tmp_path):  # --help: tests/test_newcomer.py
    proc = run_cli(tmp_path, "--cfg", "job", "attention=softmax", "profile=paper")
    assert proc.returncode == 0
    assert "_target_: lra_bench.attention.softmax.SoftmaxAttention" in proc.stdout
    assert "dim: 512" in proc.stdout and "max_steps: 5000" in proc.stdout


def test_unknown_attention_lists_valid_options(tmp_path):
    proc = run_cli(tmp_path, "attention=perfomer", "profile=smoke")
    assert proc.returncode != 0
    assert "Could not find 'attention/perfomer'" in proc.stderr
    for name in list_attentions():
        assert name in proc.stderr
    assert not records(tmp_path)


def test_only_the_files_hydra_may_load_are_checked(tmp_path):
    """A search-path folder may be a project root: YAML in dot-folders (.github, .hydra) or deeper than a group
    (run outputs) is not a config, and a broken one there stops nothing."""
    from lra_bench.config.yaml_syntax import config_files, yaml_syntax_problem

    for where in ("", "attention", ".github/workflows", ".hydra", "outputs/2026-12-05/12-00-00"):
        (tmp_path / where).mkdir(parents=True, exist_ok=True)
        (tmp_path / where / "x.yaml").write_text("a: 1\n" if where in ("", "attention") else "x: [\n")
    assert config_files(tmp_path) == [tmp_path / "x.yaml", tmp_path / "attention" / "x.yaml"]
    assert yaml_syntax_problem([tmp_path]) is None
    (tmp_path / "attention" / "x.yaml").write_text("a: [1\n")
    assert yaml_syntax_problem([tmp_path]).startswith(f"{tmp_path / 'attention' / 'x.yaml'}: not valid YAML at line 2")


@pytest.mark.parametrize("text, said", [
    ("_target_: lra_bench.attention.softmax.SoftmaxAttention\nattn_dropout: [0.1\n",
     "mine.yaml: not valid YAML at line 3, column 1: while parsing a flow sequence (begun at line 2, column 15)"),
    ("_target_: lra_bench.attention.softmax.SoftmaxAttention\n\tattn_dropout: 0.1\n",
     "mine.yaml: not valid YAML at line 2, column 1"),
    ("_target_: lra_bench.attention.softmax.SoftmaxAttention\nattn_dropout:\t0.1\n",  # libyaml would accept it
     "mine.yaml: not valid YAML at line 2, column 14: while scanning for the next token; found character '\\t'"),
    ("_target_: lra_bench.attention.softmax.SoftmaxAttention\n---\nattn_dropout: 0.1\n",
     "mine.yaml: not valid YAML at line 2, column 1: expected a single document in the stream"),
])
def test_a_config_file_that_is_not_yaml_is_named_with_its_line_not_a_traceback(tmp_path, text, said):
    """Hydra's verdict (OmegaConf's loader), said in one line."""
    (tmp_path / "mine" / "attention").mkdir(parents=True)
    (tmp_path / "mine" / "attention" / "mine.yaml").write_text(text)
    proc = run_cli(tmp_path, "attention=mine", "profile=smoke", f"hydra.searchpath=[file://{tmp_path / 'mine'}]")
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not records(tmp_path)


@pytest.mark.parametrize("text, said", [
    ("_target_: lra_bench.attention.softmax.SoftmaxAttention\n_partial_: true\nattn_dropot: 0.1\n",
     "attention=mine (class SoftmaxAttention): unknown option 'attn_dropot' (did you mean 'attn_dropout'?)"),
    ("_target_: lra_bench.attention.softmax.SoftmaxAttention\nattn_dropout: 0.1\n",
     "attention=mine (class SoftmaxAttention): the attention config must set `_partial_: true` (in "
     "attention/mine.yaml"),
])
def test_a_mistake_in_your_own_attention_config_is_said_under_the_option_you_chose(tmp_path, text, said):
    """Your config for a built-in class (attention=mine pointing at SoftmaxAttention): the message names your option,
    not the class's own name (it said attention=softmax, a file you never touched)."""
    (tmp_path / "mine" / "attention").mkdir(parents=True)
    (tmp_path / "mine" / "attention" / "mine.yaml").write_text(text)
    proc = run_cli(tmp_path, "attention=mine", "profile=smoke", f"hydra.searchpath=[file://{tmp_path / 'mine'}]")
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr[-2000:]
    assert not records(tmp_path)


@pytest.mark.parametrize("choices", ["performer,softmax,linear", "softmax,linear,performer"])
def test_a_sweep_override_some_choices_lack_names_them_before_any_job(tmp_path, choices):
    """Hydra checks every job's config before the first and stops the sweep with "Key 'nb_features' is not in
    struct", naming no variant; the harness names the choices that lack the key and the ones that have it, whichever
    comes first."""
    proc = run_cli(tmp_path, "-m", f"attention={choices}", "attention.nb_features=16", "profile=smoke",
                   f"hydra.sweep.dir={tmp_path / 'multirun'}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert ("attention=softmax, one of your sweep's choices: attention.nb_features: no such key in attention\n"
            in proc.stderr)
    assert "Lacking it: attention=softmax,linear; having it: attention=performer." in proc.stderr
    assert "not in struct" not in proc.stderr
    assert not records(tmp_path) and not (tmp_path / "multirun").exists()


@pytest.mark.parametrize("args, said", [
    (["attention=perfomer"], "did you mean attention=performer?"),
    (["-m", "attention=softmax,perfomer"], "did you mean attention=performer?"),  # every choice of a sweep
    (["bench.repeatz=3"], "did you mean bench.repeats=3?"),
])
def test_the_benchmark_says_which_option_or_key_was_meant(tmp_path, args, said):
    """scripts/benchmark.py checks its overrides as run.py does: one line with the closest valid name, no cell run."""
    env = {**os.environ, "LRA_BENCH_DIR": str(tmp_path / "bench")}
    proc = subprocess.run([sys.executable, "scripts/benchmark.py", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "HYDRA_FULL_ERROR" not in proc.stderr
    assert not (tmp_path / "bench").exists()


@pytest.mark.parametrize("group, bad", [("task", "listopz"), ("profile", "gpu_huge")])
def test_unknown_task_or_profile_lists_valid_options(tmp_path, group, bad):
    proc = run_cli(tmp_path, f"{group}={bad}")
    assert proc.returncode != 0 and f"{group}/{bad}" in proc.stderr
    assert "listops" in proc.stderr if group == "task" else "smoke" in proc.stderr


BAD_CONFIGS = [
    ("trainer.batch_size=abc", "trainer.batch_size='abc' must be of type int"),
    ("trainer.max_steps=0", "trainer.max_steps=0 is out of range: allowed >= 1"),
    ("trainer.lr=-0.1", "trainer.lr=-0.1 is out of range: allowed (0, 10]"),
    ("model.num_heads=3", "must be a positive multiple of model.num_heads=3"),
    ("+attention.not_a_knob=1", "attention=softmax: unknown option 'not_a_knob'"),
    ("+trainer.bacth_size=8", "trainer: unknown option 'bacth_size'"),
    ("model.pool=max", "model.pool='max' is not allowed: must be one of 'cls', 'mean'"),
    ("task.data_dir=/definitely/missing", "task.data_dir=/definitely/missing does not exist"),
    ("attention=local attention.block_size=5000", "attention=local: block_size=5000 must be between 1 and seq_len"),
    ("trainer.batch_size=0", "trainer.batch_size=0 is out of range: allowed >= 1"),
    ("attention=performer attention.nb_features=0",
     "attention.nb_features=0 (attention=performer) is out of range: allowed >= 1"),
]


@pytest.mark.parametrize("override, message", BAD_CONFIGS)
def test_bad_config_fails_before_any_data(tmp_path, override, message):
    """What run.py's main() runs, in this process (a fresh interpreter per case costs 5 s each); the command line
    around it -- exit code 2, the message once, no traceback -- is the next test's."""
    cfg = compose_run(["profile=smoke", *override.split()], tmp_path)
    with pytest.raises(LRABenchError) as error:
        run(cfg)
    assert message in str(error.value)
    assert not records(tmp_path) and not (tmp_path / "cache" / "listops").exists()


@pytest.mark.parametrize("override, message", [BAD_CONFIGS[0], BAD_CONFIGS[7], BAD_CONFIGS[8]])
def test_bad_config_on_the_command_line_is_one_line_and_exit_code_2(tmp_path, override, message):
    proc = run_cli(tmp_path, "profile=smoke", *override.split())
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.count(message) == 1 and "Traceback" not in proc.stderr
    assert not records(tmp_path) and not (tmp_path / "cache" / "listops").exists()


def test_malformed_tsv_in_data_dir_names_file_and_line(tmp_path):
    data = tmp_path / "listops-1000"
    data.mkdir()
    good = "Source\tTarget\n( ( ( [MAX 2 ) 9 ) ] )\t9\n( ( ( [MIN 2 ) 9 ) ] )\t2\n"
    for split in ("train", "val"):
        (data / f"basic_{split}.tsv").write_text(good * 1)
    (data / "basic_test.tsv").write_text(good + "( ( [SM 1 ) ] )\n")
    proc = run_cli(tmp_path, "profile=smoke", f"task.data_dir={data}")
    assert proc.returncode == 2
    assert f"{data / 'basic_test.tsv'}:4: expected 2 tab-separated fields" in proc.stderr
    assert "Traceback" not in proc.stderr
    (path,) = records(tmp_path)  # a run that got past its config and did not end ok leaves a record naming why
    record = json.loads(path.read_text())
    assert record["status"] == "failed" and "basic_test.tsv:4" in record["message"]


@pytest.mark.slow
def test_wandb_offline_one_run_per_job_grouped_by_sweep(tmp_path):
    proc = run_cli(tmp_path, "-m", "attention=softmax,linear", "profile=smoke", "logger=wandb",
                   "trainer.max_steps=4", "trainer.eval_every=2", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = sorted((tmp_path / "cache" / "wandb").glob("offline-run-*"))  # <cache>/wandb/, not wandb/wandb/
    assert len(runs) == 2, "one wandb run per job"
    for run_dir in runs:
        meta = b"".join(p.read_bytes() for p in run_dir.rglob("*.wandb"))
        assert b"sweep-" in meta and b"listops" in meta  # group and tags travel with the run
