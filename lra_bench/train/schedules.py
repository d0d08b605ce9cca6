"""LRA's learning-rate schedules (``utils/train_utils.py::create_learning_rate_scheduler``).

The rate is a product of factors evaluated at the optimizer step t (0 for the first update):
    rsqrt:  constant * min(1, t / warmup) / sqrt(max(t, warmup))          (ListOps, Text, Retrieval)
    cosine: constant * min(1, t / warmup) * max(0, 0.5 (1 + cos(pi * ((max(0, t - warmup) / total) % 1))))
            (image tasks; one cycle over the whole run)
    constant: constant * min(1, t / warmup)
    linear_decay: constant * min(1, t / warmup) * max(0, (total - t) / (total - warmup))  after the warm-up
            (fairseq's ``linear_decay`` to 0 at ``total``: the Mega LRA recipes, profile=mega)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal, get_args

from lra_bench.config import check_choice

#: the names ``trainer.schedule`` accepts (checked against it)
Schedule = Literal["rsqrt", "cosine", "constant", "linear_decay"]


# each takes the warm-up factor first: (warm, step, warmup_steps, total_steps) -> the rate's multiplier
def _rsqrt(warm: float, step: int, warmup_steps: int, total_steps: int) -> float:
    return warm / math.sqrt(max(step, warmup_steps, 1))


def _cosine(warm: float, step: int, warmup_steps: int, total_steps: int) -> float:
    progress = (max(0, step - warmup_steps) / max(total_steps, 1)) % 1.0
    return warm * max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))


def _constant(warm: float, step: int, warmup_steps: int, total_steps: int) -> float:
    return warm


def _linear_decay(warm: float, step: int, warmup_steps: int, total_steps: int) -> float:
    if step <= warmup_steps:
        return warm
    return max(0.0, (total_steps - step) / max(total_steps - warmup_steps, 1))


DECAY: dict[str, Callable[[float, int, int, int], float]] = {"rsqrt": _rsqrt, "cosine": _cosine, "constant": _constant,
                                                            "linear_decay": _linear_decay}
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
