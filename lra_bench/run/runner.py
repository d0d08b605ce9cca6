"""``run(cfg) -> record``: validate, build, load, train, evaluate, measure, write one record.

Every configuration error surfaces before any data is loaded. Failures during training become a
record with status ``oom``, ``diverged`` or ``failed`` (and its message) instead of a lost run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import json
import logging
import os
import platform
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import DictConfig
from torch.nn.parallel import DistributedDataParallel

import lra_bench
from lra_bench.config.plan import Plan, plan, use_deterministic_algorithms
from lra_bench.data.cache import CachedSplits
from lra_bench.errors import (
    EXIT_FAILED,
    CheckpointMismatch,
    ConfigError,
    LRABenchError,
    RunFailed,
    RunInProgress,
    exit_code_for,
)
from lra_bench.infra import distributed
from lra_bench.infra.loggers import LoggerSettings, build_logger
from lra_bench.infra.machine import CoreUse
from lra_bench.infra.memory import is_oom, memory_kind, rss_bytes
from lra_bench.infra.progress import stop_checked
from lra_bench.infra.runlock import run_lock
from lra_bench.store import predictions
from lra_bench.store.files import check_folder, remove_stale_temps, write_error, write_json_atomic
from lra_bench.store.records import (
    ATTEMPTS,
    RECORD_NAME,
    REQUIRED_FIELDS,
    code_version,
    git_commit,
    read_record,
    write_record,
)
from lra_bench.train import checkpoint
from lra_bench.train.contract import watch_mixers
from lra_bench.train.estimate import RunTooLong, guard_run
from lra_bench.train.loop import Checkpointing, Diverged, Preempted, Shard, TrainResult, predict, train
from lra_bench.train.pretrain import pretrain
from lra_bench.train.step import compile_enabled

log = logging.getLogger(__name__)

PRETRAIN_DIR = "pretrain"  # the pretraining's checkpoints: a sub-folder of the run's checkpoint folder
PRETRAINED_HERE = "pretrained_here.json"  # in the run's checkpoint folder: this run made the cached encoder

SKIP_STATUSES = ("ok", "diverged")  # deterministic outcomes: re-running would repeat them


STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR2, signal.SIGINT)
#: a second SIGINT within this many seconds of the first is the same Ctrl-C: a terminal delivers it to a sweep's
#: parent and its job alike, and the parent passes it on too. A second press later stops at once (``StoppedNow``).
SAME_CTRL_C_S = 1.0


class StoppedNow(Preempted):
    """Ctrl-C pressed a second time: the run stops at once, without writing a new checkpoint; the last one stays."""

    def __init__(self, where: str) -> None:
        super().__init__(None, where, signal="SIGINT")

    def describe(self) -> str:
        return (f"interrupted twice during {self.where}: stopped at once, without a new checkpoint; rerun the same "
                "command to resume from the last checkpoint (or from the start when there was none)")


class StopSignals:
    """SIGTERM (SLURM preemption), SIGUSR2 (submitit's warning) and SIGINT (Ctrl-C) during a run: the same safe stop.

    While ``polling`` (the training loop, which checkpoints at the next step boundary, and the record write, which
    is short) a signal only sets ``received``; at any other time (data preparation, the final test evaluation) it
    raises ``Preempted`` at once: there is nothing to save there (finished training is checkpointed), and the run
    exits for requeueing instead of being killed without a word."""

    def __init__(self) -> None:
        self.received: str | None = None
        self.received_at = 0.0  # time.monotonic() of the first signal
        self.polling = False
        self.phase = "starting"

    def requested(self) -> bool:
        return self.received is not None

    def handler(self, signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        if self.received is not None:  # a second signal: Ctrl-C pressed twice, or a sweep parent forwarding one
            if name == self.received == "SIGINT" and time.monotonic() - self.received_at > SAME_CTRL_C_S:
                log.warning("received SIGINT again: stopping now, without a new checkpoint")
                raise StoppedNow(self.phase)  # out of whatever runs, at its next Python line
            log.warning("received %s again: already stopping", name)
            return
        self.received, self.received_at = name, time.monotonic()
        if self.polling:
            log.warning("received %s during %s: stopping at the next safe point", self.received, self.phase)
            return
        log.warning("received %s during %s: stopping", self.received, self.phase)
        raise Preempted(None, f"{self.phase} ({self.received})")

    def raise_if_received(self) -> None:
        """Raise ``Preempted`` when a signal came in outside polling: the handler's own exception may have been
        swallowed (raised inside a ``__del__`` or gc callback); long loops call this (``progress.stop_checked``)."""
        if self.received is not None and not self.polling:
            raise Preempted(None, f"{self.phase} ({self.received})")


@contextlib.contextmanager
def stop_on_signals() -> Iterator[StopSignals]:
    """Install ``StopSignals``' handler for ``STOP_SIGNALS`` (main thread only); previous handlers come back."""
    stop = StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return
    previous = {sig: signal.signal(sig, stop.handler) for sig in STOP_SIGNALS}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def finished_record(p: Plan) -> dict[str, Any] | None:
    """The stored record of this exact configuration when it already finished (ok or diverged), else None."""
    record = stored_record(p)
    return record if record is not None and record.get("status") in SKIP_STATUSES else None


def already_finished(cfg: DictConfig) -> dict[str, Any] | None:
    """The finished record of ``cfg`` when running it would only skip it (``rerun`` false, a finished record, no
    leftover checkpoints for ``run`` to clear), else None. A sweep's parent then skips the job without starting a
    process for it: a resumed sweep no longer pays a Python and torch start-up (8-13 s) per finished job."""
    p = plan(cfg)
    if p.rerun:
        return None
    done = finished_record(p)
    return done if done is not None and not p.checkpoint_dir.exists() else None


def stored_record(p: Plan) -> dict[str, Any] | None:
    """The stored (valid) record of this configuration, whatever its status, or None. A record of another
    configuration (copied or moved here by hand) does not count: ``read_record`` checks it against its folder,
    and its full config hash must be this one."""
    path = p.run_dir / RECORD_NAME
    record = read_record(path) if path.exists() else None
    if record is not None and record.get("config_hash") != p.config_hash:
        log.warning("ignoring record %s: its config hash %s is not this run's %s", path, record.get("config_hash"),
                    p.config_hash)
        return None
    return record


def job_record(cfg: DictConfig, since: float) -> dict[str, Any] | None:
    """The record a sweep job's process left for ``cfg``: the newest one written since ``since`` (its
    ``record.json``, or an attempt kept beside an ok record), else the run's finished record (a skipped job); None
    when it left none (it died before it could write one)."""
    p = plan(cfg)
    paths = [p.run_dir / RECORD_NAME, *(p.run_dir / ATTEMPTS).glob("*.json")]
    fresh = [(path.stat().st_mtime, path) for path in paths if path.is_file() and path.stat().st_mtime >= since]
    for _, path in sorted(fresh, reverse=True):
        if (record := read_record(path)) is not None:
            return record
    return finished_record(p)


def record_path(cfg: DictConfig) -> Path:
    """Where the record of ``cfg`` is (or would be)."""
    return plan(cfg).run_dir / RECORD_NAME


def record_header(p: Plan, status: str, message: str) -> dict[str, Any]:
    """The fields every record has, whoever writes it (the run itself or ``record_crash``); the rest None."""
    record: dict[str, Any] = {key: None for key in REQUIRED_FIELDS}
    record.update({
        "run_id": p.run_dir.name, "attention": p.attention, "task": p.task.name, "model": p.model_name,
        "profile": p.profile, "seed": p.seed, "protocol": p.protocol, "config": p.config, "config_hash": p.config_hash,
        "code_version": code_version(), "test_fingerprint": None,
        "status": status, "message": message, "throughput": {}, "memory": {}, "torch_version": torch.__version__,
        "git_commit": git_commit(), "finished_at": dt.datetime.now(dt.UTC).isoformat(),
    })
    return record


def record_crash(cfg: DictConfig, exit_code: int) -> dict[str, Any] | None:
    """A record for a job whose process died without writing one (SIGKILL, segfault, ...). None when another
    process holds the run's lock (it runs the same config and will write the record itself)."""
    p = plan(cfg)
    killed = exit_code in (-signal.SIGKILL, 128 + signal.SIGKILL)
    message = f"job process exited with code {exit_code} without writing a record" + (
        " (SIGKILL: possibly out of memory, or killed by hand or by the scheduler)" if killed else "")
    record = record_header(p, "killed" if killed else "failed", message)
    try:
        with run_lock(p.run_dir):
            write_record(record, p.results_dir)  # never replaces an ok record (records.write_record)
    except RunInProgress as e:
        log.warning("not recording the crash: %s", e)
        return None
    return record


def record_failure(p: Plan, error: BaseException) -> None:
    """A ``failed`` record for an error outside training (data loading, model set-up, ...), which would otherwise
    end the run without one. Best effort: when even this write fails (a full disk), the error is only logged."""
    record = record_header(p, "failed", f"{type(error).__name__}: {str(error)[:2000]}")
    try:
        write_record(record, p.results_dir)
    except (OSError, ValueError) as e:
        log.error("could not record the failure of %s: %s", p.run_dir, e)


def settle_checkpoint(p: Plan, done: dict[str, Any] | None, is_main: bool) -> dict[str, Any]:
    """The identity this attempt's checkpoints carry (config hash, code version, and the checksum of the finished
    record a rerun replaces), after settling what the checkpoint folder holds:

    * a finished record's leftover (killed between the record and the clean-up) is removed; a rerun of that record
      that was interrupted (its checkpoints name the record they replace) is kept and resumed: ``rerun=true``
      starts over once, at the start of the attempt, and a preempted or requeued rerun goes on from its checkpoint;
    * a checkpoint of another config hash or code version (copied by hand, written by older code) is refused with
      ``CheckpointMismatch`` -- ``rerun=true`` sets it aside and starts over, ``resume=force`` resumes it anyway."""
    directory = p.checkpoint_dir
    stored = checkpoint.stored_identity(directory) if directory.is_dir() else None
    if stored is None and (directory / PRETRAIN_DIR).is_dir():  # interrupted in the pretraining phase
        stored = checkpoint.stored_identity(directory / PRETRAIN_DIR)
    replaces = None
    if done is not None:
        if stored is not None and done.get("checksum") and stored.get("replaces") == done["checksum"]:
            replaces = done["checksum"]  # an interrupted rerun of the finished record: its own checkpoint
        else:
            if directory.exists() and is_main:  # killed between the record and the clean-up
                log.info("removing the leftover checkpoints of the finished run: %s", directory)
                checkpoint.clear(directory)
            stored, replaces = None, done.get("checksum") if p.rerun else None
    identity = {"config_hash": p.config_hash, "code_version": code_version(), "replaces": replaces}
    if stored is None or (done is not None and not p.rerun):
        return identity
    differs = [f"{key} {stored.get(key)} (this run: {identity[key]})" for key in ("config_hash", "code_version")
               if stored.get(key) != identity[key]]
    if not differs:
        return identity
    what = ("an older lra-bench that stored no identity" if stored is checkpoint.NO_IDENTITY
            else "another " + " and ".join(differs))
    if p.resume == "force":
        log.warning("resuming the checkpoint in %s, written by %s, because resume=force", directory, what)
        return identity
    if p.rerun:
        if is_main:
            checkpoint.set_aside(directory, f"written by {what}; rerun=true starts over")
        return identity
    raise CheckpointMismatch(f"the checkpoint in {directory} was written by {what}: not resumed. Start over with "
                             "rerun=true (it is set aside, not deleted), or resume it anyway with resume=force")


def run(cfg: DictConfig) -> dict[str, Any]:
    """Train and evaluate one configuration; returns the record written to the results store.

    A configuration whose record already exists with status ok or diverged is not run again (an
    interrupted sweep resumes by re-running it) unless ``rerun=true``; an interrupted run resumes from
    its last checkpoint (``settle_checkpoint``: only its own). Whatever ends the run inside -- an exception, an
    exit (``SystemExit`` too) -- leaves a failed record and reaches the caller as an error.
    """
    started = time.time()
    p = plan(cfg)
    dinfo = distributed.from_env()
    if dinfo.is_main:  # one line naming the path, before anything is created
        check_folder(p.run_dir, "the run's results folder")
        check_folder(p.checkpoint_dir, "the run's checkpoint folder")
    # rank 0 alone holds the lock: the other ranks of one torchrun job are the same run
    with run_lock(p.run_dir) if dinfo.is_main else contextlib.nullcontext(), stop_on_signals() as stop:
        if dinfo.is_main:  # this process holds the run: what a killed one left here is stale
            remove_stale_temps(p.run_dir, p.run_dir / ATTEMPTS, p.checkpoint_dir, p.checkpoint_dir / PRETRAIN_DIR)
        done = finished_record(p)
        try:
            identity = settle_checkpoint(p, done, dinfo.is_main)  # a refused checkpoint is a failed attempt
            if done is not None and not p.rerun:
                log.info("skipping %s: finished record with status %s exists (rerun=true runs it again)",
                         done["run_id"], done["status"])
                return done
            return _run_locked(p, dinfo, stop, started, identity)
        except Preempted as e:
            e.signal = e.signal or stop.received  # run.py's exit code and message depend on it
            e.on_another_rank = e.signal is None and dinfo.enabled  # the ranks agreed to stop (distributed.any_rank)
            raise
        except (KeyboardInterrupt, RunTooLong):  # nothing started: no record
            raise
        except (Exception, SystemExit) as e:
            if dinfo.is_main:
                record_failure(p, e)
            if isinstance(e, SystemExit):
                raise RunFailed(f"SystemExit({e.code!r}) was raised inside the run (something called sys.exit or "
                                f"exit): recorded as failed in {p.run_dir}") from e
            if isinstance(e, OSError) and not isinstance(e, LRABenchError) and (
                    failed := write_error(Path(e.filename or p.run_dir), "the run's files", e)) is not None:
                raise failed from e
            raise


@dataclasses.dataclass
class Outcome:
    """How training and the test evaluation ended."""

    status: str = "ok"
    message: str = ""
    result: TrainResult | None = None
    test_acc: float | None = None
    test_predicted: np.ndarray | None = None  # the predicted class of every test example
    test_seconds: float | None = None
    baseline_rss: int | None = None  # resident memory before training (bytes)
    pretraining: dict[str, Any] | None = None  # the pretraining phase's measurements (pretrain=mlm|causal)
    machine: dict[str, Any] | None = None  # load and other work on the cores during training (infra.machine)


def _run_locked(p: Plan, dinfo: distributed.DistInfo, stop: StopSignals, started: float,
                identity: dict[str, Any]) -> dict[str, Any]:
    """``run`` once this process holds the run's lock and the signal handlers are in place."""
    stop.phase = "data preparation"
    if p.pretrain is not None and dinfo.enabled and checkpoint.load(p.pretrained_dir) is None:
        raise ConfigError(f"pretrain={p.protocol} under torchrun needs its pretrained encoder cached: pretrain in one "
                          f"process first (the same command without torchrun; it caches {p.pretrained_dir}), then "
                          "fine-tune under torchrun")
    use_deterministic_algorithms(p.trainer.deterministic)
    device = distributed.setup(dinfo, p.device, p.trainer.batch_size)
    if not dinfo.enabled and not checkpoint.exists(p.checkpoint_dir):  # before any data: too long, say so now
        pre = p.pretrain.settings if p.pretrain is not None and not checkpoint.exists(p.pretrained_dir) else None
        guard_run(p.model, p.task, p.trainer, device, p.trainer.max_steps, p.guard, p.profile,
                  (pre.max_steps, pre.batch_size) if pre else (0, 0))  # a cached encoder is not pretrained again
    t0 = time.perf_counter()
    with stop_checked(stop.raise_if_received):  # generation and decoding loops stop at their next chunk
        data = p.task.load(p.cache_dir)
    data_seconds = time.perf_counter() - t0
    log.info("data %s (%s, %.1fs): %s", p.task.name, "cache hit" if data.reused else "built",
             data_seconds, {s: len(y) for s, y in data.labels.items()})
    model = p.model.to(device)
    watch_mixers(model)  # the mixer contract on the first training and evaluation batches (train/contract.py)
    params = sum(t.numel() for t in model.parameters())
    compiled = compile_enabled(p.trainer.compile, device)
    if compiled:
        model.compile()  # in place: parameter names, checkpoints and the best-val state are unchanged
    if dinfo.enabled:
        model = DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    ckpt_dir = p.checkpoint_dir
    outcome = _train_and_test(p, dinfo, stop, model, data, device, ckpt_dir, identity)
    # an error may have ended this rank alone: then no collective (the others may wait in another); torchrun stops
    # them when this process exits with the failure. Diverged and ok are reached by every rank together.
    together = outcome.status not in ("failed", "oom")
    peak = outcome.result.peak_memory_bytes if outcome.result else None
    if together:
        peak = distributed.max_over_ranks(peak, dinfo)
    ends_with = 0 if outcome.status == "ok" else EXIT_FAILED  # the code run.py ends with for this outcome
    if not dinfo.is_main:
        if together:
            distributed.teardown(dinfo, ends_with)
        return {"status": outcome.status, "message": outcome.message, "rank": dinfo.rank,
                "test_acc": outcome.test_acc}
    record = record_header(p, outcome.status, outcome.message)
    record.update(_measured_fields(p, outcome, data, dinfo, device, peak))
    record["compiled"] = compiled
    record["param_groups"] = outcome.result.param_groups if outcome.result else None  # names, lr, weight decay
    result = outcome.result
    pre = outcome.pretraining
    record["pretraining"] = pre  # None when trained from scratch
    record["phases"] = {  # wall seconds; what the rest of wall_time_s is: start-up, model build, record writing
        "data_s": data_seconds,
        "pretrain_s": pre["loop_s"] if pre else None,  # the pretraining's loop, this run's or the cached one's
        "pretrain_reused": pre["reused"] if pre else None,  # true: the cached encoder, not paid again by this run
        "train_loop_s": result.loop_seconds if result else None,  # validation evaluations included
        "val_eval_s": result.val_eval_seconds if result else None,
        "val_evals": len(result.evals) if result else 0,
        "test_eval_s": outcome.test_seconds,
        # the experiment's training compute: pretraining + fine-tune loops (whoever paid the pretraining)
        "train_total_s": (result.loop_seconds + (pre["loop_s"] if pre else 0.0)) if result else None,
    }
    record.update({"params": params, "data_seconds": data_seconds, "wall_time_s": time.time() - started,
                   "started_at": dt.datetime.fromtimestamp(started, dt.UTC).isoformat(),
                   "finished_at": dt.datetime.now(dt.UTC).isoformat()})
    path = write_record(record, p.results_dir)
    if outcome.status in SKIP_STATUSES:  # finished: the record is the result. Otherwise keep them: a rerun resumes
        checkpoint.clear(ckpt_dir)
    if together:
        distributed.teardown(dinfo, ends_with)
    log.info("record written to %s (status %s, test acc %s)", path, outcome.status, outcome.test_acc)
    return record


def _train_and_test(p: Plan, dinfo: distributed.DistInfo, stop: StopSignals, model: torch.nn.Module,
                    data: CachedSplits, device: torch.device, ckpt_dir: Path, identity: dict[str, Any]) -> Outcome:
    """Train, then evaluate on the test split; a divergence or failure becomes the outcome, a preemption raises."""
    splits = {s: (data.inputs[s], data.labels[s]) for s in ("train", "val", "test")}
    logger_settings = p.logger if dinfo.is_main else LoggerSettings(kind="none")
    if logger_settings.group is None and os.environ.get("LRA_BENCH_SWEEP"):
        logger_settings = dataclasses.replace(logger_settings, group=f"sweep-{os.environ['LRA_BENCH_SWEEP']}")
    logger = build_logger(logger_settings, name=f"{p.attention}-{p.task.name}-{p.run_dir.name}",
                          config=p.config, tags=[p.attention, p.task.name, p.profile],
                          out_dir=p.cache_dir)  # wandb adds wandb/
    outcome = Outcome(baseline_rss=rss_bytes())
    try:
        checkpointing = Checkpointing(directory=ckpt_dir, every=p.trainer.checkpoint_every,  # torchrun: the ranks
                                      stop_requested=lambda: distributed.any_rank(stop.requested()),  # stop together
                                      identity=identity)
        stop.phase, stop.polling = "pretraining" if p.pretrain else "training", True
        if stop.requested():  # a signal that came in between the data and the first step
            raise Preempted(None, f"data preparation ({stop.received})")
        use = CoreUse(threads=torch.get_num_threads())
        try:
            with use.measuring():  # both phases: the pretraining's steps are the run's too
                if p.pretrain is not None:
                    outcome.pretraining = pretrain_phase(p, getattr(model, "module", model), data, device,
                                                         Checkpointing(ckpt_dir / PRETRAIN_DIR,
                                                                       p.trainer.checkpoint_every, stop.requested,
                                                                       identity))
                    stop.phase = "training"
                outcome.result = train(model, splits, p.trainer, device, p.seed, on_metrics=logger.log,
                                       checkpointing=checkpointing, shard=Shard(dinfo.rank, dinfo.world),
                                       profile=p.profile)
        finally:
            outcome.machine = use.summary()
        stop.phase, stop.polling = "the final test evaluation", False
        t_test = time.perf_counter()
        outcome.test_predicted = predict(getattr(model, "module", model), splits["test"][0], p.trainer, device)
        outcome.test_acc = float(np.mean(outcome.test_predicted == splits["test"][1]))
        outcome.test_seconds = time.perf_counter() - t_test
        stop.phase, stop.polling = "writing the record", True
        logger.log({"test/acc": outcome.test_acc}, p.trainer.max_steps)
    except Preempted as e:
        logger.finish(exit_code=1)
        if e.step is not None:  # every rank stopped at this step boundary (any_rank): they leave the group together
            distributed.teardown(dinfo, exit_code_for(e.signal or stop.received))  # run.py's code
        raise  # outside the training loop a signal may have reached this rank alone: no collective, torchrun stops all
    except Diverged as e:
        stop.phase, stop.polling = "writing the record", True
        outcome.status, outcome.message = "diverged", str(e)
    except (Exception, SystemExit) as e:  # noqa: BLE001 - any failure (an exit too) is recorded, then reported
        stop.phase, stop.polling = "writing the record", True
        outcome.status = "oom" if is_oom(e) else "failed"
        outcome.message = f"{type(e).__name__}: {str(e)[:2000]}"
        if isinstance(e, SystemExit):
            outcome.message = f"SystemExit({e.code!r}) was raised inside the run (something called sys.exit or exit)"
        log.error("run ended with status %s: %s", outcome.status, outcome.message,
                  exc_info=outcome.status == "failed" and not isinstance(e, LRABenchError))  # ours say it all
    logger.finish(exit_code=0 if outcome.status == "ok" else 1)
    return outcome


def pretrain_phase(p: Plan, model: torch.nn.Module, data: CachedSplits, device: torch.device,
                   checkpointing: Checkpointing) -> dict[str, Any]:
    """Self-pretraining before the fine-tune: the cached encoder of this config and seed when there is one, else
    pretraining on the training inputs (resumable; never the labels), cached for the next run that shares it.
    ``model``'s encoder then holds the pretrained weights, and the global RNG is as it was on entry, so the fine-tune
    draws what the same run from scratch would (same head initialisation, dropout and batch order). Returns the
    record's ``pretraining`` field; its ``reused`` is true only when another run paid for the encoder: a run whose
    fine-tune was interrupted after its own pretraining finished loads the cache on resuming, and a marker in its
    checkpoint folder (``PRETRAINED_HERE``, cleared with it when the record is written) says the cost is its own."""
    assert p.pretrain is not None
    settings, key = p.pretrain.settings, p.pretrain.cache_key
    about = {"objective": settings.name, "loss": settings.loss, "mask_rate": settings.mask_rate, "cache_key": key}
    here = checkpointing.directory.parent / PRETRAINED_HERE
    cached = checkpoint.load(p.pretrained_dir)
    if cached is not None and cached.get("key") == key:
        try:
            model.encoder.load_state_dict(cached["encoder"])
        except (RuntimeError, KeyError) as e:  # it verified but does not fit this code: pretrain again
            checkpoint.set_aside(p.pretrained_dir, f"{type(e).__name__}: {str(e)[:500]}")
        else:
            own = _made_here(here) == key
            log.info("pretrained encoder %s from %s (%s steps, %.0f s when it was made)",
                     "of this run's earlier process loaded" if own else "reused", p.pretrained_dir,
                     cached["summary"]["steps"], cached["summary"]["loop_s"])
            return {**cached["summary"], **about, "reused": not own}
    rng = checkpoint.rng_state()
    pretrainer = p.pretrain.model.to(device)
    if compile_enabled(p.trainer.compile, device):
        pretrainer.compile()
    inputs = {"train": data.inputs["train"], "val": data.inputs["val"]}  # inputs only: no label reaches it
    try:
        result = pretrain(pretrainer, inputs, settings, p.trainer, p.task.pad_id, device, p.seed, checkpointing)
    except Diverged as e:
        e.args = (f"pretraining: {e}",)
        raise
    checkpoint.set_rng_state(rng)
    summary = {**result.summary(), **about}
    write_json_atomic(here, {"cache_key": key})  # before the cache: a later process of this run knows it paid
    checkpoint.save(p.pretrained_dir, {"step": result.steps, "key": key, "encoder": model.encoder.state_dict(),
                                       "summary": summary})
    checkpoint.clear(checkpointing.directory)  # cached: its checkpoints are no longer needed
    log.info("pretrained encoder cached in %s", p.pretrained_dir)
    return {**summary, "reused": False}


def _made_here(marker: Path) -> str | None:
    """The cache key of the encoder this run made in an earlier process (``PRETRAINED_HERE``), or None."""
    try:
        return json.loads(marker.read_text()).get("cache_key")
    except (OSError, ValueError, AttributeError):
        return None


def _measured_fields(p: Plan, outcome: Outcome, data: CachedSplits, dinfo: distributed.DistInfo,
                     device: torch.device, peak: int | None) -> dict[str, Any]:
    """The record's results, measurements and provenance."""
    result = outcome.result
    timer = result.timer if result else None
    sps = timer.steps_per_second() if timer else None
    tokens_per_step = p.trainer.batch_size * p.task.max_len * (2 if p.task.dual else 1)
    test_labels = data.labels["test"]
    test_print = predictions.test_fingerprint(data.inputs["test"], test_labels)  # which test set it was scored on
    return {
        "best_val_acc": result.best_val_acc if result else None,
        "best_step": result.best_step if result else None,
        "test_acc": outcome.test_acc,
        "test_examples": int(len(test_labels)),
        "val_examples": int(len(data.labels["val"])),
        "test_majority_rate": float(np.bincount(test_labels).max() / len(test_labels)),
        predictions.FIELD: None if outcome.test_predicted is None else predictions.encode(
            outcome.test_predicted, test_labels, test_print),
        "examples": {s: int(len(y)) for s, y in data.labels.items()},
        "evals": result.evals if result else [],
        "steps": result.steps if result else None,
        "restarts": result.restarts if result else None,  # resumes from a checkpoint (preemption, requeue, kill)
        "throughput": {  # global figures: the global batch is split over `processes` ranks
            "steps_per_s": sps,
            "examples_per_s": sps * p.trainer.batch_size if sps else None,
            "tokens_per_s": sps * tokens_per_step if sps else None,  # padded positions fed to the model
            "timed_steps": timer.timed_steps if timer else 0,
            "timed_seconds": timer.timed_seconds if timer else 0.0,
            "warmup_steps_excluded": timer.excluded if timer else 0,  # every process's warm-up (resumes too)
            "batch_size": p.trainer.batch_size,
            "seq_len": p.task.max_len,
            "documents_per_example": 2 if p.task.dual else 1,
            "processes": dinfo.world,
        },
        "memory": {
            "peak_bytes": peak,  # max over ranks
            "kind": memory_kind(device),
            "reset_ok": result.memory_reset if result else False,
            "rss_before_training_bytes": outcome.baseline_rss,
            "allocator_reuse": result.allocator_reuse if result else False,  # CPU: as the benchmark's cells
        },
        "machine": outcome.machine,
        "device": str(device) if device.type == "cpu" else torch.cuda.get_device_name(device),
        "lra_bench_version": lra_bench.__version__,
        "python_version": platform.python_version(),
        "host": socket.gethostname(),
        "dataset_fingerprint": data.meta["fingerprint"],
        "test_fingerprint": test_print,
        "dataset_source": data.meta.get("source"),
        "synthetic": bool(data.meta.get("synthetic", False)),  # synthetic runs never enter an LRA score
        "data_cache_reused": data.reused,
    }
