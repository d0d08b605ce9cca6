"""Checks of config values against what they build, with no config library: every room may use them.

One validation for every setting: ``check_kwargs`` validates a plain dict of settings against the signature of the
class or function it builds -- an unknown key, a value of the wrong type, a non-finite number, a float where an
integer must be, a value outside the ``Range`` its annotation declares (``Annotated[int, Range(1)]``, or one of the
aliases below) or outside a ``Literal``'s choices fails with one line that names the key, the value and what is
allowed. Dataclasses call ``check_fields`` from ``__post_init__`` (the same rule for a direct construction);
``positive``, ``non_negative``, ``fraction`` and ``check_choice`` remain for checks a constructor makes itself;
``closest`` gives the "did you mean" of every message. Hydra and OmegaConf stay in ``lra_bench.config``: below it,
settings arrive as dataclasses and plain dicts.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from lra_bench.errors import ConfigError

T = TypeVar("T")


@dataclass(frozen=True)
class Range:
    """The values a numeric setting may take, declared in its annotation: ``Annotated[int, Range(1)]``.

    ``lo``/``hi``: the bounds (None = unbounded), ``lo_open``/``hi_open``: whether the bound itself is excluded,
    ``why``: what goes wrong outside (said in the error)."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    why: str = ""

    def __contains__(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        if self.lo is not None and (value < self.lo or (self.lo_open and value == self.lo)):
            return False
        return not (self.hi is not None and (value > self.hi or (self.hi_open and value == self.hi)))

    def __str__(self) -> str:
        def show(bound: float) -> str:
            return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"

        if self.lo is not None and self.hi is not None:
            return f"{'(' if self.lo_open else '['}{show(self.lo)}, {show(self.hi)}{')' if self.hi_open else ']'}"
        if self.lo is not None:
            return f"{'>' if self.lo_open else '>='} {show(self.lo)}"
        if self.hi is not None:
            return f"{'<' if self.hi_open else '<='} {show(self.hi)}"
        return "any finite number"


#: the ranges most settings share (a declared range says what a value means, and what it must be)
Count = Annotated[int, Range(1)]  # sizes, steps, features, iterations: at least one
NonNegativeInt = Annotated[int, Range(0)]  # counts where 0 means none (or "off", as the setting says)
Seed = Annotated[int, Range(0, 2**32 - 1, why="numpy's seed range")]
DropRate = Annotated[float, Range(0.0, 1.0, hi_open=True, why="1 would drop everything and divide by zero")]
Probability = Annotated[float, Range(0.0, 1.0)]
PositiveFloat = Annotated[float, Range(0.0, lo_open=True)]
NonNegativeFloat = Annotated[float, Range(0.0)]
LearningRate = Annotated[float, Range(0.0, 10.0, lo_open=True,
                                      why="AdamW with a larger rate diverges at its first steps")]


def closest(word: str, candidates: Sequence[str]) -> str | None:
    """The most similar candidate (difflib ratio >= 0.6), else the most similar one sharing a ``_``-separated
    word with ``word`` (``lr_rate`` -> ``lr``), or None."""
    found = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    if found:
        return found[0]
    words = set(word.lower().split("_"))
    sharing = [c for c in candidates if words & set(c.lower().split("_"))]
    return max(sharing, key=lambda c: difflib.SequenceMatcher(None, word, c).ratio(), default=None)


def _describe(annotation: Any) -> str:
    """A type as a user reads it: ``int``, ``float or None``, ``list of int``, ``one of 'a', 'b'``."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        base, *meta = typing.get_args(annotation)
        ranges = [m for m in meta if isinstance(m, Range)]
        return _describe(base) + (f" {ranges[0]}" if ranges else "")
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(annotation))
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(annotation)))
    if origin in (list, tuple):
        return f"list of {_describe((typing.get_args(annotation) or (Any,))[0])}"
    if annotation is type(None):
        return "None (null)"
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def declared_range(annotation: Any) -> Range | None:
    """The ``Range`` an annotation declares (inside ``Optional``/``list`` too), else None."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return next((m for m in typing.get_args(annotation)[1:] if isinstance(m, Range)), None)
    if origin in (typing.Union, types.UnionType, list, tuple):
        return next(filter(None, (declared_range(a) for a in typing.get_args(annotation))), None)
    return None


def is_numeric(annotation: Any) -> bool:
    """Whether a setting of this annotation holds numbers (int or float, maybe optional, maybe a list of them)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return is_numeric(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, tuple):
        return any(is_numeric(a) for a in typing.get_args(annotation) if a is not Ellipsis)
    return annotation in (int, float)


def problem(value: Any, annotation: Any) -> str | None:
    """Why ``value`` does not fit ``annotation`` (its type, finiteness, declared ``Range``, ``Literal`` choices), as
    the end of a sentence starting with the value; None when it fits. Any number must be finite, whatever the
    annotation."""
    if isinstance(value, float) and not math.isfinite(value):
        return "is not a finite number"
    origin = typing.get_origin(annotation)
    if annotation is inspect.Parameter.empty or annotation is Any:
        return None
    if origin is Annotated:
        base, *meta = typing.get_args(annotation)
        if (why := problem(value, base)) is not None:
            return why
        for allowed in meta:
            if isinstance(allowed, Range) and isinstance(value, (int, float)) and value not in allowed:
                return f"is out of range: allowed {allowed}" + (f" ({allowed.why})" if allowed.why else "")
        return None
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        whys = [problem(value, a) for a in options]
        if any(w is None for w in whys):
            return None
        values = [(w, a) for w, a in zip(whys, options, strict=True) if a is not type(None)]
        nullable = " (or null)" if type(None) in options else ""
        if len(values) == 1:  # Optional[X]: what X says, e.g. out of range, not an integer
            return values[0][0] + nullable
        return f"must be {_describe(annotation)}"
    if annotation is type(None):
        return None if value is None else "must be None (null)"
    if origin is typing.Literal:
        allowed = typing.get_args(annotation)
        if any(value == a and type(value) is type(a) for a in allowed):
            return None
        return "is not allowed: must be one of " + ", ".join(map(repr, allowed))
    if origin in (list, tuple):
        inner = (typing.get_args(annotation) or (Any,))[0]
        if not isinstance(value, (list, tuple)):
            return f"must be a {_describe(annotation)}"
        for i, item in enumerate(value):
            if (why := problem(item, inner)) is not None:
                return f"item {i} ({item!r}) {why}"
        return None
    if annotation is float:
        return None if isinstance(value, (int, float)) and not isinstance(value, bool) else "must be of type float"
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return "must be an integer (of type int)" if isinstance(value, float) else "must be of type int"
        return None
    if isinstance(annotation, type) and not isinstance(value, annotation):
        return f"must be of type {_describe(annotation)}"
    return None


def check_value(where: str, key: str, value: Any, annotation: Any, prefix: str | None = None) -> None:
    """A ConfigError naming the key as it is typed on the command line (``prefix.key``; ``prefix`` defaults to
    ``where`` when that is a config path such as ``trainer``), the value and what is allowed, when ``value`` does
    not fit ``annotation``."""
    why = problem(value, annotation)
    if why is None:
        return
    dotted = prefix if prefix is not None else (where if where.replace(".", "").replace("_", "").isalnum() else "")
    name = f"{dotted}.{key}" if dotted else key
    context = "" if where in ("", dotted) else f" ({where})"
    raise ConfigError(f"{name}={value!r}{context} {why}; fix it in the config or on the command line")


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    target = fn.__init__ if inspect.isclass(fn) and not dataclasses.is_dataclass(fn) else fn
    return typing.get_type_hints(target, include_extras=True)


def check_kwargs(fn: Callable[..., Any], values: dict[str, Any], where: str, supplied: tuple[str, ...] = (),
                 prefix: str | None = None) -> None:
    """Check ``values`` against the signature of ``fn`` (a class or function): known keys, required ones present,
    every value of its annotated type, finite and in its declared range (``problem``).

    ``supplied`` names arguments that the harness fills in at build time (they must not be in YAML); ``prefix`` the
    config path of the keys when ``where`` is not one (``attention`` for ``attention=softmax``).
    """
    sig = inspect.signature(fn)
    hints = _hints(fn)
    allowed = [p for p in sig.parameters if p not in ("self", *supplied)]
    for key, value in values.items():
        if key in supplied:
            raise ConfigError(f"{where}: '{key}' is supplied by the harness and must not be set in the config")
        if key not in allowed:
            best = closest(key, allowed)
            hint = f" (did you mean '{best}'?)" if best else ""
            raise ConfigError(f"{where}: unknown option '{key}'{hint}; valid options: {', '.join(allowed)}")
        check_value(where, key, value, hints.get(key, inspect.Parameter.empty), prefix)
    missing = [
        p.name
        for p in sig.parameters.values()
        if p.name not in ("self", *supplied) and p.default is inspect.Parameter.empty and p.name not in values
    ]
    if missing:
        raise ConfigError(f"{where}: missing required option(s): {', '.join(missing)}")


def check_fields(obj: Any, where: str) -> None:
    """``check_value`` for every field of the dataclass instance ``obj`` (from its ``__post_init__``): a direct
    construction is held to the same rule as a config section."""
    hints = typing.get_type_hints(type(obj), include_extras=True)
    for f in dataclasses.fields(obj):
        check_value(where, f.name, getattr(obj, f.name), hints.get(f.name, Any))


def to_dataclass(cls: type[T], values: dict[str, Any], where: str) -> T:
    """Build a validated dataclass (its ``__post_init__`` checks what depends on several fields) from a plain config
    section."""
    values = dict(values)
    check_kwargs(cls, values, where)
    return cls(**values)


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
        raise ConfigError(f"{key}={value} is out of range: allowed [0, 1) (1 would drop everything)")
    return value


def non_finite(value: Any, path: str = "") -> tuple[str, Any] | None:
    """The first number in a nested config (dicts and lists) that is not finite, as (dotted key, value), or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return path, value
    if isinstance(value, dict):
        items = ((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
    elif isinstance(value, (list, tuple)):
        items = ((f"{path}[{i}]", v) for i, v in enumerate(value))
    else:
        return None
    for key, item in items:
        if (found := non_finite(item, key)) is not None:
            return found
    return None


__all__ = ["Count", "DropRate", "LearningRate", "NonNegativeFloat", "NonNegativeInt", "PositiveFloat", "Probability",
           "Range", "Seed",
           "check_choice", "check_fields", "check_kwargs", "check_literals", "check_value", "closest",
           "declared_range", "fraction", "is_numeric", "non_finite", "non_negative", "positive", "problem",
           "to_dataclass"]
