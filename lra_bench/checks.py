"""Checks of config values against what they build, with no config library: every room may use them.

``check_kwargs`` validates a plain dict of settings against the signature of the class or function it builds (an
unknown key or a value of the wrong type fails with a message naming the key, the valid keys and the type);
``positive``, ``non_negative``, ``fraction`` and ``check_choice`` check ranges and choices inside the dataclasses'
``__post_init__``; ``closest`` gives the "did you mean" of every message. Hydra and OmegaConf stay in
``lra_bench.config``: below it, settings arrive as dataclasses and plain dicts.
"""

from __future__ import annotations

import difflib
import inspect
import math
import types
import typing
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from lra_bench.errors import ConfigError

T = TypeVar("T")


def closest(word: str, candidates: Sequence[str]) -> str | None:
    """The most similar candidate (difflib ratio >= 0.6), else the most similar one sharing a ``_``-separated
    word with ``word`` (``lr_rate`` -> ``lr``), or None."""
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    if found:
        return found[0]
    words = set(word.lower().split("_"))
    sharing = [c for c in candidates if words & set(c.lower().split("_"))]
    return max(sharing, key=lambda c: difflib.SequenceMatcher(None, word, c).ratio(), default=None)


def _type_ok(value: Any, annotation: Any) -> bool:
    """Whether a YAML value fits a Python annotation (int for float is accepted, bool for int is not)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_type_ok(value, a) for a in typing.get_args(annotation))
    if annotation is type(None):
        return value is None
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if origin in (list, tuple):
        (inner, *_) = typing.get_args(annotation) or (Any,)
        return isinstance(value, (list, tuple)) and all(_type_ok(v, inner) for v in value)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(annotation, type):
        return isinstance(value, annotation)
    return True


def _describe(annotation: Any) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def check_kwargs(fn: Callable[..., Any], values: dict[str, Any], where: str, supplied: tuple[str, ...] = ()) -> None:
    """Check ``values`` against the signature of ``fn`` (a class or function).

    ``supplied`` names arguments that the harness fills in at build time (they must not be in YAML).
    """
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn.__init__ if inspect.isclass(fn) else fn)
    allowed = [p for p in sig.parameters if p not in ("self", *supplied)]
    for key, value in values.items():
        if key in supplied:
            raise ConfigError(f"{where}: '{key}' is supplied by the harness and must not be set in the config")
        if key not in allowed:
            best = closest(key, allowed)
            hint = f" (did you mean '{best}'?)" if best else ""
            raise ConfigError(f"{where}: unknown option '{key}'{hint}; valid options: {', '.join(allowed)}")
        annotation = hints.get(key, inspect.Parameter.empty)
        if not _type_ok(value, annotation):
            raise ConfigError(
                f"{where}: option '{key}' must be of type {_describe(annotation)}, got {value!r} "
                f"({type(value).__name__}); fix the value in the config or on the command line"
            )
    missing = [
        p.name
        for p in sig.parameters.values()
        if p.name not in ("self", *supplied) and p.default is inspect.Parameter.empty and p.name not in values
    ]
    if missing:
        raise ConfigError(f"{where}: missing required option(s): {', '.join(missing)}")


def to_dataclass(cls: type[T], values: dict[str, Any], where: str) -> T:
    """Build a validated dataclass (its ``__post_init__`` checks ranges) from a plain config section."""
    values = dict(values)
    check_kwargs(cls, values, where)
    return cls(**values)  # its __post_init__ raises ConfigError on a value out of range


def check_choice(where: str, key: str, value: Any, choices: Any) -> None:
    """Raise a ConfigError when ``value`` is not one of the ``Literal[...]`` ``choices`` (the one statement of them)."""
    allowed = typing.get_args(choices)
    if value not in allowed:
        raise ConfigError(f"{where}: {key} must be one of {', '.join(map(repr, allowed))}, got {value!r}")


def check_literals(obj: Any, where: str) -> None:
    """``check_choice`` for every ``Literal``-typed field of the dataclass instance ``obj``."""
    for key, annotation in typing.get_type_hints(type(obj)).items():
        if typing.get_origin(annotation) is typing.Literal:
            check_choice(where, key, getattr(obj, key), annotation)


def positive(where: str, **values: float | int | None) -> None:
    """Raise a ConfigError for every value that is not a finite number > 0 (None is allowed = unset)."""
    for key, value in values.items():
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{where}.{key} must be > 0 (a finite number), got {value}")


def non_negative(where: str, **values: float | int) -> None:
    """Raise a ConfigError for every value that is not a finite number >= 0."""
    for key, value in values.items():
        if not (math.isfinite(value) and value >= 0):
            raise ConfigError(f"{where}.{key} must be >= 0 (a finite number), got {value}")


def fraction(key: str, value: float) -> float:
    """``value`` when it is in [0, 1) (a dropout rate: 1 would divide by zero in the rescaling), else a ConfigError."""
    if not 0.0 <= value < 1.0:  # NaN fails too
        raise ConfigError(f"{key} must be in [0, 1), got {value}")
    return value


__all__ = ["check_choice", "check_kwargs", "check_literals", "closest", "fraction", "non_negative", "positive",
           "to_dataclass"]
