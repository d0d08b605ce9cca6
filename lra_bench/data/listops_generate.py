"""ListOps generator: the official LRA algorithm (``lra_benchmarks/data/listops.py``), seeded.

Nangia & Bowman 2018 (https://arxiv.org/abs/1804.06028) as used by Long Range Arena
(Tay et al. 2020, https://arxiv.org/abs/2011.04006, §1.3 of shared/reference/LRA.md).

Faithful to the release: operators MIN, MAX, MED, SM; values 0-9; VALUE_P = 0.25 (a node is an
operator with probability 0.25 while depth < max_depth); 2..max_args arguments; ``length`` = 2 per
operator + 1 per value, accepted when ``min_length < length < max_length``; unique trees; the
left-nested binary string format ``( ( ( [MAX 2 ) 9 ) ] )``; MED = int(median), SM = sum % 10.
Differences, all in the name of determinism: a seeded ``random.Random`` instead of the global RNG,
and insertion order instead of Python ``set`` order (which depends on the hash seed) for the split.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass

MIN, MAX, MED, SUM_MOD, END = "[MIN", "[MAX", "[MED", "[SM", "]"
OPERATORS = (MIN, MAX, MED, SUM_MOD)
VALUES = tuple(range(10))
VALUE_P = 0.25

# A tree is an int leaf, or a nested binary pair: ((((op, a0), a1), ...), END)
Tree = int | str | tuple


@dataclass(frozen=True)
class ListOpsSpec:
    """The generator's flags (defaults = the official ``--task=basic`` run)."""

    num_train: int = 96_000
    num_val: int = 2_000
    num_test: int = 2_000
    max_depth: int = 10
    max_args: int = 10
    min_length: int = 500
    max_length: int = 2000
    seed: int = 0


class _TooLong(Exception):
    """Raised to abandon a tree as soon as it can no longer pass the length filter."""


def generate_tree(
    rng: random.Random, depth: int, max_depth: int, max_args: int, budget: list[int] | None = None
) -> tuple[Tree, int]:
    """One random expression and its length (the official recursion, same RNG call order).

    ``budget`` (a one-element list, mutated) is the length still allowed; when it runs out the tree
    is abandoned with ``_TooLong``. Rejected trees are discarded anyway, so stopping early leaves the
    distribution of accepted trees unchanged and saves building huge trees only to drop them.
    """
    r = rng.random() if depth < max_depth else 1.0
    if r > VALUE_P:
        _spend(budget, 1)
        return rng.choice(VALUES), 1
    _spend(budget, 2)
    length = 2
    num_values = rng.randint(2, max_args)
    values = []
    for _ in range(num_values):
        sub_tree, sub_length = generate_tree(rng, depth + 1, max_depth, max_args, budget)
        values.append(sub_tree)
        length += sub_length
    tree: Tree = (rng.choice(OPERATORS), values[0])
    for value in values[1:]:
        tree = (tree, value)
    return (tree, END), length


def _spend(budget: list[int] | None, amount: int) -> None:
    if budget is not None:
        budget[0] -= amount
        if budget[0] <= 0:
            raise _TooLong


def to_string(tree: Tree) -> str:
    """The release's bracketed string: every binary node printed as '( left right )'."""
    if isinstance(tree, tuple):
        return "( " + to_string(tree[0]) + " " + to_string(tree[1]) + " )"
    return str(tree)


def to_value(tree: Tree) -> Tree | tuple[str, list[int]] | int:
    """Evaluate a tree the way the official code does (partial applications as (op, args))."""
    if not isinstance(tree, tuple):
        return tree
    left, right = to_value(tree[0]), to_value(tree[1])
    if left in OPERATORS:
        return (left, [right])
    if right == END:
        op, args = left
        if op == MIN:
            return min(args)
        if op == MAX:
            return max(args)
        if op == MED:
            return int(statistics.median(args))
        return sum(args) % 10
    op, args = left
    return (op, args + [right])


def generate(spec: ListOpsSpec) -> dict[str, list[tuple[str, int]]]:
    """Unique (source, target) rows split train/val/test in generation order, deterministic in ``spec.seed``."""
    rng = random.Random(spec.seed)
    total = spec.num_train + spec.num_val + spec.num_test
    unique: dict[Tree, None] = {}
    attempts = 0
    while len(unique) < total:
        attempts += 1
        if attempts > 10_000 * total + 1_000_000:
            raise RuntimeError(
                f"ListOps generator found only {len(unique)} of {total} samples with "
                f"{spec.min_length} < length < {spec.max_length}; widen the length range"
            )
        try:  # budget max_length: a tree reaching length >= max_length is rejected anyway
            tree, length = generate_tree(rng, 1, spec.max_depth, spec.max_args, [spec.max_length])
        except _TooLong:
            continue
        if spec.min_length < length < spec.max_length:
            unique[tree] = None
    rows = [(to_string(t), int(to_value(t))) for t in unique]  # type: ignore[arg-type]
    a, b = spec.num_train, spec.num_train + spec.num_val
    return {"train": rows[:a], "val": rows[a:b], "test": rows[b:]}
