"""The training loop: AdamW, LRA schedules, clipping, periodic full validation, best-val weights.

Plain PyTorch so every measurement stays visible: throughput is timed per training step (warm-up
steps and evaluation excluded, CUDA synchronised), peak memory is reset right before the loop.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import nn

from lra_bench.data.batches import eval_batches, train_batches
from lra_bench.infra import distributed
from lra_bench.infra.memory import AllocatorReuse, peak_memory_bytes, reset_peak_memory
from lra_bench.infra.progress import TRAIN_FORMAT, clock, live_bar, training_advice
from lra_bench.infra.timing import StepTimer
from lra_bench.train import checkpoint
from lra_bench.train.param_groups import describe, param_groups
from lra_bench.train.schedules import lr_factor, peak_factor
from lra_bench.train.settings import TrainerSettings
from lra_bench.train.step import autocast, checkpoint_blocks, train_step

log = logging.getLogger(__name__)


class Diverged(RuntimeError):
    """The training loss became NaN or infinite."""

    def __init__(self, step: int, loss: float, where: str = "") -> None:
        super().__init__(f"loss is {loss} at step {step}{where}")
        self.step = step


@dataclass
class TrainResult:
    best_val_acc: float
    best_step: int
    steps: int
    timer: StepTimer
    peak_memory_bytes: int | None
    memory_reset: bool
    evals: list[dict[str, float]] = field(default_factory=list)
    loop_seconds: float = 0.0  # wall time of the training loop, validation evaluations included (over resumes)
    val_eval_seconds: float = 0.0  # wall time of the validation evaluations (over resumes)
    restarts: int = 0  # how many times training resumed from a checkpoint (preempted, requeued, killed, rerun)
    param_groups: list[dict[str, object]] = field(default_factory=list)  # param_groups.describe
    allocator_reuse: bool = False  # CPU: freed memory kept for reuse after the first step (infra.memory)


@torch.no_grad()
def predict(model: nn.Module, inputs: np.ndarray, settings: TrainerSettings, device: torch.device) -> np.ndarray:
    """The predicted class of every example of a split, in order (int64)."""
    was_training = model.training
    model.eval()
    out = []
    for x, _ in eval_batches(inputs, np.zeros(len(inputs), np.int64), settings.eval_batch_size):
        with autocast(device, settings.precision):
            logits = model(x.to(device))
        out.append(logits.argmax(-1).cpu().numpy())
    model.train(was_training)
    return np.concatenate(out) if out else np.zeros(0, np.int64)


def evaluate(model: nn.Module, inputs: np.ndarray, labels: np.ndarray, settings: TrainerSettings,
             device: torch.device) -> float:
    """Accuracy over the whole split (every example counted once)."""
    return float(np.mean(predict(model, inputs, settings, device) == labels))


def make_optimizer(
    model: nn.Module, s: TrainerSettings
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    """AdamW over ``param_groups`` (the mixers' declared per-parameter settings) and the LRA schedule."""
    groups = param_groups(model, s.lr, s.weight_decay, peak_factor(s.schedule, s.warmup_steps))
    optimizer = torch.optim.AdamW(groups, lr=s.lr, betas=(s.beta1, s.beta2), eps=s.eps, weight_decay=s.weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: lr_factor(step, s.schedule, s.warmup_steps, s.schedule_steps or s.max_steps)
    )
    return optimizer, scheduler


class Preempted(Exception):
    """The run stopped on request (SIGTERM / SIGUSR2, or SIGINT = Ctrl-C): in training after writing a checkpoint
    (``step``; ``where`` names the phase when it is not the fine-tune: "pretraining"), or outside it (``where``: data
    preparation, final evaluation) with nothing to save; rerun to resume.
    ``signal`` is the name of the signal that stopped it, when the runner knows it; ``on_another_rank``: under
    torchrun the signal reached another rank, and this one stopped with it (``distributed.any_rank``)."""

    def __init__(self, step: int | None, where: str = "", signal: str | None = None,
                 on_another_rank: bool = False) -> None:
        self.step, self.where, self.signal, self.on_another_rank = step, where, signal, on_another_rank
        super().__init__(self.describe())

    def describe(self) -> str:
        how = "interrupted" if self.signal == "SIGINT" else "preempted"
        if self.step is not None:
            by = (f" by {self.signal}" if self.signal else
                  " by a stop signal to another rank" if self.on_another_rank else "")
            at = f"{self.where} step {self.step}" if self.where else f"step {self.step}"  # where: "pretraining"
            return f"{how}{by} at {at}; checkpoint written, rerun the same command to resume from {at}"
        return (f"{how} during {self.where}; rerun the same command to resume (finished training is "
                "checkpointed)")

    def __str__(self) -> str:
        return self.describe()


@dataclass
class Checkpointing:
    """Where and how often to checkpoint; ``stop_requested`` is polled after every step."""

    directory: Path | None = None
    every: int = 0  # steps; 0 = only when stopping
    stop_requested: Callable[[], bool] = lambda: False
    identity: dict[str, object] | None = None  # saved with every checkpoint (checkpoint.stored_identity reads it)

    def after_step(self, step: int, last: int, save: Callable[[int], None], where: str = "") -> None:
        """At the end of ``step``: ``save`` a checkpoint every ``every`` steps (the last step's state is saved by
        the loop itself), and when a stop was requested, save (once) and raise ``Preempted``."""
        saved = False
        if self.every and step % self.every == 0 and step < last:
            save(step)
            saved = True
        if self.stop_requested():
            if not saved:
                save(step)
            raise Preempted(step, where)


def finish_step(step: int, loss: torch.Tensor, hooks: list[nn.Module], timer: StepTimer,
                allocator: AllocatorReuse | None, agree: Callable[[bool], bool] = lambda bad: bad) -> float:
    """After the optimizer and scheduler steps: the modules' ``on_train_step`` hooks (feature redraws), the step's
    time, the allocator's switch to reuse after the process's first step (the benchmark's setting, outside the
    timed step), and the loss as a float (``Diverged`` when it is NaN or infinite; under data parallelism ``agree``
    (``Shard.agree``) makes every rank raise when it is so on any of them)."""
    for module in hooks:
        module.on_train_step(step)
    timer.stop()
    if allocator is not None:
        allocator.after_step()  # the first step of this process with the default allocator, then reuse
    loss_value = float(loss.detach())
    bad = not np.isfinite(loss_value)
    if agree(bad):
        raise Diverged(step, loss_value if bad else float("nan"), "" if bad else " on another rank")
    return loss_value


@dataclass
class Shard:
    """This process's slice of every global batch under data parallelism (rank r of w)."""

    rank: int = 0
    world: int = 1

    def take(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.world == 1:
            return x, y
        per = len(y) // self.world
        sl = slice(self.rank * per, (self.rank + 1) * per)
        return x[sl], y[sl]

    def agree(self, flag: bool) -> bool:
        """``flag`` on any rank (one small all-reduce per call under data parallelism; every rank calls it)."""
        return flag if self.world == 1 else distributed.any_rank(flag)


def train(
    model: nn.Module,
    data: dict[str, tuple[np.ndarray, np.ndarray]],
    settings: TrainerSettings,
    device: torch.device,
    seed: int,
    on_metrics: Callable[[dict[str, float], int], None] = lambda metrics, step: None,
    checkpointing: Checkpointing | None = None,
    shard: Shard | None = None,
    profile: str | None = None,
) -> TrainResult:
    """Train ``model`` in place; on return it holds the best-validation weights.

    With ``checkpointing.directory`` set, training resumes from the newest valid checkpoint there and
    writes one every ``checkpointing.every`` steps; a resumed run is bit-identical to an uninterrupted one
    on CPU. ``model`` may be DistributedDataParallel-wrapped; ``shard`` then selects this rank's slice. ``profile``
    (the run's) keeps the advice for a long run from naming that same profile.
    """
    s = settings
    ckpt = checkpointing or Checkpointing()
    shard = shard or Shard()
    core = getattr(model, "module", model)  # the unwrapped model (DDP keeps it in .module)
    checkpoint_blocks(core, s.activation_checkpointing)
    optimizer, scheduler = make_optimizer(model, s)
    hooks = [m for m in core.modules() if callable(getattr(m, "on_train_step", None))]
    timer = StepTimer(device=device, warmup=s.timing_warmup_steps)
    best_acc, best_step, best_state = -1.0, 0, None
    evals: list[dict[str, float]] = []
    running = {"loss": 0.0, "correct": 0, "seen": 0}
    start, peak_before = 0, None
    seconds = {"loop": 0.0, "val_eval": 0.0}  # carried over resumes in the checkpoint
    restarts = 0

    state = checkpoint.load(ckpt.directory) if ckpt.directory is not None else None
    if state is not None:
        initial = copy.deepcopy(core.state_dict())  # a failed load may have copied part of the state in
        rng = checkpoint.rng_state()
        try:
            core.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            checkpoint.set_rng_state(state["rng"])
            start, evals, running = state["step"], state["evals"], state["running"]
            best_acc, best_step, best_state = state["best_acc"], state["best_step"], state["best_state"]
            timer.load_state_dict(state["timer"])
            peak_before = state.get("peak_memory_bytes")
            seconds = state.get("seconds", seconds)
            restarts = state.get("restarts", 0) + 1
        except Exception as e:  # noqa: BLE001 - it verified but does not fit this code: start over, not fail forever
            checkpoint.set_aside(ckpt.directory, f"{type(e).__name__}: {str(e)[:500]}")
            core.load_state_dict(initial)  # and everything else as if there had been no checkpoint
            checkpoint.set_rng_state(rng)
            optimizer, scheduler = make_optimizer(model, s)
            timer = StepTimer(device=device, warmup=s.timing_warmup_steps)
            start, evals, running, peak_before = 0, [], {"loss": 0.0, "correct": 0, "seen": 0}, None
            best_acc, best_step, best_state = -1.0, 0, None
            seconds = {"loop": 0.0, "val_eval": 0.0}
            restarts = 0

    def save_checkpoint(step: int) -> None:
        if ckpt.directory is None or shard.rank != 0:
            return
        checkpoint.save(ckpt.directory, {
            "step": step, "model": core.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "rng": checkpoint.rng_state(), "evals": evals,
            "running": running, "best_acc": best_acc, "best_step": best_step, "best_state": best_state,
            "timer": timer.state_dict(), "seconds": {**seconds, "loop": seconds["loop"] + time.perf_counter() - t_loop},
            "peak_memory_bytes": max(filter(None, [peak_before, peak_memory_bytes(device)]), default=None),
            "restarts": restarts,
        }, identity=ckpt.identity)

    train_x, train_y = data["train"]
    batches = train_batches(train_x, train_y, s.batch_size, seed, start_step=start)
    model.train()
    memory_reset = reset_peak_memory(device)
    t_loop = time.perf_counter()
    advised = False
    with AllocatorReuse(device) as allocator, live_bar(s.max_steps, "train", " steps", initial=start,
                                                       show=shard.rank == 0, bar_format=TRAIN_FORMAT) as bar:
        for step in range(start + 1, s.max_steps + 1):
            timer.start()
            x, y = shard.take(*next(batches))
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            logits, loss = train_step(model, optimizer, x, y, device, s.precision, s.grad_clip)
            scheduler.step()
            loss_value = finish_step(step, loss, hooks, timer, allocator, shard.agree)
            running["loss"] += loss_value * len(y)
            running["correct"] += int((logits.detach().argmax(-1) == y).sum())
            running["seen"] += len(y)
            bar.update(1)
            if not bar.disable:  # the averages since the last log line (display only)
                bar.set_postfix_str(f"loss {running['loss'] / running['seen']:.3f}, "
                                    f"acc {running['correct'] / running['seen']:.3f}", refresh=False)
            if step % s.log_every == 0 or step == s.max_steps:
                metrics = {"train/loss": running["loss"] / running["seen"],
                           "train/acc": running["correct"] / running["seen"],
                           "train/lr": scheduler.get_last_lr()[0]}
                sps = timer.steps_per_second()
                if sps:
                    metrics["train/steps_per_s"] = sps
                log.info("step %d loss %.4f acc %.4f lr %.2e steps/s %s%s", step, metrics["train/loss"],
                         metrics["train/acc"], metrics["train/lr"], f"{sps:.2f}" if sps else "n/a",
                         f" ETA {clock((s.max_steps - step) / sps)}" if sps else "")  # evaluations not included
                advice = training_advice(s.max_steps - step, sps, profile) if sps and not advised else None
                if advice is not None:
                    log.warning("%s", advice)  # once per run, at the first measured speed
                    advised = True
                on_metrics(metrics, step)
                running = {"loss": 0.0, "correct": 0, "seen": 0}
            if step % s.eval_every == 0 or step == s.max_steps:
                t_eval = time.perf_counter()
                val_acc = evaluate(core, *data["val"], s, device)
                seconds["val_eval"] += time.perf_counter() - t_eval
                evals.append({"step": step, "val_acc": val_acc})
                on_metrics({"val/acc": val_acc}, step)
                log.info("step %d val acc %.4f (best %.4f)", step, val_acc, max(best_acc, val_acc))
                if val_acc > best_acc:  # strictly better: the earliest best is kept
                    best_acc, best_step = val_acc, step
                    best_state = {k: v.detach().clone() for k, v in core.state_dict().items()}
            ckpt.after_step(step, s.max_steps, save_checkpoint)
    if start < s.max_steps:  # the finished state: a preemption during the final evaluation resumes from here
        save_checkpoint(s.max_steps)
    seconds["loop"] += time.perf_counter() - t_loop
    peak = max(filter(None, [peak_before, peak_memory_bytes(device)]), default=None)
    assert best_state is not None
    core.load_state_dict(best_state)
    return TrainResult(best_val_acc=best_acc, best_step=best_step, steps=s.max_steps, timer=timer,
                       peak_memory_bytes=peak, memory_reset=memory_reset, evals=evals,
                       loop_seconds=seconds["loop"], val_eval_seconds=seconds["val_eval"], restarts=restarts,
                       allocator_reuse=allocator.applied,
                       param_groups=describe(optimizer, peak_factor(s.schedule, s.warmup_steps)))
