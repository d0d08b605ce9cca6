"""The Hugging Face sources the text and image tasks share: a Hub dataset (``datasets.load_dataset``, probed once so an
offline machine fails in seconds), a local copy of its Parquet files, and seeded subsets of a split."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lra_bench.checks import positive
from lra_bench.data.hub_access import hub_endpoint, hub_unreachable, offline_mode, offline_requested
from lra_bench.errors import DataError

log = logging.getLogger(__name__)


def hub_url(dataset: str) -> str:
    return f"https://huggingface.co/datasets/{dataset}"


# --------------------------------------------------------------------------- Hugging Face Parquet layout


def find_hf_parquet(root: Path, split: str) -> list[Path]:
    """The Parquet shards of ``split`` in a local copy of a Hub dataset, or [] when there are none.

    Accepts the dataset folder itself (``<root>/plain_text/train-00000-of-00001.parquet``, the layout of
    ``stanfordnlp/imdb`` and ``uoft-cs/cifar10``), its ``plain_text`` or ``data`` sub-folder, or shards
    directly in ``root``.
    """
    for base in (root / "plain_text", root / "data", root):
        shards = sorted(base.glob(f"{split}-*.parquet"))
        if shards:
            return shards
    return []


def read_parquet(shards: Sequence[Path], columns: Sequence[str]) -> Any:
    """One ``pyarrow.Table`` with ``columns`` from all shards; unreadable files or missing columns are a
    DataError naming the file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    tables = []
    for path in shards:
        try:
            names = pq.read_schema(path).names
        except (pa.ArrowException, OSError) as e:
            raise DataError(f"{path} is not a readable Parquet file ({type(e).__name__}: {e}); it is probably "
                            "truncated or damaged: copy or download it again") from e
        missing = [c for c in columns if c not in names]
        if missing:
            raise DataError(f"{path} has columns {names} but lacks {missing}; expected the Hugging Face layout "
                            f"with columns {list(columns)}")
        try:
            tables.append(pq.read_table(path, columns=list(columns)))
        except (pa.ArrowException, OSError) as e:
            raise DataError(f"{path} could not be read ({type(e).__name__}: {e}); it is probably truncated or "
                            "damaged: copy or download it again") from e
    return pa.concat_tables(tables) if len(tables) > 1 else tables[0]


def load_hub(dataset: str, splits: Sequence[str], columns: Sequence[str], files_hint: str) -> dict[str, Any]:
    """``datasets.load_dataset(dataset)`` -> {split: pyarrow.Table with ``columns``}.

    The Hub is probed once first: when it does not answer, only the local Hugging Face cache is read (as with
    ``HF_HUB_OFFLINE=1``), so an offline machine fails in seconds instead of after ``datasets``' retries.
    Offline with nothing cached ``datasets`` raises ConnectionError; that and any other download failure
    become a DataError naming the dataset, its URL and ``files_hint``.
    """
    import datasets

    local = Path(dataset).expanduser().is_dir()  # datasets reads a local copy without the Hub
    why = None if offline_requested() or local else hub_unreachable(hub_endpoint())
    if why is not None:
        log.warning("the Hugging Face Hub (%s) is unreachable (%s): looking for %s in the local Hugging Face "
                    "cache only, as with HF_HUB_OFFLINE=1", hub_endpoint(), why, dataset)
    try:
        with offline_mode() if why is not None else contextlib.nullcontext():
            ds = datasets.load_dataset(dataset)
    except (ConnectionError, OSError, datasets.exceptions.DatasetNotFoundError) as e:
        cause = f"{type(e).__name__}: {e}" if why is None else (
            f"the Hub at {hub_endpoint()} is unreachable ({why}) and the dataset is not in the local Hugging Face "
            "cache")
        raise DataError(f"could not load the Hugging Face dataset {dataset} ({hub_url(dataset)}): {cause}. "
                        f"Without network access, {files_hint}") from e
    missing_splits = [s for s in splits if s not in ds]
    if missing_splits:
        raise DataError(f"the Hugging Face dataset {dataset} has splits {list(ds)}, not {missing_splits[0]!r}")
    out = {}
    for split in splits:
        table = ds[split].data.table
        missing = [c for c in columns if c not in table.column_names]
        if missing:
            raise DataError(f"the Hugging Face dataset {dataset} ({split}) lacks columns {missing}")
        out[split] = table.select(list(columns))
    return out


def subsample(x: np.ndarray, y: np.ndarray, n: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A seeded random subset of ``n`` examples in their original order (all of them when n is None)."""
    if n is None or n >= len(y):
        return x, y
    idx = np.sort(np.random.default_rng(seed).permutation(len(y))[:n])
    return x[idx], y[idx]


def check_subset_sizes(where: str, max_train_examples: int | None, max_eval_examples: int | None) -> None:
    positive(where, max_train_examples=max_train_examples, max_eval_examples=max_eval_examples)
