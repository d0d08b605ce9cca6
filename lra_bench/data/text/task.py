"""Text (LRA §1.1): byte-level IMDb sentiment classification, read from the Hub, a local copy, or aclImdb.

LRA (``text_classification/input_pipeline.py``, ``--task_name=imdb_reviews``) reads TFDS ``imdb_reviews``:
25,000 train and 25,000 test reviews; **the test split doubles as the validation split**. TFDS stores each
review as its raw file bytes with ASCII whitespace stripped (``imdb_f.read().strip()``); ByteTextEncoder maps
byte b to id b + 1, truncates to ``max_length`` (1000 in the released config, 4000 in the paper) and pads
with 0. The same texts are read here from

* the Hugging Face dataset ``stanfordnlp/imdb`` (``source: hub``; ``datasets.load_dataset``),
* a local copy of that dataset's Parquet files (``source: files``, ``data_dir`` holding
  ``plain_text/{train,test}-*.parquet`` with columns ``text``, ``label``), or
* the original ``aclImdb`` folder (``source: files``, ``data_dir`` holding ``train/{pos,neg}/*.txt`` and
  ``test/{pos,neg}/*.txt``).

Both channels give the same reviews; each text is UTF-8 encoded and stripped of leading/trailing ASCII
whitespace as bytes (``bytes.strip``, as TFDS does; ``str.strip`` would also remove e.g. U+00A0, which
TFDS keeps). Labels: 0 = negative, 1 = positive.

The Hugging Face side (the Hub, local Parquet copies, seeded subsets) is shared with the image task:
``lra_bench.data.hf_source``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lra_bench.checks import Count, Seed
from lra_bench.data import bytes as byte_tokens
from lra_bench.data.cache import CachedSplits, load_or_build
from lra_bench.data.hf_source import check_subset_sizes, find_hf_parquet, hub_url, load_hub, read_parquet, subsample
from lra_bench.data.task import Task
from lra_bench.errors import ConfigError, DataError
from lra_bench.store.files import file_sha256, stable_hash

log = logging.getLogger(__name__)

HUB_DATASET = "stanfordnlp/imdb"
ACLIMDB_URL = "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
TOKENIZER_VERSION = 1  # bump when tokenisation changes, so old caches are not reused
SOURCE_SPLITS = ("train", "test")  # IMDb has no validation split: LRA validates on test
LABELS = {"neg": 0, "pos": 1}


# --------------------------------------------------------------------------- IMDb readers


def find_aclimdb(root: Path) -> Path | None:
    """The ``aclImdb`` folder (``root`` itself or ``root/aclImdb``) when it has train/ and test/ pos+neg."""
    for base in (root, root / "aclImdb"):
        if all((base / s / c).is_dir() for s in SOURCE_SPLITS for c in LABELS):
            return base
    return None


def aclimdb_files(base: Path, split: str) -> list[tuple[Path, int]]:
    files = []
    for folder, label in LABELS.items():
        found = sorted((base / split / folder).glob("*.txt"))
        if not found:
            raise DataError(f"{base / split / folder} has no *.txt reviews; expected the aclImdb layout "
                            f"of {ACLIMDB_URL}")
        files += [(p, label) for p in found]
    return files


def read_aclimdb(base: Path, split: str) -> tuple[list[bytes], np.ndarray]:
    """Review bytes (stripped as TFDS does) and labels; a file that is not UTF-8 is a DataError."""
    texts, labels = [], []
    for path, label in aclimdb_files(base, split):
        raw = path.read_bytes()
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise DataError(f"{path} is not valid UTF-8 (byte {e.start}: {raw[e.start:e.start + 4]!r}); "
                            "the aclImdb copy is damaged: extract it again") from e
        texts.append(raw.strip())
        labels.append(label)
    return texts, np.asarray(labels, dtype=np.int64)


def table_texts_labels(table: Any, where: str) -> tuple[list[bytes], np.ndarray]:
    """(stripped UTF-8 bytes, labels) from an Arrow table with columns text, label."""
    try:
        texts = [s.encode("utf-8").strip() for s in table.column("text").to_pylist()]
    except (AttributeError, UnicodeError) as e:
        raise DataError(f"{where}: column 'text' must hold UTF-8 strings ({type(e).__name__}: {e})") from e
    labels = np.asarray(table.column("label").to_pylist())
    if labels.dtype.kind not in "iu" or not np.isin(labels, (0, 1)).all():
        bad = sorted({repr(v) for v in labels.tolist() if v not in (0, 1)})[:5]
        raise DataError(f"{where}: column 'label' must be 0 (neg) or 1 (pos); found {bad}")
    return texts, labels.astype(np.int64)


def content_hash(texts: Sequence[bytes], labels: np.ndarray) -> str:
    h = hashlib.sha256()
    for text in texts:
        h.update(len(text).to_bytes(8, "little"))
        h.update(text)
    h.update(np.ascontiguousarray(labels, dtype=np.int64).tobytes())
    return h.hexdigest()


@dataclass
class TextTask(Task):
    """Byte-level IMDb (LRA "Text"): 2 classes, vocabulary 257 (byte + 1, 0 = pad), val = test as in LRA.

    Args:
        name: task name used in records ("text").
        source: "auto" (files when data_dir is set, else hub), "hub", "files" or "synthetic".
        data_dir: a local copy of ``stanfordnlp/imdb`` (``plain_text/*.parquet``) or an ``aclImdb`` folder.
        max_len: bytes kept per review (LRA released config 1000; the paper reports 4000).
        synthetic_sizes: [train, val, test] for source=synthetic.
        max_train_examples: use a seeded random subset of the training split (null = all 25,000).
        max_eval_examples: use a seeded random subset of the test split, which is also the validation split
            (null = all 25,000). For shortened runs only; LRA scores use the full split.
        max_val_examples: evaluate validation on a seeded random subset of that test subset (null = all of it, as
            LRA): a run evaluates validation many times and test once, so a large test set (power) with a small
            validation subset (cost) is the cheap design (profile=quick: the full test split, 2,000 for validation).
        subset_seed: seed of those subsets (independent of the training seed).
    """

    name: str = "text"
    source: str = "auto"
    data_dir: str | None = None
    max_len: Count = 1000
    synthetic_sizes: list[Count] = field(default_factory=lambda: [512, 128, 128])
    max_train_examples: Count | None = None
    max_eval_examples: Count | None = None
    max_val_examples: Count | None = None
    subset_seed: Seed = 0

    vocab_size = byte_tokens.VOCAB_SIZE
    num_classes = 2
    pad_id = byte_tokens.PAD_ID
    sources = ("auto", "hub", "files")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_subset_sizes("task", self.max_train_examples, self.max_eval_examples)
        val, test = self.max_val_examples, self.max_eval_examples
        if val is not None and test is not None and val > test:
            raise ConfigError(f"task.max_val_examples={self.max_val_examples} is larger than task.max_eval_examples="
                              f"{self.max_eval_examples}: the validation subset is drawn from the test subset; lower "
                              "max_val_examples or raise max_eval_examples (null = the whole test split)")
        if self.source == "auto":
            self.source = "files" if self.data_dir is not None else "hub"
        if self.source == "files" and self.data_dir is None:
            raise ConfigError("task.source=files needs task.data_dir=/path/to/imdb (a copy of the Hugging Face "
                              f"dataset {HUB_DATASET}, or the aclImdb folder)")

    def files_hint(self) -> str:
        return (f"download {HUB_DATASET} ({hub_url(HUB_DATASET)}) or aclImdb ({ACLIMDB_URL}) elsewhere and set "
                "task.data_dir=/path/to/that/folder (plain_text/{train,test}-*.parquet, or aclImdb/"
                "{train,test}/{pos,neg}/*.txt)")

    def layout(self) -> tuple[str, Path]:
        """("parquet" | "aclimdb", folder) of ``data_dir``; a DataError when neither layout is there."""
        root = Path(self.data_dir).expanduser()
        if not root.is_dir():
            raise DataError(f"task.data_dir={self.data_dir} does not exist or is not a folder; {self.files_hint()}")
        shards = {s: find_hf_parquet(root, s) for s in SOURCE_SPLITS}
        if all(shards.values()):
            return "parquet", root
        acl = find_aclimdb(root)
        if acl is not None:
            return "aclimdb", acl
        raise DataError(f"task.data_dir={self.data_dir} holds neither the Hugging Face layout "
                        "(plain_text/train-*.parquet and plain_text/test-*.parquet) nor the aclImdb layout "
                        f"(train/pos, train/neg, test/pos, test/neg with *.txt); {self.files_hint()}")

    def check_source(self) -> None:
        if self.source == "files":
            self.layout()

    def load_real(self, cache_dir: Path) -> CachedSplits:
        """Full train/test splits, tokenised once and cached; val = test; then the optional subsets."""
        key: dict[str, Any] = {"task": "text", "max_len": self.max_len, "tokenizer": TOKENIZER_VERSION}
        if self.source == "hub":
            key["hub"] = HUB_DATASET  # cached by name: delete the cache entry to fetch a newer Hub revision
            build = self._build_hub
        else:
            kind, root = self.layout()
            where = {"source": "files", "layout": kind, "data_dir": str(root.resolve())}
            if kind == "parquet":
                shards = {s: find_hf_parquet(root, s) for s in SOURCE_SPLITS}
                key["parquet_sha256"] = {s: {p.name: file_sha256(p) for p in ps} for s, ps in shards.items()}
                fingerprint = stable_hash(key["parquet_sha256"])

                def read() -> dict[str, tuple[list[bytes], np.ndarray]]:
                    return {s: table_texts_labels(read_parquet(ps, ("text", "label")), ", ".join(map(str, ps)))
                            for s, ps in shards.items()}
            else:
                files = {s: aclimdb_files(root, s) for s in SOURCE_SPLITS}
                fingerprint = key["aclimdb_sha256"] = stable_hash(
                    {s: [(str(p.relative_to(root)), file_sha256(p)) for p, _ in fs] for s, fs in files.items()})

                def read() -> dict[str, tuple[list[bytes], np.ndarray]]:
                    return {s: read_aclimdb(root, s) for s in SOURCE_SPLITS}

            def build() -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
                return self._tokenise(read(), {"fingerprint": fingerprint, **where})

        cached = load_or_build(Path(cache_dir), "text/arrow", key, build)
        return self._finish(cached)

    def _build_hub(self) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
        tables = load_hub(HUB_DATASET, SOURCE_SPLITS, ("text", "label"), self.files_hint())
        raw = {s: table_texts_labels(t, f"{HUB_DATASET} ({s})") for s, t in tables.items()}
        fingerprint = stable_hash({s: content_hash(*raw[s]) for s in SOURCE_SPLITS})
        return self._tokenise(raw, {"fingerprint": fingerprint, "source": "hub", "hub_dataset": HUB_DATASET})

    def _tokenise(
        self, raw: dict[str, tuple[list[bytes], np.ndarray]], meta: dict[str, Any]
    ) -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
        splits = {s: (byte_tokens.encode_batch(texts, self.max_len), labels) for s, (texts, labels) in raw.items()}
        lengths = np.concatenate([[len(t) for t in texts] for texts, _ in raw.values()])
        meta["bytes_per_review"] = {"mean": float(lengths.mean()), "max": int(lengths.max()),
                                    "truncated_fraction": float((lengths > self.max_len).mean())}
        return splits, meta

    def _finish(self, cached: CachedSplits) -> CachedSplits:
        """val = test (LRA), then the configured subsets (val: a subset of the test subset when max_val_examples is
        set); the cache keeps the full splits."""
        x_train, y_train = subsample(cached.inputs["train"], cached.labels["train"], self.max_train_examples,
                                     self.subset_seed)
        x_test, y_test = subsample(cached.inputs["test"], cached.labels["test"], self.max_eval_examples,
                                   self.subset_seed + 1)
        x_val, y_val = subsample(x_test, y_test, self.max_val_examples, self.subset_seed + 2)
        subset = {"max_train_examples": self.max_train_examples, "max_eval_examples": self.max_eval_examples,
                  "seed": self.subset_seed}
        if self.max_val_examples is not None:
            subset["max_val_examples"] = self.max_val_examples
        meta = {**cached.meta, "val_is_test": self.max_val_examples is None, "subset": subset}
        return CachedSplits(inputs={"train": x_train, "val": x_val, "test": x_test},
                            labels={"train": y_train, "val": y_val, "test": y_test},
                            meta=meta, path=cached.path, reused=cached.reused)
