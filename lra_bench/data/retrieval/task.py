"""Retrieval (LRA §1.1): does one ACL Anthology Network paper cite the other? Two byte-level documents.

Data: the LRA release's ``lra_release/tsv_data/new_aan_pairs.{train,eval,test}.tsv`` (there is no Hub copy).
Format (``matching/input_pipeline.py::get_tsv_dataset``): tab-separated, **no header**, 5 columns
``label, id1, id2, text1, text2``, label a float ("0.0" / "1.0"), quotes not special
(``use_quote_delim=False``). Each text is cut to 10,000 bytes (``encoder.encode(s.numpy()[:10000])``), byte
tokenised (id = byte + 1) and truncated/padded to ``max_len`` (4000) per document. The texts are taken as raw
bytes, as TF does: nothing is decoded, so bytes that are not valid UTF-8 are kept rather than rejected.
Release sizes: 147,086 / 18,090 / 17,437 pairs.

Inputs are (n, 2, max_len) uint16; the runner builds a ``DualClassifier`` (one shared encoder for both
documents) combining the two pooled vectors as set by ``interaction``.
For tests and CPU runs, ``python -m lra_bench.data.retrieval.fixture OUT_DIR`` writes a small learnable
fixture in exactly this format.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from lra_bench.checks import Count, Seed
from lra_bench.data import bytes as byte_tokens
from lra_bench.data.cache import CachedSplits, load_or_build
from lra_bench.data.task import Task
from lra_bench.data.text.task import check_subset_sizes, subsample
from lra_bench.errors import ConfigError, DataError
from lra_bench.store.files import file_sha256, stable_hash

log = logging.getLogger(__name__)

RELEASE_URL = "https://storage.googleapis.com/long-range-arena/lra_release.gz"
RELEASE_SUBDIR = "lra_release/tsv_data/"
FILE_SPLITS = {"train": "train", "val": "eval", "test": "test"}  # our split -> release file infix
RAW_CUT = 10_000  # bytes kept of each raw text before encoding (LRA)
NUM_FIELDS = 5
TOKENIZER_VERSION = 1  # bump when tokenisation changes, so old caches are not reused


def split_path(root: Path | str, split: str) -> Path:
    return Path(root) / f"new_aan_pairs.{FILE_SPLITS[split]}.tsv"


def parse_label(field_: bytes, path: Path, lineno: int) -> int:
    try:
        value = float(field_)
    except ValueError:
        value = None
    if value not in (0.0, 1.0):
        raise DataError(f"{path}:{lineno}: label {field_[:20]!r} is not 0.0 or 1.0; expected 5 tab-separated "
                        "columns label, id1, id2, text1, text2")
    return int(value)


def count_rows(path: Path) -> int:
    """Lines in ``path`` (a final line without a newline counts; a trailing newline adds nothing)."""
    n, last = 0, b"\n"
    with path.open("rb") as f:
        while block := f.read(1 << 22):
            n += block.count(b"\n")
            last = block[-1:]
    return n + (last != b"\n")


def read_tsv(path: Path, max_len: int) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """(n, 2, max_len) uint16 ids and (n,) labels of one AAN TSV, streamed; malformed rows name file:line."""
    n = count_rows(path)
    ids = np.zeros((n, 2, max_len), dtype=np.uint16)
    labels = np.empty(n, dtype=np.int64)
    stats = {"rows": n, "truncated_docs": 0}
    with path.open("rb") as f:
        for i, line in enumerate(f):
            lineno = i + 1
            line = line.rstrip(b"\n")
            if line.endswith(b"\r"):
                line = line[:-1]
            fields = line.split(b"\t")
            if len(fields) != NUM_FIELDS:
                raise DataError(f"{path}:{lineno}: expected {NUM_FIELDS} tab-separated columns (label, id1, id2, "
                                f"text1, text2), found {len(fields)}; the file is not an LRA AAN TSV or is damaged")
            labels[i] = parse_label(fields[0], path, lineno)
            for doc, text in enumerate(fields[3:]):
                cut = text[:RAW_CUT]
                stats["truncated_docs"] += len(cut) > max_len
                byte_tokens.encode_into(ids, (i, doc), cut)
    return ids, labels, stats


@dataclass
class RetrievalTask(Task):
    """AAN citation matching (LRA "Retrieval"): two documents of ``max_len`` bytes each, 2 classes.

    Args:
        name: task name used in records ("retrieval").
        source: "auto" (= files; there is no Hub copy), "files" or "synthetic".
        data_dir: folder with ``new_aan_pairs.{train,eval,test}.tsv`` (``lra_release/tsv_data`` of the release).
        max_len: bytes per document after the 10,000-byte cut (LRA 4000).
        synthetic_sizes: [train, val, test] for source=synthetic.
        interaction: how the two pooled documents meet the head: "concat" = [u, v] (the released LRA code, whose
            matching model never passes interaction='NLI') or "nli" = [u, v, u*v, u-v] (the paper's Eq. 1 and
            the PyTorch re-implementations). Default "concat": the harness pins the released configs, which the
            LRA maintainers named as the ones that produced the paper's results (LRA.md §1.7); the ``small``
            profile switches to "nli" with the rest of that setting.
        max_train_examples: use a seeded random subset of the training pairs (null = all).
        max_eval_examples: use seeded random subsets of this size of val and of test (null = all).
        subset_seed: seed of those subsets.
    """

    name: str = "retrieval"
    source: str = "auto"
    data_dir: str | None = None
    max_len: Count = 4000
    synthetic_sizes: list[Count] = field(default_factory=lambda: [256, 64, 64])
    interaction: Literal["concat", "nli"] = "concat"
    max_train_examples: Count | None = None
    max_eval_examples: Count | None = None
    subset_seed: Seed = 0

    vocab_size = byte_tokens.VOCAB_SIZE
    num_classes = 2
    pad_id = byte_tokens.PAD_ID
    dual = True
    sources = ("auto", "files")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.interaction not in ("concat", "nli"):
            raise ConfigError(f"task.interaction must be 'concat' or 'nli', got {self.interaction!r}")
        check_subset_sizes("task", self.max_train_examples, self.max_eval_examples)
        if self.source == "auto":
            self.source = "files"

    def hint(self) -> str:
        return (f"download and unpack the LRA release ({RELEASE_URL}) and set task.data_dir to its "
                f"{RELEASE_SUBDIR} folder (new_aan_pairs.{{train,eval,test}}.tsv); for a small test fixture in the "
                "same format run: python -m lra_bench.data.retrieval.fixture OUT_DIR")

    def check_source(self) -> None:
        if self.source != "files":
            return
        if self.data_dir is None:
            raise DataError(f"the retrieval task has no Hub copy and task.data_dir is not set; {self.hint()}")
        root = Path(self.data_dir).expanduser()
        if not root.is_dir():
            raise DataError(f"task.data_dir={self.data_dir} does not exist or is not a folder; {self.hint()}")
        missing = [split_path(root, s).name for s in FILE_SPLITS if not split_path(root, s).is_file()]
        if missing:
            raise DataError(f"task.data_dir={self.data_dir} lacks {', '.join(missing)}; {self.hint()}")

    def load_real(self, cache_dir: Path) -> CachedSplits:
        root = Path(self.data_dir).expanduser()
        shas = {s: file_sha256(split_path(root, s)) for s in FILE_SPLITS}
        key = {"task": "retrieval", "tsv_sha256": shas, "max_len": self.max_len, "tokenizer": TOKENIZER_VERSION}

        def build() -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
            splits, stats = {}, {}
            for split in FILE_SPLITS:
                ids, labels, stats[split] = read_tsv(split_path(root, split), self.max_len)
                splits[split] = (ids.reshape(len(labels), 2 * self.max_len), labels)  # the cache stores 2-D rows
            meta = {"fingerprint": stable_hash(shas), "source": "files", "tsv_dir": str(root.resolve()),
                    "stats": stats}
            return splits, meta

        cached = load_or_build(Path(cache_dir), "retrieval/arrow", key, build)
        seed = self.subset_seed
        limits = {"train": self.max_train_examples, "val": self.max_eval_examples, "test": self.max_eval_examples}
        inputs, labels = {}, {}
        for i, split in enumerate(FILE_SPLITS):
            x = cached.inputs[split].reshape(len(cached.labels[split]), 2, self.max_len)
            inputs[split], labels[split] = subsample(x, cached.labels[split], limits[split], seed + i)
        meta = {**cached.meta, "interaction": self.interaction,
                "subset": {"max_train_examples": self.max_train_examples,
                           "max_eval_examples": self.max_eval_examples, "seed": seed}}
        return CachedSplits(inputs=inputs, labels=labels, meta=meta, path=cached.path, reused=cached.reused)
