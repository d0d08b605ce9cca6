"""A config file that is not valid YAML, said in one line with its file and place, before Hydra composes.

Hydra reports a broken config file (an unclosed bracket, a tab where a space belongs, two documents in one file)
with a 40-frame traceback through its defaults list and PyYAML. ``yaml_syntax_problem`` loads the config files of
each folder -- the primary configs (``*.yaml`` in the folder) and the group options (``*.yaml`` one folder down,
dot-folders skipped), where Hydra looks -- with OmegaConf's own loader, the one Hydra uses, so the verdicts are
Hydra's, and names the first broken file: its line, its column and PyYAML's reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml
from omegaconf import OmegaConf


def config_files(folder: Path) -> list[Path]:
    """The files Hydra may load from ``folder``: ``*.yaml`` in it and in its sub-folders (the groups), not deeper
    (a search-path folder may be a project root: its CI files and run outputs are not configs)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    groups = [d for d in sorted(folder.iterdir()) if d.is_dir() and not d.name.startswith(".")]
    return [*sorted(folder.glob("*.yaml")), *(f for d in groups for f in sorted(d.glob("*.yaml")))]


def yaml_syntax_problem(folders: Iterable[Path]) -> str | None:
    """The first config file of ``folders`` that Hydra could not load, said with its place; None when all load."""
    for folder in folders:
        for path in config_files(folder):
            try:
                OmegaConf.load(path)
            except yaml.YAMLError as e:
                return f"{path}: not valid YAML{_place(e)}: {_reason(e)}; fix the file (or move it out of {folder})"
            except (OSError, UnicodeDecodeError) as e:
                return f"{path}: cannot be read as a UTF-8 config file ({e})"
    return None


def _place(error: yaml.YAMLError) -> str:
    mark = getattr(error, "problem_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _reason(error: yaml.YAMLError) -> str:
    context, problem = getattr(error, "context", None), getattr(error, "problem", None)
    begun = getattr(error, "context_mark", None)
    if context and begun is not None:
        context = f"{context} (begun at line {begun.line + 1}, column {begun.column + 1})"
    said = "; ".join(p for p in (context, problem) if p)
    return said or str(error).splitlines()[0]
