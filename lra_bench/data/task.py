"""The task contract shared by every LRA task, and the ``synthetic`` source every task offers.

A task is a dataclass built from ``configs/task/NAME.yaml`` (``_target_`` = the class; every other key
is a constructor argument, type-checked before anything is loaded). Class attributes describe the
model-facing contract:

    vocab_size   token ids are in [0, vocab_size)
    num_classes  labels are in [0, num_classes)
    pad_id       the id of padding (mask = ids != pad_id), or None when every position is real (images)
    dual         True for two-document tasks (retrieval): inputs are (n, 2, max_len)
    sources      the values ``source`` may take besides "synthetic"

``load(cache_dir)`` returns ``CachedSplits`` with uint8/uint16 inputs of shape (n, max_len) — or
(n, 2, max_len) when dual — and int64 labels, for the splits "train", "val" and "test".
``source: synthetic`` gives random data of exactly those shapes, vocabulary and label count, for tests
and pure speed runs; its records are marked synthetic and never enter an LRA score.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from lra_bench.checks import Count, check_fields
from lra_bench.data.cache import CachedSplits
from lra_bench.errors import ConfigError
from lra_bench.store.files import stable_hash

SPLITS = ("train", "val", "test")


@dataclass
class Task:
    """Fields shared by every task.

    Args:
        name: the task's name in records (== config file stem).
        source: where the data comes from (task-specific, see ``sources``) or "synthetic".
        data_dir: local copy of the data in its published format; meaning per task.
        max_len: tokens per sequence (per document for dual tasks) after truncation / padding.
        synthetic_sizes: [train, val, test] examples for ``source: synthetic``.
    """

    name: str
    source: str
    data_dir: str | None
    max_len: Count
    synthetic_sizes: list[Count]

    vocab_size: ClassVar[int]
    num_classes: ClassVar[int]
    pad_id: ClassVar[int | None] = 0
    dual: ClassVar[bool] = False
    sources: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        check_fields(self, "task")  # types, finiteness, the declared ranges
        valid = (*self.sources, "synthetic")
        if self.source not in valid:
            raise ConfigError(f"task.source={self.source!r} is not valid for {self.name}; choose one of {valid}")
        if len(self.synthetic_sizes) != 3 or min(self.synthetic_sizes) <= 0:
            raise ConfigError(f"task.synthetic_sizes must be 3 positive counts [train, val, test], "
                              f"got {self.synthetic_sizes}")

    @property
    def synthetic(self) -> bool:
        return self.source == "synthetic"

    def check_source(self) -> None:
        """Fail early, before any training, when the configured source cannot work (override per task)."""

    def load(self, cache_dir: Path) -> CachedSplits:
        self.check_source()
        if self.synthetic:
            return self.synthetic_splits()
        return self.load_real(Path(cache_dir))

    def load_real(self, cache_dir: Path) -> CachedSplits:
        raise NotImplementedError

    def synthetic_splits(self, seed: int = 0) -> CachedSplits:
        """Uniform random tokens (a random number of trailing pads when the task pads) and labels."""
        rng = np.random.default_rng(seed)
        dtype = np.uint8 if self.vocab_size <= 256 else np.uint16
        low = 0 if self.pad_id is None else 1
        inputs, labels = {}, {}
        shape_tail = (2, self.max_len) if self.dual else (self.max_len,)
        for split, n in zip(SPLITS, self.synthetic_sizes, strict=True):
            x = rng.integers(low, self.vocab_size, size=(n, *shape_tail), dtype=np.int64)
            if self.pad_id is not None:
                lengths = rng.integers(max(1, self.max_len // 2), self.max_len + 1, size=(n, *shape_tail[:-1]))
                x[np.arange(self.max_len) >= lengths[..., None]] = self.pad_id
            inputs[split] = x.astype(dtype)
            labels[split] = rng.integers(0, self.num_classes, size=n, dtype=np.int64)
        meta = {"fingerprint": stable_hash({"synthetic": self.name, "sizes": self.synthetic_sizes,
                                            "max_len": self.max_len, "seed": seed}),
                "source": "synthetic", "synthetic": True}
        return CachedSplits(inputs=inputs, labels=labels, meta=meta, path=Path("<synthetic>"), reused=False)
