"""The attention factory: an attention config section, validated against its class, as the partial the encoder
completes with ``dim``, ``num_heads``, ``seq_len`` and ``dropout``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from omegaconf import DictConfig

from lra_bench.attention.base import TokenMixer, list_attentions
from lra_bench.checks import check_kwargs
from lra_bench.config.sections import container, group_choice, resolve_class
from lra_bench.errors import ConfigError

#: the only arguments the encoder passes to an attention class
ENCODER_SUPPLIED = ("dim", "num_heads", "seq_len", "dropout")


def attention_class(cfg: DictConfig | dict[str, Any]) -> type[TokenMixer]:
    """The class ``cfg._target_`` names, from this package or any importable module (imported here, so it
    registers): a TokenMixer subclass that declares its own ``name``."""
    target = cfg.get("_target_")
    cls = resolve_class(target, TokenMixer, "attention", list_attentions())
    if "name" not in cls.__dict__:  # an inherited name would file its records under its parent's name
        raise ConfigError(f"attention._target_={target!r} has no `name` of its own: give the class one, e.g. "
                          f'name = "{cls.__name__.lower()}" (its records and reports go under that name; it must not '
                          f"be one of {', '.join(list_attentions())})")
    return cls


def attention_name(cfg: DictConfig | dict[str, Any]) -> str:
    """The registry name of the class an attention config points at."""
    return attention_class(cfg).name


def build_attention_factory(cfg: DictConfig | dict[str, Any]) -> Callable[..., TokenMixer]:
    """Validate an attention config against its class and return the partial the encoder completes. Errors name
    the option the user chose (``attention=mine``, a config of their own) and the class only where they differ."""
    cls = attention_class(cfg)
    option = group_choice("attention") or cls.name  # outside a Hydra app (the Compose API): the class's name
    where = f"attention={option}" if option == cls.name else f"attention={option} (class {cls.__name__})"
    if cfg.get("_partial_") is not True:
        raise ConfigError(f"{where}: the attention config must set `_partial_: true` (in attention/{option}.yaml, "
                          "in configs/ or your own config folder; not removed on the command line)")
    knobs: dict[str, Any] = {
        k: v for k, v in container(cfg).items() if k not in ("_target_", "_partial_")
    }
    check_kwargs(cls, knobs, where=where, supplied=ENCODER_SUPPLIED, prefix="attention")
    return functools.partial(cls, **knobs)
