"""The Hydra side of validation: config sections as plain dicts and dataclasses, the class a ``_target_`` names, the
config groups of this checkout, and the config hash that identifies a run.

Only ``lra_bench.config`` (and the entry points above it) read a DictConfig: what it hands down is typed (the
dataclasses of ``plan.Plan``) or plain (dicts checked by ``lra_bench.checks``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import MissingMandatoryValue

from lra_bench.checks import to_dataclass
from lra_bench.errors import ConfigError
from lra_bench.store.records import NON_SEMANTIC_KEYS, semantic_hash

T = TypeVar("T")

#: the config groups of this checkout (configs/<group>/<name>.yaml)
CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


def group_choice(group: str) -> str | None:
    """The option of ``group`` Hydra composed (``task=text`` -> "text"); None outside a Hydra app (Compose API)."""
    if not HydraConfig.initialized():
        return None
    return HydraConfig.get().runtime.choices.get(group)


def container(section: DictConfig | dict[str, Any]) -> dict[str, Any]:
    """A config section as a plain, resolved dict (a dict is copied as it is)."""
    if isinstance(section, DictConfig):
        try:
            values = OmegaConf.to_container(section, resolve=True, throw_on_missing=True)
        except MissingMandatoryValue as e:  # '???': e.g. a knob of your own mixer without a default
            raise ConfigError(f"{e.full_key} has no value (its class gives no default): set it on the command line, "
                              f"{e.full_key}=VALUE, or in its config") from None
        assert isinstance(values, dict)
        return values
    return dict(section)


def run_container(cfg: DictConfig | dict[str, Any]) -> dict[str, Any]:
    """A whole run config as a plain, resolved dict, without Hydra's own ``hydra`` node (present when a config is
    composed with ``return_hydra_config``; it is not part of the experiment and its interpolations are Hydra's)."""
    if not isinstance(cfg, DictConfig):
        return {k: v for k, v in cfg.items() if k != "hydra"}
    return {k: container(cfg[k]) if isinstance(cfg[k], DictConfig) else OmegaConf.to_object(cfg[k])
            if OmegaConf.is_config(cfg[k]) else cfg[k] for k in cfg if k != "hydra"}


def section_dataclass(cls: type[T], section: DictConfig | dict[str, Any], where: str) -> T:
    """``checks.to_dataclass`` of a config section: validated against ``cls``'s fields, then built."""
    return to_dataclass(cls, container(section), where)


def config_hash(cfg: DictConfig | dict[str, Any]) -> str:
    """``records.semantic_hash`` of the resolved config: same hash = same experiment."""
    return semantic_hash(container(cfg))


def group_options(group: str) -> list[str]:
    """The names of a config group: the stems of ``configs/<group>/*.yaml``."""
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


def resolve_class(target: Any, base: type[T], where: str, valid: list[str]) -> type[T]:
    """The class a ``_target_`` names, imported but never called, and required to subclass ``base``: an override
    cannot make the harness call anything else. The error lists ``valid`` (the group's names)."""
    from hydra.utils import get_class

    choose = f"; choose one with {where}=NAME ({', '.join(valid)}) instead of setting {where}._target_"
    if not isinstance(target, str) or not target:
        raise ConfigError(f"{where} config has no _target_{choose}")
    try:
        cls = get_class(target)
    except Exception as e:  # noqa: BLE001 - a missing module, a missing name or a non-class: all one message
        raise ConfigError(f"{where}._target_={target!r} cannot be used: {e}{choose}") from e
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ConfigError(f"{where}._target_={target!r} is not a subclass of {base.__module__}.{base.__name__}"
                          f"{choose}")
    return cls


__all__ = ["CONFIG_DIR", "NON_SEMANTIC_KEYS", "config_hash", "container", "group_options", "resolve_class",
           "run_container", "section_dataclass"]
