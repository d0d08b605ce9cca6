"""ListOps files and tokenisation, exactly as LRA (``lra_benchmarks/listops/input_pipeline.py``).

Files: ``basic_{train,val,test}.tsv``, tab-separated, header ``Source<TAB>Target``.
Tokenisation: ``]`` -> ``X``, parentheses dropped, whitespace split, pad id 0, truncate to max_len.
LRA's vocabulary is the 15 symbols ``[MIN [MAX [MED [SM X 0..9`` (ids assigned from a set there;
here in a fixed order), plus pad (0) and an out-of-vocabulary id as TokenTextEncoder has.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from lra_bench.errors import DataError
from lra_bench.store.files import atomic_open

SPLITS = ("train", "val", "test")
HEADER = ("Source", "Target")
PAD_ID = 0
SYMBOLS = ("[MIN", "[MAX", "[MED", "[SM", "X", *(str(d) for d in range(10)))
VOCAB = {tok: i + 1 for i, tok in enumerate(SYMBOLS)}  # 1..15; 0 = pad
UNK_ID = len(SYMBOLS) + 1  # 16
VOCAB_SIZE = UNK_ID + 1  # 17
NUM_CLASSES = 10


def split_path(data_dir: Path, split: str) -> Path:
    return Path(data_dir) / f"basic_{split}.tsv"


def write_tsv(rows: list[tuple[str, int]], path: Path) -> None:
    """Write rows in the release's format, atomically (temp file in the same folder, then rename)."""
    with atomic_open(path, newline="") as f:
        writer = csv.writer(f, delimiter="\t", lineterminator="\n")
        writer.writerow(HEADER)
        writer.writerows(rows)


def read_tsv(path: Path) -> list[tuple[str, int]]:
    """Read an official ListOps TSV; a malformed row raises a DataError naming the file and line."""
    path = Path(path)
    try:
        f = path.open(newline="", encoding="utf-8")
    except OSError as e:
        raise DataError(f"cannot read ListOps file {path}: {e.strerror}") from e
    rows: list[tuple[str, int]] = []
    with f:
        try:
            header = f.readline().rstrip("\r\n").split("\t")
            if tuple(header) != HEADER:
                raise DataError(f"{path}:1: expected the header 'Source<TAB>Target', got {header!r}")
            src_col = header.index("Source")
            for lineno, line in enumerate(f, start=2):
                line = line.rstrip("\r\n")
                if not line:
                    continue
                fields = line.split("\t")
                if len(fields) != 2:
                    raise DataError(f"{path}:{lineno}: expected 2 tab-separated fields, got {len(fields)}")
                source, target = fields[src_col], fields[1 - src_col]
                if not target.strip().isdigit() or not 0 <= int(target) < NUM_CLASSES:
                    raise DataError(f"{path}:{lineno}: Target must be an integer 0-9, got {target!r}")
                if not source.strip():
                    raise DataError(f"{path}:{lineno}: empty Source expression")
                rows.append((source, int(target)))
        except UnicodeDecodeError as e:
            raise DataError(f"{path}: not valid UTF-8 ({e.reason} at byte {e.start})") from e
    if not rows:
        raise DataError(f"{path}: no data rows (is the file truncated?)")
    return rows


def tokenize(source: str) -> list[str]:
    """LRA's rename_close_brackets + WhitespaceTokenizer."""
    return source.replace("]", "X").replace("(", "").replace(")", "").split()


def encode(source: str, max_len: int) -> np.ndarray:
    """Token ids (uint8) of one expression, truncated to max_len (padding happens at batch time)."""
    ids = [VOCAB.get(tok, UNK_ID) for tok in tokenize(source)][:max_len]
    return np.asarray(ids, dtype=np.uint8)
