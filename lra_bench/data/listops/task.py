"""The ListOps task: generated locally (default) or read from the LRA release, tokenised and cached."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lra_bench.checks import Count, to_dataclass
from lra_bench.data.cache import CachedSplits, files_verified, load_or_build, record_files
from lra_bench.data.listops import files as listops
from lra_bench.data.listops.generate import ListOpsSpec, effective_workers, generate
from lra_bench.data.task import Task
from lra_bench.errors import ConfigError, DataError
from lra_bench.store.files import file_sha256, stable_hash

log = logging.getLogger(__name__)

RELEASE_URL = "https://storage.googleapis.com/long-range-arena/lra_release.gz"
TOKENIZER_VERSION = 1  # bump when tokenisation changes, so old caches are not reused


@dataclass
class ListOpsTask(Task):
    """ListOps (Nangia & Bowman 2018) as in LRA: 10 classes, sequences up to ``max_len`` tokens.

    Args:
        name: task name used in records ("listops").
        source: "auto" (release files when data_dir is set, else generate), "generate", "files" or "synthetic".
        data_dir: folder with the release's ``basic_{train,val,test}.tsv`` (``lra_release/listops-1000``).
        max_len: truncation / padding length (LRA: 2000).
        synthetic_sizes: [train, val, test] for source=synthetic.
        generator: flags of the official generator (see ``ListOpsSpec``), used when generating.
    """

    name: str = "listops"
    source: str = "auto"
    data_dir: str | None = None
    max_len: Count = 2000
    synthetic_sizes: list[Count] = field(default_factory=lambda: [2048, 256, 256])
    generator: dict[str, Any] = field(default_factory=dict)

    vocab_size = listops.VOCAB_SIZE
    num_classes = listops.NUM_CLASSES
    pad_id = listops.PAD_ID
    sources = ("auto", "generate", "files")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.source == "auto":
            self.source = "files" if self.data_dir is not None else "generate"
        if self.source == "files" and self.data_dir is None:
            raise ConfigError("task.source=files needs task.data_dir=/path/to/lra_release/listops-1000")
        self.spec = to_dataclass(ListOpsSpec, self.generator, "task.generator")
        s = self.spec  # each flag's type and range are checked by to_dataclass (ListOpsSpec's annotations)
        if s.min_length >= s.max_length - 1:
            raise ConfigError(
                f"task.generator.min_length={s.min_length} must be < max_length - 1={s.max_length - 1}"
            )

    def check_source(self) -> None:
        """Fail early (before any training) when ``data_dir`` is set but unusable."""
        if self.source != "files":
            return
        root = Path(self.data_dir).expanduser()
        hint = (
            f"point task.data_dir at the folder lra_release/listops-1000 of the LRA release ({RELEASE_URL}), "
            "or leave task.data_dir unset to generate ListOps locally"
        )
        if not root.is_dir():
            raise DataError(f"task.data_dir={self.data_dir} does not exist or is not a folder; {hint}")
        missing = [p.name for p in (listops.split_path(root, s) for s in listops.SPLITS) if not p.is_file()]
        if missing:
            raise DataError(f"task.data_dir={self.data_dir} lacks {', '.join(missing)}; {hint}")

    def tsv_dir(self, cache_dir: Path) -> Path:
        """Where the TSVs are read from: the user's folder, or the generated copy in the cache."""
        if self.source == "files":
            return Path(self.data_dir).expanduser()
        # keyed by what determines the rows (flags + generator version), not by the worker count
        root = Path(cache_dir) / "listops" / "generated" / stable_hash(self.spec.data_key())[:16]
        names = [listops.split_path(root, s).name for s in listops.SPLITS]
        if not files_verified(root, names):
            log.info("generating ListOps %s with %d processes into %s", self.spec,
                     effective_workers(self.spec), root)
            rows = generate(self.spec)
            for split in listops.SPLITS:
                listops.write_tsv(rows[split], listops.split_path(root, split))
            record_files(root, names)  # last: marks the folder complete
        return root

    def load_real(self, cache_dir: Path) -> CachedSplits:
        """Tokenised splits, built once from the TSVs and cached as Arrow."""
        root = self.tsv_dir(cache_dir)
        shas = {s: file_sha256(listops.split_path(root, s)) for s in listops.SPLITS}
        key = {"task": "listops", "tsv_sha256": shas, "max_len": self.max_len, "tokenizer": TOKENIZER_VERSION}

        def build() -> tuple[dict[str, tuple[np.ndarray, np.ndarray]], dict[str, Any]]:
            splits = {}
            for split in listops.SPLITS:
                rows = listops.read_tsv(listops.split_path(root, split))
                ids = np.zeros((len(rows), self.max_len), dtype=np.uint8)  # 0 = pad
                for i, (source, _) in enumerate(rows):
                    encoded = listops.encode(source, self.max_len)
                    ids[i, : len(encoded)] = encoded
                splits[split] = (ids, np.asarray([t for _, t in rows], dtype=np.int64))
            meta = {"fingerprint": stable_hash(shas), "source": self.source, "tsv_dir": str(root),
                    "generator": self.spec.data_key() if self.source == "generate" else None}
            return splits, meta

        return load_or_build(Path(cache_dir), "listops/arrow", key, build)
