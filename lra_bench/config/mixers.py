"""Mixers of your own, in one file and no config: ``LRA_MIXERS=my_mixer.py python run.py attention=NAME``.

``LRA_MIXERS`` names Python files (``path/to/my_mixer.py``) or importable modules (``mypkg.mixers``), separated by
commas. Each is imported before Hydra composes the config; every ``TokenMixer`` subclass it defines with a ``name``
of its own and no ``configs/attention/NAME.yaml`` becomes the option ``attention=NAME``, its knobs' defaults read
from the constructor's signature (a knob without a default is a mandatory value: set it on the command line,
``attention.KNOB=...``). A YAML file of the same name, in this checkout or on ``hydra.searchpath``, still wins: it
is the place for settings that differ from the signature's defaults. Sweep jobs inherit the variable and import
the same files; a file's folder is put on ``PYTHONPATH`` for them.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

from lra_bench.config.sections import CONFIG_DIR
from lra_bench.errors import ConfigError

if TYPE_CHECKING:
    from lra_bench.attention.base import TokenMixer

ENV = "LRA_MIXERS"


def import_entry(entry: str) -> str:
    """Import one entry of ``LRA_MIXERS`` (a .py file or a module name); returns the module's name."""
    if entry.endswith(".py"):
        path = Path(entry).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(f"{ENV}={entry}: no such file; give the path of your mixer's .py file (or an "
                              "importable module name)")
        folder = str(path.parent)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        if folder not in paths:  # sweep jobs and benchmark cells are other processes
            os.environ["PYTHONPATH"] = os.pathsep.join([folder, *paths])
        name = path.stem
    else:
        name = entry
    try:
        importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - whatever the user's file raises: one line naming it
        raise ConfigError(f"{ENV}={entry}: importing it failed: {type(e).__name__}: {e}") from e
    return name


def defaults_of(cls: type[TokenMixer]) -> dict[str, Any]:
    """The config node of ``cls``: its ``_target_``, ``_partial_`` and each knob's default (MISSING when none)."""
    from lra_bench.config.attention import ENCODER_SUPPLIED

    node: dict[str, Any] = {"_target_": f"{cls.__module__}.{cls.__qualname__}", "_partial_": True}
    for name, p in inspect.signature(cls.__init__).parameters.items():
        if name == "self" or name in ENCODER_SUPPLIED or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        node[name] = MISSING if p.default is inspect.Parameter.empty else p.default
    return node


def register_outside_mixers(spec: str | None) -> list[str]:
    """Import ``spec``'s files and modules and give each new mixer without a YAML file its ``attention=NAME``
    option; returns the names registered this way."""
    if not spec:
        return []
    from lra_bench.attention.base import get_attention_class, list_attentions

    before = set(list_attentions())
    for entry in (e.strip() for e in spec.split(",")):
        if entry:
            import_entry(entry)
    store = ConfigStore.instance()
    added = []
    for name in sorted(set(list_attentions()) - before):
        if (CONFIG_DIR / "attention" / f"{name}.yaml").exists():
            continue
        store.store(group="attention", name=name, node=defaults_of(get_attention_class(name)))
        added.append(name)
    return added


def registered_options(group: str) -> list[str]:
    """The options of ``group`` registered here (not YAML files): e.g. your own mixers' names."""
    try:
        return sorted(n.removesuffix(".yaml") for n in ConfigStore.instance().list(group))
    except (OSError, KeyError, ValueError):
        return []
