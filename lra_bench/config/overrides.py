"""'Did you mean ...?' for misspelt command-line overrides, checked before Hydra composes the config.

Hydra answers ``attention=perfomer`` with every option of the group and ``trainer.lr_rate=0.01`` with a hint
to append it with ``+`` (which only adds a key nothing reads). ``check_overrides`` finds the first misspelt
group option or key and returns a message naming the closest valid one (difflib), or None when all is well
or the problem is one Hydra reports itself (syntax errors, interpolation errors).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override, ValueType
from omegaconf import DictConfig

from lra_bench.checks import closest
from lra_bench.config.mixers import registered_options
from lra_bench.config.yaml_syntax import yaml_syntax_problem

#: flags that select another primary config: the check is skipped then
CONFIG_FLAGS = ("--config-name", "-cn", "--config-path", "-cp", "--config-dir", "-cd")
CHECKED_VALUES = (ValueType.ELEMENT, ValueType.SIMPLE_CHOICE_SWEEP, ValueType.CHOICE_SWEEP)


def group_options(config_dir: Path, group: str) -> list[str] | None:
    """The options of config group ``group`` (its YAML files), or None when it is not a group."""
    folder = Path(config_dir) / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else None


def override_values(override: Override) -> list[str]:
    """The value(s) of an override as strings (every choice of a sweep); [] when not checkable."""
    if override.value_type not in CHECKED_VALUES:
        return []
    if override.is_sweep_override():
        return list(override.sweep_string_iterator())
    value = override.value()
    return [] if value is None else [override.get_value_element_as_str()]


def bad_group_option(override: Override, options: list[str]) -> str | None:
    group = override.key_or_group
    for value in override_values(override):
        if value not in options:
            best = closest(value, options)
            hint = f"; did you mean {group}={best}?" if best else ""
            return (f"Could not find '{group}/{value}'{hint}\nAvailable options in '{group}': "
                    f"{', '.join(options)}")
    return None


def bad_key(cfg: DictConfig, override: Override) -> str | None:
    """A message when the dotted key of ``override`` is not in ``cfg``, naming the closest existing key."""
    parts = override.key_or_group.split(".")
    node = cfg
    for i, part in enumerate(parts):
        if not isinstance(node, DictConfig):
            return None  # a list index or a leaf: Hydra reports it
        if part in node:
            node = node._get_node(part)  # no interpolation resolved
            continue
        where = ".".join(parts[:i])
        keys = [str(k) for k in node.keys()]
        best = closest(part, keys)
        value = override.input_line.partition("=")[2]
        fixed = ".".join([*parts[:i], best, *parts[i + 1:]]) if best else None
        hint = ""
        if fixed and override.is_delete():
            hint = f"; did you mean ~{fixed}?"
        elif fixed:
            hint = (f"; did you mean {fixed}={value}? (not +{override.key_or_group}={value}: that adds a new key, "
                    "which the harness rejects or ignores)")
        inside = f" in {where}" if where else ""
        return f"{override.key_or_group}: no such key{inside}{hint}\nValid keys{inside}: {', '.join(keys)}"
    return None


def search_path(overrides: list[Override]) -> list[Path] | None:
    """The folders of a ``hydra.searchpath=[file://...]`` override ([] without one; None when one is not a local
    folder)."""
    folders: list[Path] = []
    for o in overrides:
        if o.key_or_group != "hydra.searchpath":
            continue
        value = o.value()
        for item in value if isinstance(value, list) else [value]:
            text = str(item)
            if text.startswith("pkg://"):
                return None
            folders.append(Path(text.removeprefix("file://")))
    return folders


def compose_groups(config_dir: Path, config_name: str, groups: list[Override],
                   extra: list[Path] = ()) -> DictConfig | None:
    """The config with the group choices of the command line (first choice of a sweep), or None on error."""
    from hydra import compose, initialize_config_dir

    chosen = [f"{o.get_key_element()}={override_values(o)[0]}" for o in groups if override_values(o)]
    if extra:
        chosen.append("hydra.searchpath=[" + ",".join(f"file://{Path(f).resolve()}" for f in extra) + "]")
    try:
        with initialize_config_dir(config_dir=str(Path(config_dir).resolve()), version_base="1.3"):
            return compose(config_name, overrides=chosen)
    except Exception:  # noqa: BLE001 - whatever fails here, Hydra reports it itself right after
        return None


def check_overrides(args: Sequence[str], config_dir: Path, config_name: str) -> str | None:
    """A 'did you mean' message for the first misspelt group option or key in ``args``, else None."""
    if any(a.split("=")[0] in CONFIG_FLAGS for a in args):
        return None
    texts = [a for a in args if not a.startswith("-") and ("=" in a or a.startswith("~"))]
    try:
        overrides = OverridesParser.create().parse_overrides(texts)
    except Exception:  # noqa: BLE001 - a syntax error: Hydra's own message is the right one
        return None
    extra = search_path(overrides)
    if (broken := yaml_syntax_problem([config_dir, *(extra or [])])) is not None:
        return broken  # Hydra's answer: a 40-frame traceback through its defaults list
    if extra is None:
        return None  # a pkg:// search path: its options cannot be listed here, Hydra checks them itself
    groups, keys = [], []
    for o in overrides:
        if o.key_or_group.split("/")[0].split(".")[0] == "hydra" or o.package is not None:
            continue
        options = group_options(config_dir, o.key_or_group)
        if registered := registered_options(o.key_or_group):  # your own mixers (LRA_MIXERS), no YAML file
            options = sorted({*(options or []), *registered})
        for folder in extra:  # your own config folders (hydra.searchpath) add options to the groups
            more = group_options(folder, o.key_or_group)
            options = sorted({*(options or []), *more}) if more is not None else options
        if options is not None:
            if (problem := bad_group_option(o, options)) is not None:
                return problem
            groups.append(o)
        elif not (o.is_add() or o.is_force_add()):
            keys.append(o)  # '+key' is checked by the harness itself (unknown option, with a suggestion)
    if not keys:
        return None
    cfg = compose_groups(config_dir, config_name, groups, extra)
    if cfg is None:
        return None
    first = next((problem for o in keys if (problem := bad_key(cfg, o)) is not None), None)
    # a key some of a sweep's choices lack: said so, whichever choice comes first; a key none has: the plain message
    return bad_key_in_some_choices(config_dir, config_name, groups, keys, extra) or first


def bad_key_in_some_choices(config_dir: Path, config_name: str, groups: list[Override], keys: list[Override],
                            extra: list[Path]) -> str | None:
    """A key some choices of a swept group have and others lack (``-m attention=performer,softmax
    attention.nb_features=64``): Hydra would stop the whole sweep before its first job with "Key 'nb_features' is
    not in struct" and no word of which choice lacks it. Each choice is composed once (the other groups at their
    first choice); the message names the choices that lack the key and those that have it. None when no swept
    group has choices on both sides (a key that no choice has gets the plain 'did you mean')."""
    for g, swept in enumerate(groups):
        if not swept.is_sweep_override():
            continue
        lacking: dict[str, str] = {}  # choice -> what bad_key says of it
        having: list[str] = []
        for value in override_values(swept):
            single = OverridesParser.create().parse_overrides([f"{swept.get_key_element()}={value}"])
            cfg = compose_groups(config_dir, config_name, [*groups[:g], *single, *groups[g + 1:]], extra)
            if cfg is None:
                continue  # Hydra says what is wrong with this choice itself
            problem = next((p for o in keys if (p := bad_key(cfg, o)) is not None), None)
            if problem is None:
                having.append(value)
            else:
                lacking[value] = problem
        if lacking and having:
            first, problem = next(iter(lacking.items()))
            group = swept.key_or_group
            return (f"{group}={first}, one of your sweep's choices: {problem}\nLacking it: {group}="
                    f"{','.join(lacking)}; having it: {group}={','.join(having)}. Hydra would stop the whole sweep "
                    f"before its first job: sweep {group}={','.join(lacking)} without this override, in a sweep of "
                    "its own")
    return None
