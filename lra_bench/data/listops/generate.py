"""ListOps generator: the official LRA algorithm (``lra_benchmarks/data/listops.py``), seeded.

Nangia & Bowman 2018 (https://arxiv.org/abs/1804.06028) as used by Long Range Arena
(Tay et al. 2020, https://arxiv.org/abs/2011.04006, §1.3 of shared/reference/LRA.md).

Faithful to the release: operators MIN, MAX, MED, SM; values 0-9; VALUE_P = 0.25 (a node is an
operator with probability 0.25 while depth < max_depth); 2..max_args arguments; ``length`` = 2 per
operator + 1 per value, accepted when ``min_length < length < max_length``; unique trees; the
left-nested binary string format ``( ( ( [MAX 2 ) 9 ) ] )``; MED = int(median), SM = sum % 10.
Differences, all in the name of determinism and speed: seeded ``random.Random`` streams instead of the
global RNG, and a fixed order instead of Python ``set`` order (which depends on the hash seed) for the split.

Parallel and exact: candidates are drawn in fixed-size chunks, chunk ``c`` from its own RNG seeded by
``SeedSequence((seed, c))``; worker processes draw chunks, and the parent takes each chunk's rows in chunk
order, drops any expression seen before and stops at the requested total (further chunks top up when
duplicates leave it short). The chunk size depends on the split sizes only, so the output for a spec is
the same whatever the number of workers.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import statistics
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from typing import Annotated

import numpy as np

from lra_bench.checks import Count, NonNegativeInt, Range, Seed
from lra_bench.infra.children import pool_worker_init, spawning, start_pool_services
from lra_bench.infra.progress import tracked

MIN, MAX, MED, SUM_MOD, END = "[MIN", "[MAX", "[MED", "[SM", "]"
OPERATORS = (MIN, MAX, MED, SUM_MOD)
VALUES = tuple(range(10))
VALUE_P = 0.25

#: Bump when the rows generated for a spec change, so cached TSVs of an older generator are not reused.
#: 1: one serial RNG stream (until issue 13); 2: per-chunk RNG streams, generated in parallel.
GENERATOR_VERSION = 2
MAX_WORKERS = 16  # the default (workers=0) uses the usable CPUs up to this many
AUTO_SERIAL_BELOW = 5_000  # workers=0 stays in-process below this many rows (starting processes costs more)

# A tree is an int leaf, or a nested binary pair: ((((op, a0), a1), ...), END)
Tree = int | str | tuple


@dataclass(frozen=True)
class ListOpsSpec:
    """The generator's flags (defaults = the official ``--task=basic`` run).

    ``workers`` is the number of processes (0 = the usable CPUs, at most ``MAX_WORKERS``, or in-process
    below ``AUTO_SERIAL_BELOW`` rows); it changes the speed only, never the rows, and is left out of
    ``data_key()``.
    """

    num_train: Count = 96_000
    num_val: Count = 2_000
    num_test: Count = 2_000
    max_depth: Count = 10
    max_args: Annotated[int, Range(2, why="an operator takes 2 or more arguments")] = 10
    min_length: NonNegativeInt = 500
    max_length: Count = 2000
    seed: Seed = 0
    workers: NonNegativeInt = 0

    def data_key(self) -> dict[str, int]:
        """What determines the rows: every flag but ``workers``, plus the generator version."""
        key = {k: v for k, v in asdict(self).items() if k != "workers"}
        return {**key, "generator_version": GENERATOR_VERSION}


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


def chunk_size(total: int) -> int:
    """Accepted candidates per chunk: a function of the total only (never of the worker count)."""
    return max(1, min(total, 500, max(50, math.ceil(total / 32))))


def chunk_seed(seed: int, chunk: int) -> int:
    """The RNG seed of chunk ``chunk``: independent streams from ``numpy.random.SeedSequence((seed, chunk))``."""
    state = np.random.SeedSequence((seed, chunk)).generate_state(4, dtype=np.uint32)  # (4,) 128 bits
    return int.from_bytes(state.tobytes(), "little")


def generate_chunk(spec: ListOpsSpec, chunk: int, size: int) -> list[tuple[str, int]]:
    """``size`` (source, target) rows passing the length filter, drawn from chunk ``chunk``'s RNG, in order.

    Rows may repeat (within or across chunks): the caller deduplicates. Raises RuntimeError when the
    length range admits (almost) no tree.
    """
    rng = random.Random(chunk_seed(spec.seed, chunk))
    rows: list[tuple[str, int]] = []
    attempts = 0
    while len(rows) < size:
        attempts += 1
        if attempts > 10_000 * size + 1_000_000:
            raise RuntimeError(
                f"ListOps generator found only {len(rows)} of {size} samples in {attempts - 1} draws with "
                f"{spec.min_length} < length < {spec.max_length}; widen the length range"
            )
        try:  # budget max_length: a tree reaching length >= max_length is rejected anyway
            tree, length = generate_tree(rng, 1, spec.max_depth, spec.max_args, [spec.max_length])
        except _TooLong:
            continue
        if spec.min_length < length < spec.max_length:
            rows.append((to_string(tree), int(to_value(tree))))  # type: ignore[arg-type]
    return rows


def _generate_chunk_star(args: tuple[ListOpsSpec, int, int]) -> list[tuple[str, int]]:
    return generate_chunk(*args)


def resolve_workers(workers: int) -> int:
    """0 = the CPUs this process may use, at most ``MAX_WORKERS``; otherwise ``workers`` itself (>= 1)."""
    if workers < 0:
        raise ValueError(f"ListOps generator: workers must be >= 0 (0 = one per usable CPU), got {workers}")
    if workers:
        return workers
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(usable, MAX_WORKERS))


def effective_workers(spec: ListOpsSpec) -> int:
    """The processes ``generate(spec)`` uses: ``spec.workers``, or for 0 the usable CPUs (1 for small totals)."""
    total = spec.num_train + spec.num_val + spec.num_test
    return resolve_workers(spec.workers) if spec.workers or total >= AUTO_SERIAL_BELOW else 1


def generate(spec: ListOpsSpec) -> dict[str, list[tuple[str, int]]]:
    """Unique (source, target) rows split train/val/test in a fixed order, deterministic in ``spec.seed``.

    The same rows for any ``spec.workers`` (see the module docstring for the chunked design).
    """
    total = spec.num_train + spec.num_val + spec.num_test
    size = chunk_size(total)
    max_chunks = 20 * math.ceil(total / size) + 20  # more means > 95% duplicates: the range is too narrow
    workers = effective_workers(spec)
    unique: dict[str, int] = {}  # source -> target, in acceptance order
    next_chunk = 0

    def consume(rows: list[tuple[str, int]]) -> None:
        for source, target in rows:
            if len(unique) == total:
                return
            unique.setdefault(source, target)

    pool = None
    if workers > 1 and total > size:
        # spawn, not fork: the caller may hold threads (torch) that a forked child would inherit broken
        # workers die with this process, even SIGKILLed, and leave the stop signals to it (infra/children.py)
        start_pool_services()
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                   initializer=pool_worker_init, initargs=(os.getpid(),))
    try:
        while len(unique) < total:
            if next_chunk >= max_chunks:
                raise RuntimeError(
                    f"ListOps generator found only {len(unique)} unique of {total} samples in {next_chunk} "
                    f"chunks of {size} with {spec.min_length} < length < {spec.max_length}; widen the length range"
                )
            # enough chunks for what is missing (at least one per worker); surplus chunks are discarded
            wanted = max(math.ceil((total - len(unique)) / size), workers if pool else 1)
            chunks = range(next_chunk, min(next_chunk + wanted, max_chunks))
            next_chunk = chunks.stop
            jobs = [(spec, c, size) for c in chunks]
            with spawning():  # workers start here, with the stop signals blocked until they ignore them
                results = pool.map(_generate_chunk_star, jobs) if pool else map(_generate_chunk_star, jobs)
            for rows in tracked(results, len(jobs), f"generate ListOps ({total:,} rows)", "chunk"):  # chunk order
                consume(rows)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    rows = list(unique.items())
    a, b = spec.num_train, spec.num_train + spec.num_val
    return {"train": rows[:a], "val": rows[a:b], "test": rows[b:]}
