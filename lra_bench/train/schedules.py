"""LRA's learning-rate schedules (``utils/train_utils.py::create_learning_rate_scheduler``), and s4's cosine.

The rate is a product of factors evaluated at the optimizer step t (0 for the first update); ``total`` is the
schedule's horizon (``trainer.schedule_steps``, by default ``max_steps``):
    rsqrt:  constant * min(1, t / warmup) / sqrt(max(t, warmup))          (ListOps, Text, Retrieval)
    cosine: constant * min(1, t / warmup) * max(0, 0.5 (1 + cos(pi * ((max(0, t - warmup) / total) % 1))))
            (image tasks; one cycle over the whole run: it decays over ``total`` steps counted from the end of the
            warm-up, so at t = total it is still 0.5 (1 + cos(pi (total - warmup) / total)), 0.0245 with 10 % warm-up)
    constant: constant * min(1, t / warmup)
    cosine_to_zero: constant * t / warmup during the warm-up, then max(0, 0.5 (1 + cos(pi (t - warmup) /
            (total - warmup)))): zero at t = total. The s4 repository's ``cosine_warmup`` (transformers'
            ``get_cosine_schedule_with_warmup``, half a cycle), used by ``profile=s4`` only.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, get_args

from lra_bench.checks import check_choice

#: the names ``trainer.schedule`` accepts (checked against it)
Schedule = Literal["rsqrt", "cosine", "constant", "cosine_to_zero"]


# each takes the warm-up factor first: (warm, step, warmup_steps, total_steps) -> the rate's multiplier
def _rsqrt(warm: float, step: int, warmup_steps: int, total_steps: int) -> float:
    return warm / math.sqrt(max(step, warmup_steps, 1))


def _cosine(warm: float, step: int, warmup_steps: int, total_steps: int) -> float:
    progress = (max(0, step - warmup_steps) / max(total_steps, 1)) % 1.0
    return warm * max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def _constant(warm: float, step: int, warmup_steps: int, total_steps: int) -> float:
    return warm


def _cosine_to_zero(warm: float, step: int, warmup_steps: int, total_steps: int) -> float:
    if step < warmup_steps:
        return warm
    progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)
    return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


DECAY: dict[str, Callable[[float, int, int, int], float]] = {
    "rsqrt": _rsqrt, "cosine": _cosine, "constant": _constant, "cosine_to_zero": _cosine_to_zero}
assert set(DECAY) == set(get_args(Schedule)), "every Schedule name needs its factor in DECAY"


def lr_factor(step: int, schedule: Schedule, warmup_steps: int, total_steps: int) -> float:
    """Multiplier of the base rate (``trainer.lr`` = LRA's ``constant``) at optimizer step ``step``."""
    warm = min(1.0, step / warmup_steps) if warmup_steps > 0 else 1.0
    if schedule not in DECAY:
        check_choice("trainer", "schedule", schedule, Schedule)  # raises ConfigError naming the valid ones
    return DECAY[schedule](warm, step, warmup_steps, total_steps)


def peak_factor(schedule: Schedule, warmup_steps: int) -> float:
    """The largest ``lr_factor`` of a run: rsqrt peaks at 1/sqrt(warmup) when the warm-up ends, the others at 1."""
    return 1.0 / math.sqrt(max(warmup_steps, 1)) if schedule == "rsqrt" else 1.0
