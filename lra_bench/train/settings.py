"""Typed, range-checked trainer settings (``configs/trainer``), validated before any data is loaded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from lra_bench.checks import Count, LearningRate, NonNegativeInt, Range, check_fields
from lra_bench.errors import ConfigError
from lra_bench.train.schedules import Schedule

Beta = Annotated[float, Range(0.0, 1.0, hi_open=True, why="Adam's moment decay")]
Epsilon = Annotated[float, Range(0.0, 1.0, lo_open=True)]


@dataclass
class TrainerSettings:
    """Args:
    max_steps: optimizer steps.
    batch_size: training batch (global; LRA 32 for ListOps).
    eval_batch_size: batch for val/test evaluation (always the full split, remainder included).
    lr: the schedule's ``constant`` (LRA ListOps 0.05 with rsqrt => peak 0.05/sqrt(warmup)).
    schedule: "rsqrt" | "cosine" | "constant" (LRA's) | "cosine_to_zero" (s4's; see ``schedules.py``).
    warmup_steps: linear warm-up steps.
    schedule_steps: the schedule's horizon (LRA's and s4's ``num_training_steps``); None = ``max_steps``. s4 trains
        some tasks for fewer steps than its schedule's horizon (whole epochs: Retrieval 45,960 of 50,000).
    weight_decay: AdamW decoupled weight decay (LRA 0.1 for ListOps).
    beta1, beta2, eps: Adam moments (LRA 0.9, 0.98, 1e-9).
    grad_clip: max global gradient norm, null = no clipping.
    eval_every: evaluate on the full validation split every k steps (and after the last step).
    timing_warmup_steps: first steps excluded from the throughput figures.
    log_every: steps between progress-log lines.
    device: "auto" (CUDA when available), "cpu" or "cuda[:i]".
    precision: "bf16" (autocast, CUDA only; CPU runs stay fp32) or "fp32".
    deterministic: torch deterministic algorithms (CPU runs are bit-exact for a seed).
    checkpoint_every: steps between resumable checkpoints (0 = only when preempted by SIGTERM/SIGUSR2).
    compile: ``torch.compile`` the model (in place, ``nn.Module.compile``): "auto" = on CUDA only, true, false.
        Compilation happens in the first steps (excluded from throughput by ``timing_warmup_steps``); the record
        says whether the run was compiled.
    flush_denormal: on CPU, flush denormal floats to zero (``torch.set_flush_denormal``). Trained attention
        produces denormals (exp of very negative scores) that x86 handles ~100x slower: measured on a Pathfinder
        run, steps/s fell from 17 to under 4 within 1,000 steps without it and stayed at 17 with it, same losses.
    activation_checkpointing: keep only each block's input in the forward pass and recompute the block's
        activations in the backward (``torch.utils.checkpoint`` per block): the memory of one block's activations
        instead of all of them, for about one more forward pass of time. Bit-identical results (the random state
        is replayed, batch-norm statistics are updated once); the record says whether it was on.
    """

    max_steps: Count
    batch_size: Count
    eval_batch_size: Count
    lr: LearningRate
    schedule: Schedule
    warmup_steps: NonNegativeInt
    weight_decay: Annotated[float, Range(0.0, 10.0)]
    schedule_steps: Count | None = None
    beta1: Beta = 0.9
    beta2: Beta = 0.98
    eps: Epsilon = 1e-9
    grad_clip: Annotated[float, Range(0.0, lo_open=True)] | None = None
    eval_every: Count = 100
    timing_warmup_steps: NonNegativeInt = 5
    log_every: Count = 50
    device: str = "auto"
    precision: Literal["bf16", "fp32"] = "bf16"
    deterministic: bool = True
    checkpoint_every: NonNegativeInt = 500
    flush_denormal: bool = True
    compile: Literal["auto", True, False] = "auto"
    activation_checkpointing: bool = False

    def __post_init__(self) -> None:
        check_fields(self, "trainer")  # types, finiteness, the declared ranges and choices
        if not (self.device in ("auto", "cpu") or self.device.startswith("cuda")):
            raise ConfigError(f"trainer.device must be auto, cpu or cuda[:i], got {self.device!r}")
