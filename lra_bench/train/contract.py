"""The mixer contract at run time: every mixer's output, on the first training batch and on the first evaluation
batch, has the shape of its input and holds finite numbers only.

The static contract (``tests/test_attention_contract.py``) checks the zoo on random inputs; this one checks whatever
mixer a run builds (one of your own too), on the run's own data, in both modes -- a wrongly shaped output that
broadcasts through the residual sum, or NaN in evaluation only, would otherwise train or score silently. A broken
contract raises ``MixerContractError``, which the runner records as a failed run with the reason. The hooks remove
themselves once each mixer has passed in both modes, so later steps pay nothing.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from lra_bench.attention.base import TokenMixer


class MixerContractError(RuntimeError):
    """A mixer broke the contract at run time (the message names the mixer, the mode and what was wrong)."""


def broken(x: Tensor, out: Any) -> str | None:
    """Why ``out`` is not a valid output for input ``x`` (shape (B, N, C) like ``x``, finite), or None."""
    if not isinstance(out, Tensor):
        return f"returned {type(out).__name__}, not a tensor"
    if out.shape != x.shape:
        return f"returned shape {tuple(out.shape)} for an input of shape {tuple(x.shape)} (they must be equal)"
    if not bool(torch.isfinite(out).all()):
        bad = int((~torch.isfinite(out)).sum())
        return f"returned {bad} non-finite value(s) (NaN or inf) of {out.numel()}"
    return None


class ContractWatch:
    """Forward hooks on every ``TokenMixer`` of ``model`` that check its first training and first evaluation call."""

    def __init__(self, model: nn.Module) -> None:
        self.pending: dict[nn.Module, set[bool]] = {}
        self.handles = []
        for path, module in model.named_modules():
            if isinstance(module, TokenMixer):
                self.pending[module] = {True, False}  # training mode, evaluation mode
                self.handles.append(module.register_forward_hook(self._hook(path), with_kwargs=True))

    def _hook(self, path: str):
        def check(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
            modes = self.pending.get(module)
            if not modes or module.training not in modes:
                return
            why = broken(args[0] if args else kwargs["x"], out)
            if why is not None:
                mode = "training" if module.training else "evaluation"
                raise MixerContractError(f"attention={getattr(module, 'name', type(module).__name__)} ({path}) broke "
                                         f"the mixer contract on the first {mode} batch: it {why}")
            modes.discard(module.training)
            if not any(self.pending.values()):
                self.remove()

        return check

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()


def watch_mixers(model: nn.Module) -> ContractWatch:
    """Check the contract of every mixer of ``model`` on its first training and first evaluation batch."""
    return ContractWatch(model)
