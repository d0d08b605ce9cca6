"""A YAML syntax error in a config file, said in one line with its file and place, before Hydra composes.

Hydra reports a broken config file (an unclosed bracket, a tab, a bad indent) with a 40-frame traceback through
its defaults list and PyYAML; ``yaml_syntax_problem`` reads every ``*.yaml`` below the config folders (ours and
the user's ``hydra.searchpath`` ones) and names the first broken one: file, line, column and PyYAML's reason.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import yaml

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when present: ~10x faster, same verdicts


def yaml_syntax_problem(folders: Iterable[Path]) -> str | None:
    """The first config file below ``folders`` that is not valid YAML, said with its place; None when all parse."""
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.yaml")):
            try:
                list(yaml.compose_all(path.read_text(encoding="utf-8"), Loader=LOADER))  # syntax only, no tags
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
