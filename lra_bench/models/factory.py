"""Build the attention factory and the model from their config sections, validated first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hydra.utils import get_class, instantiate
from omegaconf import DictConfig, OmegaConf

from lra_bench.attention.base import Attention, get_attention_class
from lra_bench.config import check_kwargs
from lra_bench.errors import ConfigError

#: the only arguments the encoder passes to an attention class
ENCODER_SUPPLIED = ("dim", "num_heads", "seq_len", "dropout")


def attention_name(cfg: DictConfig) -> str:
    """The registry name of the class an attention config points at."""
    target = cfg.get("_target_")
    if not target:
        raise ConfigError("attention config has no _target_; see configs/attention/softmax.yaml for the format")
    try:
        cls = get_class(target)
    except Exception as e:
        raise ConfigError(f"attention _target_ {target!r} cannot be imported: {e}") from e
    if not (isinstance(cls, type) and issubclass(cls, Attention) and "name" in cls.__dict__):
        raise ConfigError(f"attention _target_ {target!r} is not a registered lra_bench Attention subclass")
    return cls.name


def build_attention_factory(cfg: DictConfig, name: str | None = None) -> Callable[..., Attention]:
    """Validate an attention config against its class and return the partial the encoder completes."""
    name = name or attention_name(cfg)
    cls = get_attention_class(name)
    if cfg.get("_partial_") is not True:
        raise ConfigError(f"configs/attention/{name}.yaml must set `_partial_: true`")
    knobs: dict[str, Any] = {
        k: v for k, v in OmegaConf.to_container(cfg, resolve=True).items() if k not in ("_target_", "_partial_")
    }
    check_kwargs(cls, knobs, where=f"attention={name}", supplied=ENCODER_SUPPLIED)
    return instantiate(cfg)
