"""Record the largest tensor any aten op produces: the test-side proof of a memory complexity claim."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LargestIntermediate(TorchDispatchMode):
    """Tracks ``numel`` of the largest tensor produced by any op run under this mode (forward and backward)."""

    def __init__(self) -> None:
        super().__init__()
        self.max_numel = 0
        self.max_op = ""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor) and t.numel() > self.max_numel:
                self.max_numel, self.max_op = t.numel(), str(func)
        return out


def largest_intermediate(fn: Callable[[], torch.Tensor]) -> tuple[int, str]:
    """Run ``fn`` (forward), then backward through its output; return (max numel, op that made it)."""
    with LargestIntermediate() as mode:
        out = fn()
        out.float().square().mean().backward()
    return mode.max_numel, mode.max_op
