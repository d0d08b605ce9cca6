"""How long a run's training will take, measured before any data is loaded: two probe steps of a copy of the model
on synthetic batches of 1 and 2 examples, extrapolated to the run's batch and steps; and the guard that stops a run
that would take longer than ``guard.max_hours`` with one line naming what to run instead.

The probe trains a deep copy under a forked RNG, so the run itself is bit-identical with or without it. A step's
time is taken as ``t1 + (t2 - t1) * (B - 1)`` (fixed cost plus a per-example cost; never below ``t2``): on a
2-core CPU a tiny model's step is mostly fixed cost, a paper-sized one's mostly per-example cost.
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from lra_bench.checks import PositiveFloat, check_fields
from lra_bench.errors import LRABenchError
from lra_bench.infra.progress import duration, smaller_profile
from lra_bench.train.settings import TrainerSettings
from lra_bench.train.step import checkpoint_blocks, train_step

log = logging.getLogger(__name__)


class RunTooLong(LRABenchError):
    """The estimated training time is over ``guard.max_hours`` (and ``--force`` was not given)."""


@dataclass
class GuardSettings:
    """``guard:`` of configs/run.yaml: the longest run that starts without ``--force`` (null: no limit)."""

    max_hours: PositiveFloat | None = 24.0
    force: bool = False

    def __post_init__(self) -> None:
        check_fields(self, "guard")


@dataclass
class Estimate:
    step_s: float  # one training step at the run's batch
    train_s: float  # the steps left to train (the pretraining's included)
    probe_s: tuple[float, float]  # the probe steps at batch 1 and 2
    steps: int
    pretrain_steps: int = 0  # pretrain=mlm|causal: the pretraining's steps, before the fine-tune's
    pretrain_s: float = 0.0  # their share of train_s

    def describe(self) -> str:
        t1, t2 = self.probe_s
        pre = (f"{self.pretrain_steps} pretraining steps, about {duration(self.pretrain_s)}, then "
               if self.pretrain_steps else "")
        return (f"about {duration(self.train_s)} of training ({pre}{self.steps} steps of about {self.step_s:.3g} s, "
                f"from probe steps of {t1:.3g} s and {t2:.3g} s at batch 1 and 2; evaluations come on top)")


def probe_step_seconds(model: nn.Module, task: Any, settings: TrainerSettings, device: torch.device,
                       batches: tuple[int, ...]) -> list[float]:
    """Seconds of the run's own training step (``train_step``, with ``trainer.activation_checkpointing`` as the run
    has it) on a copy of ``model`` at each of ``batches`` synthetic examples, after one untimed step at the first
    (one-off costs)."""
    from lra_bench.train.loop import make_optimizer  # the loop imports this module's caller, not this module

    seconds: list[float] = []
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        probe = copy.deepcopy(model).to(device).train()
        checkpoint_blocks(probe, settings.activation_checkpointing)  # the run's step: recomputed blocks included
        optimizer, _ = make_optimizer(probe, settings)
        low = 0 if task.pad_id is None else 1
        for i, batch in enumerate((batches[0], *batches)):
            shape = (batch, 2, task.max_len) if task.dual else (batch, task.max_len)
            x = torch.randint(low, task.vocab_size, shape, device=device)  # (B, N) or (B, 2, N)
            y = torch.randint(0, task.num_classes, (batch,), device=device)  # (B,)
            t0 = time.perf_counter()
            train_step(probe, optimizer, x, y, device, settings.precision, settings.grad_clip)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if i > 0:
                seconds.append(time.perf_counter() - t0)
        del probe, optimizer
    return seconds


def estimate_training(model: nn.Module, task: Any, settings: TrainerSettings, device: torch.device,
                      steps: int, pretrain: tuple[int, int] = (0, 0)) -> Estimate:
    """The time of ``steps`` training steps at ``settings.batch_size``, from probe steps at batch 1 and 2, plus
    ``pretrain`` = (steps, batch) of a pretraining phase before them. A pretraining step is timed as a classifier's
    step at its batch: the same encoder forward and backward, with a token-level head in place of the classifier's
    (an approximation; the head's cost is small beside the encoder's at every profile)."""
    t1, t2 = probe_step_seconds(model, task, settings, device, (1, 2))

    def at(batch: int) -> float:
        return max(t2, t1 + max(t2 - t1, 0.0) * (batch - 1))

    step, (pre_steps, pre_batch) = at(settings.batch_size), pretrain
    pre_s = at(pre_batch) * pre_steps if pre_steps else 0.0
    return Estimate(step_s=step, train_s=step * steps + pre_s, probe_s=(t1, t2), steps=steps,
                    pretrain_steps=pre_steps, pretrain_s=pre_s)


def check_guard(estimate: Estimate, guard: GuardSettings, profile: str, device: torch.device) -> None:
    """Raise ``RunTooLong`` (one line: the estimate, a smaller profile that is not this one, the steps that fit,
    ``--force``) when the estimate is over ``guard.max_hours`` and the run is not forced."""
    if guard.force or guard.max_hours is None or estimate.train_s <= guard.max_hours * 3600:
        return
    fits = max(1, int(guard.max_hours * 3600 / estimate.step_s))
    smaller = smaller_profile(profile)
    instead = f"profile={smaller} (a smaller run), or " if smaller else ""
    if estimate.pretrain_steps:  # both phases shrink by one factor (pretrain.max_steps follows trainer.max_steps
        share = guard.max_hours * 3600 / estimate.train_s  # by default: both are named)
        fits = max(1, int(estimate.steps * share))
        instead += f"pretrain.max_steps={max(1, int(estimate.pretrain_steps * share))} with "
    where = "a GPU (trainer.device=cuda) or " if device.type == "cpu" else ""
    raise RunTooLong(f"this run would take {estimate.describe()} on {describe_device(device)}, over "
                     f"guard.max_hours={guard.max_hours:g}: use {where}{instead}trainer.max_steps={fits} (about "
                     f"{guard.max_hours:g} h here); to start it anyway add --force")


def describe_device(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"this CPU ({torch.get_num_threads()} threads)"


def guard_run(model: nn.Module, task: Any, settings: TrainerSettings, device: torch.device, steps: int,
              guard: GuardSettings, profile: str, pretrain: tuple[int, int] = (0, 0)) -> Estimate | None:
    """Estimate the run's training time and apply the guard. A probe step that fails (out of memory, a mixer that
    raises) gives no estimate and no guard: the run goes on and its own first step meets the same failure, which
    then becomes the run's record (``oom``, ``failed``) instead of an error before any record."""
    try:
        estimate = estimate_training(model, task, settings, device, steps, pretrain)
    except Exception as e:  # noqa: BLE001 - any probe failure is the run's to record, not the probe's
        log.warning("no time estimate: the probe step failed (%s: %s); the run's own steps will meet it",
                    type(e).__name__, str(e)[:200])
        return None
    log.info("estimated: %s", estimate.describe())
    check_guard(estimate, guard, profile, device)
    return estimate
