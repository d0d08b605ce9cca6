"""One optimizer step, shared by the trainer and the efficiency benchmark's cells (so Table 2 times what trains)."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lra_bench.errors import ConfigError


def autocast(device: torch.device, precision: str) -> contextlib.AbstractContextManager[None]:
    """bf16 autocast on CUDA when asked; CPU runs stay in fp32."""
    if device.type == "cuda" and precision == "bf16":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def compile_enabled(setting: str | bool, device: torch.device) -> bool:
    """``trainer.compile`` resolved for ``device``: "auto" compiles on CUDA only."""
    return setting is True or (setting == "auto" and device.type == "cuda")


def checkpoint_blocks(model: nn.Module, on: bool) -> int:
    """``trainer.activation_checkpointing``: switch per-block checkpointing on or off in every encoder of ``model``
    (the modules with a ``checkpoint_blocks`` flag: ``models.encoder.Encoder``, ``models.ssm.SSMEncoder``); returns
    how many. Asking for it on a model without such an encoder is a ConfigError."""
    encoders = [m for m in model.modules() if hasattr(m, "checkpoint_blocks")]
    if on and not encoders:
        raise ConfigError(f"trainer.activation_checkpointing=true: {type(model).__name__} has no encoder of "
                          "blocks to checkpoint (models.encoder.Encoder or models.ssm.SSMEncoder)")
    for m in encoders:
        m.checkpoint_blocks = on
    return len(encoders)


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: Tensor, y: Tensor, device: torch.device,
               precision: str, grad_clip: float | None) -> tuple[Tensor, Tensor]:
    """Forward (under ``autocast``), cross-entropy in fp32, backward, optional clipping, optimizer step.

    x: (B, L) or (B, 2, L) token ids on ``device``; y: (B,) labels. Returns (logits (B, classes), loss ()).
    """
    with autocast(device, precision):
        logits = model(x)  # (B, classes)
        loss = F.cross_entropy(logits.float(), y)
    apply_gradients(model, optimizer, loss, grad_clip)
    return logits, loss


def apply_gradients(model: nn.Module, optimizer: torch.optim.Optimizer, loss: Tensor,
                    grad_clip: float | None) -> None:
    """Backward of ``loss``, optional clipping of the global gradient norm, optimizer step (every phase's step)."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
