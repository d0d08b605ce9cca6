"""Typed, range-checked trainer settings (``configs/trainer``), validated before any data is loaded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from lra_bench.checks import check_literals, non_negative, positive
from lra_bench.errors import ConfigError
from lra_bench.train.schedules import Schedule


@dataclass
class TrainerSettings:
    """Args:
    max_steps: optimizer steps.
    batch_size: training batch (global; LRA 32 for ListOps).
    eval_batch_size: batch for val/test evaluation (always the full split, remainder included).
    lr: the schedule's ``constant`` (LRA ListOps 0.05 with rsqrt => peak 0.05/sqrt(warmup)).
    schedule: "rsqrt" | "cosine" | "constant" (see ``schedules.py``).
    warmup_steps: linear warm-up steps.
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

    max_steps: int
    batch_size: int
    eval_batch_size: int
    lr: float
    schedule: Schedule
    warmup_steps: int
    weight_decay: float
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-9
    grad_clip: float | None = None
    eval_every: int = 100
    timing_warmup_steps: int = 5
    log_every: int = 50
    device: str = "auto"
    precision: Literal["bf16", "fp32"] = "bf16"
    deterministic: bool = True
    checkpoint_every: int = 500
    flush_denormal: bool = True
    compile: Literal["auto", True, False] = "auto"
    activation_checkpointing: bool = False

    def __post_init__(self) -> None:
        positive("trainer", max_steps=self.max_steps, batch_size=self.batch_size,
                 eval_batch_size=self.eval_batch_size, lr=self.lr, eval_every=self.eval_every,
                 log_every=self.log_every, eps=self.eps, grad_clip=self.grad_clip)
        non_negative("trainer", warmup_steps=self.warmup_steps, timing_warmup_steps=self.timing_warmup_steps,
                     weight_decay=self.weight_decay, checkpoint_every=self.checkpoint_every)
        for key in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, key) < 1.0:
                raise ConfigError(f"trainer.{key} must be in [0, 1), got {getattr(self, key)}")
        check_literals(self, "trainer")
        if not (self.device in ("auto", "cpu") or self.device.startswith("cuda")):
            raise ConfigError(f"trainer.device must be auto, cpu or cuda[:i], got {self.device!r}")
