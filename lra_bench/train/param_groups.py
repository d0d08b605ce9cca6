"""AdamW parameter groups from the mixers' declared per-parameter settings (``TokenMixer.param_settings``).

One group for every parameter without a declaration (trainer.lr, trainer.weight_decay), one per distinct
(learning rate, weight decay) that a declaration resolves to. The trainer and the efficiency benchmark's step both
build their optimizer here (``loop.make_optimizer``), and the run record lists the groups (``describe``).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from lra_bench.attention.base import TokenMixer
from lra_bench.errors import ConfigError


def param_groups(model: nn.Module, lr: float, weight_decay: float, peak: float = 1.0) -> list[dict[str, Any]]:
    """Groups for ``torch.optim.AdamW``: each {"params", "param_names", "lr", "weight_decay"}; the default group first.
    Names are ``model.named_parameters()``'s (a DDP wrapper's ``module.`` prefix included).

    ``lr`` is the schedule's base rate and ``peak`` the schedule's largest factor (``schedules.peak_factor``): a
    declared ``lr_max`` caps the *peak* rate, so a group's base rate is lr·min(1, lr_max / (lr·peak)) and the
    schedule scales it like the rest (under cosine or constant: min(lr_max, trainer.lr)).
    """
    declared: dict[str, tuple[float, float]] = {}
    for prefix, module in model.named_modules():
        if not isinstance(module, TokenMixer):
            continue
        own = dict(module.named_parameters())
        for name, settings in module.param_settings().items():
            if name not in own:
                raise ConfigError(f"attention={module.name}: param_settings names {name!r}, which is not one of its "
                                  f"parameters ({', '.join(own)})")
            group_lr = lr if settings.lr_max is None else lr * min(1.0, settings.lr_max / (lr * peak))
            group_wd = weight_decay if settings.weight_decay is None else settings.weight_decay
            declared[f"{prefix}.{name}" if prefix else name] = (group_lr, group_wd)
    groups: dict[tuple[float, float], dict[str, Any]] = {
        (lr, weight_decay): {"params": [], "param_names": [], "lr": lr, "weight_decay": weight_decay}
    }
    for name, param in model.named_parameters():
        key = declared.get(name, (lr, weight_decay))
        group = groups.setdefault(key, {"params": [], "param_names": [], "lr": key[0], "weight_decay": key[1]})
        group["params"].append(param)
        group["param_names"].append(name)
    return [g for g in groups.values() if g["params"]]


def describe(optimizer: Any, peak: float = 1.0) -> list[dict[str, Any]]:
    """The optimizer's groups as the run record stores them, read back from ``optimizer.param_groups``: names, base
    learning rate (the schedule's constant), the peak rate it reaches (base·``peak``) and weight decay."""
    out = []
    for g in optimizer.param_groups:
        base = g.get("initial_lr", g["lr"])
        out.append({"names": list(g.get("param_names", [])), "lr": base, "peak_lr": base * peak,
                    "weight_decay": g["weight_decay"]})
    return out
