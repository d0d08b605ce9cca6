"""No silent loss (issue 14, items 4-8): one process per run, an ok record is never replaced by a failure, a full
disk names its path and keeps the last checkpoint, one checksum rule for every reader, preemption outside the
training loop and in a sweep's parent, SIGKILL recorded as ``killed``."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lra_bench.config.plan import plan
from lra_bench.errors import DiskFullError, RunInProgress
from lra_bench.infra.runlock import run_lock
from lra_bench.reports.table1 import load_runs, table1
from lra_bench.run.runner import record_crash, run
from lra_bench.store import files, records
from lra_bench.store.records import REQUIRED_FIELDS, read_records, run_dir, write_record
from lra_bench.train import checkpoint
from lra_bench.train.loop import Preempted
from tests.conftest import ROOT, compose_run

SMOKE = ["profile=smoke", "trainer.max_steps=40", "trainer.eval_every=20", "trainer.checkpoint_every=10"]
SAME = ("status", "best_val_acc", "best_step", "test_acc", "evals", "config_hash", "dataset_fingerprint")


def env_for(root: Path) -> dict[str, str]:
    return {**os.environ, "LRA_RESULTS_DIR": str(root / "runs"), "LRA_CACHE_DIR": str(root / "cache")}


def folder_of(cfg) -> Path:
    p = plan(cfg)
    return run_dir(p.results_dir, p.task.name, p.attention, p.profile, p.seed, p.config_hash)


def fake_record(status: str, **extra) -> dict:
    rec = {k: None for k in REQUIRED_FIELDS}
    rec.update(run_id="r", task="listops", attention="softmax", profile="p", seed=0, config_hash="h" * 64,
               status=status, message="", config={}, finished_at=f"2026-12-01T00:00:0{len(status)}")
    rec.update(extra)
    return rec


# ------------------------------------------------------------------------------------- 4: one process per run


def test_a_run_held_by_another_process_is_skipped_with_its_holder(tmp_path):
    cfg = compose_run(SMOKE, tmp_path)
    with run_lock(folder_of(cfg)):  # a separate open file description: flock conflicts even in one process
        with pytest.raises(RunInProgress, match=r"already running \(pid \d+ on .*; lock .*run\.lock\)"):
            run(cfg)
    assert run(cfg)["status"] == "ok"  # released: the run goes ahead


@pytest.mark.slow
def test_two_processes_on_one_config_train_once_and_keep_the_ok_record(tmp_path):
    args = ["run.py", *SMOKE]
    first = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env_for(tmp_path), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while not [p for p in (tmp_path / "runs").rglob("run.lock") if p.read_text()]:
        assert first.poll() is None and time.time() < deadline, "first run never took its lock"
        time.sleep(0.02)
    first.send_signal(signal.SIGSTOP)  # frozen holding the lock, before its data and training: however slow the
    try:  # machine, the second process finds it still running
        second = subprocess.run([sys.executable, *args], cwd=ROOT, env=env_for(tmp_path), capture_output=True,
                                text=True, timeout=120)
    finally:
        first.send_signal(signal.SIGCONT)
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0, out[-2000:]
    assert second.returncode == 3, (second.stdout + second.stderr)[-2000:]
    assert "is already running" in second.stderr
    (rec,) = read_records(tmp_path / "runs")
    assert rec["status"] == "ok"


def test_a_failure_never_replaces_an_ok_record(tmp_path, caplog):
    ok = write_record(fake_record("ok", test_acc=0.5), tmp_path)
    failed = write_record(fake_record("failed", message="boom"), tmp_path)
    assert failed != ok and failed.parent == ok.parent / records.ATTEMPTS, "the failed attempt is kept aside"
    assert json.loads(ok.read_text())["status"] == "ok"
    assert json.loads(failed.read_text())["message"] == "boom"
    assert "keeping the ok record" in caplog.text
    assert [r["status"] for r in read_records(tmp_path)] == ["ok"]
    assert load_runs(tmp_path)["status"].tolist() == ["ok"]
    write_record(fake_record("failed"), tmp_path / "other")  # without an ok record a failure is stored as usual
    assert [r["status"] for r in read_records(tmp_path / "other")] == ["failed"]


# ------------------------------------------------------------------------------------------------ 5: full disk


def test_full_disk_during_a_checkpoint_keeps_the_previous_one_names_the_path_and_resumes(tmp_path, monkeypatch,
                                                                                           caplog):
    caplog.set_level(logging.INFO, logger="lra_bench")
    cfg = compose_run(SMOKE, tmp_path)
    real_save, calls = checkpoint.torch.save, {"n": 0}

    def fills_up(state, path):
        calls["n"] += 1
        if calls["n"] == 1:
            return real_save(state, path)
        Path(path).write_bytes(b"PK\x03\x04 partial")  # what torch's zip writer leaves when the disk fills
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 1234 vs 1200")

    monkeypatch.setattr(checkpoint.torch, "save", fills_up)
    monkeypatch.setattr(files.shutil, "disk_usage", lambda path: type("U", (), {"free": 0})())
    rec = run(cfg)
    ckpt_dir = plan(cfg).checkpoint_dir
    assert rec["status"] == "failed"
    assert f"no space left on {ckpt_dir}" in rec["message"]
    monkeypatch.undo()
    assert checkpoint.load(ckpt_dir)["step"] == 10, "the good checkpoint must survive the failed save"
    again = run(cfg)  # space freed: the same command resumes from step 10
    assert again["status"] == "ok" and "resuming from" in caplog.text
    reference = run(compose_run(SMOKE, tmp_path / "ref"))
    for key in SAME:
        assert again[key] == reference[key], key


def test_full_results_disk_names_the_path(tmp_path, monkeypatch):
    monkeypatch.setattr(files.shutil, "disk_usage", lambda path: type("U", (), {"free": 10})())

    def full_write(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(records.json, "dump", full_write)
    with pytest.raises(DiskFullError, match=f"no space left on {tmp_path}"):
        write_record(fake_record("ok"), tmp_path)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], "no partial or temporary file left"


def tmpfs(path: Path, size: str) -> Path:
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root and mount rights): {done.stderr.decode().strip()}")
    return path


def test_real_full_tmpfs_checkpoint_and_record(tmp_path):
    """The reported case on a real file system: a tmpfs too small for the next checkpoint."""
    disk = tmpfs(tmp_path / "disk", "400k")
    try:
        import torch

        checkpoint.save(disk / "ck", {"step": 1, "w": torch.zeros(30_000)})  # 120 kB
        with pytest.raises(DiskFullError, match=f"no space left on {disk / 'ck'}"):
            checkpoint.save(disk / "ck", {"step": 2, "w": torch.zeros(90_000)})  # 360 kB: does not fit
        assert checkpoint.load(disk / "ck")["step"] == 1
        while True:  # fill what is left
            try:
                with (disk / "filler").open("ab") as f:
                    f.write(b"\0" * 4096)
            except OSError:
                break
        with pytest.raises(DiskFullError, match=f"no space left on {disk / 'runs'}"):
            write_record(fake_record("ok"), disk / "runs")
    finally:
        subprocess.run(["umount", "--lazy", str(disk)], check=False)  # torch may still hold a file there


# -------------------------------------------------------------------------------------- 6: one reading rule


def test_every_reader_rejects_a_record_without_its_checksum(tmp_path):
    path = write_record(fake_record("ok", test_acc=0.384), tmp_path)
    rec = json.loads(path.read_text())
    del rec["checksum"]
    rec["test_acc"] = 0.884  # edited by hand, checksum removed
    path.write_text(json.dumps(rec))
    assert records.read_record(path) is None
    with pytest.warns(UserWarning, match="skipped 1 unreadable"):
        runs = load_runs(tmp_path)
    assert runs.empty
    t1, md = table1(runs)
    assert "88.4" not in md


# --------------------------------------------------------------------------------------------- 7: preemption


@pytest.mark.slow
def test_sigterm_during_data_preparation_exits_for_requeue(tmp_path):
    args = ["run.py", "profile=smoke", "task.generator.num_train=200000"]  # generation takes a while
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env_for(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if "generating ListOps" in line:
            proc.send_signal(signal.SIGTERM)
            break
    out = "".join(lines) + proc.communicate(timeout=120)[0]
    assert proc.returncode == 75, out[-2000:]
    assert "preempted during data preparation (SIGTERM)" in out
    assert not list((tmp_path / "runs").rglob("record.json"))


def test_a_swallowed_sigterm_during_generation_still_stops_at_the_next_chunk(tmp_path, monkeypatch):
    """The signal handler's exception raised inside a ``__del__`` is lost ("Exception ignored"), as it can be in a
    worker pool's callbacks; the generation must still stop at its next chunk, not run to the end (it took 80-127 s
    under load) and exit only then."""
    import lra_bench.data.listops.generate as listops_generate

    real_chunk = listops_generate.generate_chunk
    calls, lost = [], []

    class SignalsWhileCollected:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside __del__: its exception is lost

    def chunk_then_signal(*args):
        calls.append(args[1])
        if len(calls) == 3:
            SignalsWhileCollected()  # collected at once
        return real_chunk(*args)

    monkeypatch.setattr(listops_generate, "generate_chunk", chunk_then_signal)
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: lost.append(unraisable.exc_type))
    cfg = compose_run([*SMOKE, "task.generator.num_train=20000", "task.generator.workers=1"], tmp_path)
    with pytest.raises(Preempted, match=r"data preparation \(SIGTERM\)"):
        run(cfg)
    assert lost == [Preempted], "the handler's exception must have been lost for this test to mean anything"
    total_chunks = 20256 // listops_generate.chunk_size(20256)
    assert len(calls) <= 4, f"generated {len(calls)} of about {total_chunks} chunks: the stop came too late"
    assert not list((tmp_path / "runs").rglob("record.json"))


def test_a_stop_inside_a_tracked_pool_map_cancels_the_work_not_started():
    """A stop check raising in ``tracked`` over ``Executor.map`` (Pathfinder's batches in worker processes): leaving
    the pool waits only for the work already running, not for every queued item."""
    from concurrent.futures import ThreadPoolExecutor

    from lra_bench.infra.progress import stop_checked, tracked

    started = []

    def work(i):
        started.append(i)
        time.sleep(0.02)
        return i

    def stop_after_three():
        if len(started) >= 3:
            raise Preempted(None, "data preparation (SIGTERM)")

    with pytest.raises(Preempted), stop_checked(stop_after_three), ThreadPoolExecutor(max_workers=1) as pool:
        list(tracked(pool.map(work, range(40)), 40, "work", "item"))
    assert len(started) <= 5, f"{len(started)} of 40 items ran after the stop was asked for at the third"


def test_sigterm_during_the_final_evaluation_resumes_from_the_finished_state(tmp_path, monkeypatch, caplog):
    import lra_bench.run.runner as runner

    caplog.set_level(logging.INFO, logger="lra_bench")
    cfg = compose_run(SMOKE, tmp_path)
    real_predict = runner.predict  # the final test evaluation

    def predict_then_sigterm(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return real_predict(*args, **kwargs)

    monkeypatch.setattr(runner, "predict", predict_then_sigterm)
    with pytest.raises(Preempted, match="the final test evaluation"):
        run(cfg)
    monkeypatch.undo()
    assert not list((tmp_path / "runs").rglob("record.json"))
    rec = run(cfg)
    assert "(step 40)" in caplog.text, "must resume from the finished state, not train again"
    reference = run(compose_run(SMOKE, tmp_path / "ref"))
    for key in SAME:
        assert rec[key] == reference[key], key


@pytest.mark.parametrize(("sig", "code", "word"),
                         [(signal.SIGTERM, 75, "preempted"), (signal.SIGINT, 130, "interrupted")])
def test_sigterm_to_a_sweep_parent_stops_the_sweep_and_keeps_finished_records(tmp_path, sig, code, word):
    args = ["run.py", "-m", "attention=softmax,linear,local", "profile=smoke", "trainer.max_steps=400",
            "trainer.eval_every=200", "trainer.checkpoint_every=20"]
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env_for(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300
    while not list((tmp_path / "cache" / "checkpoints").rglob("ckpt.json")):
        assert proc.poll() is None and time.time() < deadline, "sweep ended before its first checkpoint"
        time.sleep(0.05)
    proc.send_signal(sig)  # the parent only, as a scheduler or a user's kill would (Ctrl-C: parent and job)
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == code, out[-3000:]  # SIGINT = Ctrl-C: 130, stopped on purpose, not requeued
    assert "rerun the same sweep command to resume" in out and f"{word}:" in out
    assert "Traceback" not in out, out[-3000:]
    assert not list((tmp_path / "runs").rglob("record.json")), "the preempted job wrote no record"
    started = {p.parent.parent.name for p in (tmp_path / "cache" / "checkpoints").rglob("ckpt.json")}
    assert started == {"softmax"}, f"no further job may start after the preemption: {started}"
    assert f"3 jobs: 1 {word}, 2 not started" in out, out[-3000:]  # issue 40: every job of the sweep is listed


def test_sigkill_is_recorded_as_killed_not_oom(tmp_path):
    cfg = compose_run(SMOKE, tmp_path)
    rec = record_crash(cfg, -signal.SIGKILL)
    assert rec["status"] == "killed" and "possibly out of memory" in rec["message"]
    (stored,) = read_records(tmp_path / "runs")
    assert stored["status"] == "killed"
    _, md = table1(load_runs(tmp_path / "runs"))
    assert "KILL" in md


def test_sigkill_record_never_replaces_an_ok_one(tmp_path):
    cfg = compose_run(SMOKE, tmp_path)
    ok = run(cfg)
    record_crash(cfg, -signal.SIGKILL)
    (stored,) = read_records(tmp_path / "runs")
    assert stored["status"] == "ok" and stored["finished_at"] == ok["finished_at"]


# ------------------------------------------------------------------------------- 8: the report's results dir


def test_report_reads_lra_results_dir(tmp_path, monkeypatch, report_script):
    write_record(fake_record("ok", test_acc=0.5, params=1), tmp_path / "elsewhere")
    out = tmp_path / "out"
    monkeypatch.setenv("LRA_RESULTS_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setenv("LRA_BENCH_DIR", str(tmp_path / "no-bench"))
    done = report_script("--out", out)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "50.00" in (out / "table1.md").read_text()


def test_a_requeue_whose_scontrol_got_the_requeues_sigterm_ends_the_attempt_as_requeued():
    """SLURM's SIGTERM to a requeued job can reach `scontrol requeue` itself before it exits (seen in CI under load):
    submitit then raises CalledProcessError although the job was requeued. The attempt ends as after a requeue
    (SystemExit(-1), no result file: the parent waits for the requeued attempt); other failures still raise."""
    import signal
    import subprocess

    from lra_bench.run.scheduler import hand_over

    def scontrol(code: int, cmd: tuple[str, ...] = ("scontrol", "requeue", "4")):
        def handler(signum: int, frame: object) -> None:
            raise subprocess.CalledProcessError(code, list(cmd))
        return handler

    with pytest.raises(SystemExit) as ended:
        hand_over(scontrol(-signal.SIGTERM), signal.SIGUSR2)
    assert ended.value.code == -1
    with pytest.raises(subprocess.CalledProcessError):
        hand_over(scontrol(1), signal.SIGUSR2)  # scontrol failed: the job was not requeued
    with pytest.raises(subprocess.CalledProcessError):
        hand_over(scontrol(-signal.SIGTERM, ("sacct", "-j", "4")), signal.SIGUSR2)
    seen = []
    hand_over(lambda signum, frame: seen.append(signum), signal.SIGTERM)  # submitit only logs a SIGTERM
    assert seen == [signal.SIGTERM]
