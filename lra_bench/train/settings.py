"""Typed, range-checked trainer settings (``configs/trainer``), validated before any data is loaded."""

from __future__ import annotations

import dataclasses
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
    schedule: "rsqrt" | "cosine" | "constant" (LRA's) | "cosine_to_zero" (s4's) | "linear_decay" (Mega's, fairseq's;
        see ``schedules.py``).
    warmup_steps: linear warm-up steps.
    schedule_steps: the schedule's horizon (LRA's and s4's ``num_training_steps``); None = ``max_steps``. s4 trains
        some tasks for fewer steps than its schedule's horizon (whole epochs: Retrieval 45,960 of 50,000).
    weight_decay: AdamW decoupled weight decay (LRA 0.1 for ListOps).
    beta1, beta2, eps: Adam moments (LRA 0.9, 0.98, 1e-9).
    grad_clip: max global gradient norm, null = no clipping.
    eval_every: evaluate on the full validation split every k steps (and after the last step).
    timing_warmup_steps: first steps of each process excluded from the throughput figures (a resumed run's too:
        its heap grows again after the allocator switch).
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


PretrainObjective = Literal["mlm", "causal"]  # pretrain=none builds no settings (nothing to pretrain)


@dataclass
class PretrainSettings:
    """Self-pretraining before the fine-tune (``configs/pretrain/{mlm,causal}.yaml``), validated before any data.

    Args:
        name: the objective: "mlm" (masked-token prediction) or "causal" (next-token prediction, causal mixers).
        loss: "ce" (cross-entropy over the vocabulary) or "l1" (mean absolute error of the grey value in [0, 1]).
        max_steps, batch_size, lr, schedule, warmup_steps, weight_decay: the pretraining's own optimisation (AdamW
            with the trainer's betas, eps, clipping and precision); its schedule runs over ``max_steps``.
        eval_every: the objective on the validation inputs every k steps (and after the last).
        task_defaults: the per-task mask rates and losses the YAML interpolates from (kept for the record).
        mask_rate: mlm only: the share of real tokens masked in every sequence, in (0, 1).
    """

    name: PretrainObjective
    loss: Literal["ce", "l1"]
    max_steps: Count
    batch_size: Count
    lr: LearningRate
    schedule: Schedule
    warmup_steps: NonNegativeInt
    weight_decay: Annotated[float, Range(0.0, 10.0)]
    eval_every: Count
    task_defaults: dict
    mask_rate: Annotated[float, Range(0.0, 1.0, lo_open=True, hi_open=True,
                                      why="none or all masked leaves nothing to learn")] | None = None

    def __post_init__(self) -> None:
        check_fields(self, "pretrain")  # types, finiteness, the declared ranges and choices
        if self.name == "mlm" and self.mask_rate is None:
            raise ConfigError("pretrain=mlm needs pretrain.mask_rate in (0, 1), the share of tokens it masks: set "
                              "it, e.g. pretrain.mask_rate=0.15")
        if self.name == "causal" and self.mask_rate is not None:
            raise ConfigError("pretrain.mask_rate belongs to pretrain=mlm; next-token prediction masks nothing "
                              "(drop it: ~pretrain.mask_rate)")

    def optimization(self, trainer: TrainerSettings) -> TrainerSettings:
        """The trainer's settings with this phase's budget, batch, rate and schedule (for ``make_optimizer`` and
        the loop's bookkeeping); AdamW moments, clipping, precision and the rest stay the trainer's."""
        return dataclasses.replace(trainer, max_steps=self.max_steps, batch_size=self.batch_size, lr=self.lr,
                                   schedule=self.schedule, warmup_steps=self.warmup_steps, schedule_steps=None,
                                   weight_decay=self.weight_decay, eval_every=self.eval_every)
