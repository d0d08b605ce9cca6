"""A small AAN-format fixture with a learnable signal, for tests and CPU runs of the retrieval task.

Writes ``new_aan_pairs.{train,eval,test}.tsv`` exactly as in the LRA release (no header; tab-separated
``label, id1, id2, text1, text2``; label "1.0"/"0.0"). Each document is filler prose about one of ``topics``
topics, with that topic's marker word (an upper-case word used by no other topic) repeated through the
text; a pair is labelled 1 iff both documents share the topic. Half the pairs are positive. Texts include
multi-byte UTF-8 characters, and no tab or newline.

Run:  python -m lra_bench.data.retrieval.fixture OUT_DIR [--train 8000 --eval 1000 --test 1000 --seed 0]
then: python run.py task=retrieval task.data_dir=OUT_DIR ...
This is not AAN: its records are real-format runs on fake data and never an LRA score.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

FILES = {"train": "new_aan_pairs.train.tsv", "eval": "new_aan_pairs.eval.tsv", "test": "new_aan_pairs.test.tsv"}
FILLER = ("the we model results paper method data show that of in approach propose using task corpus parsing "
          "translation naïve evaluation — features learning sentence words grammar baseline résumé score系统 "
          "accuracy training annotated speech dialogue semantic lexical").split()
MARKERS = ("ZQUAX", "VORKJ", "BLIMX", "KWYTH", "FJORD", "GYPSQ", "HUXLEY", "PQRWZ", "JYNXT", "WOMBZ", "XYLYK",
           "QOPHY")


def document(rng: np.random.Generator, topic: int, doc_bytes: int) -> str:
    """About ``doc_bytes`` bytes of filler with the topic marker every 4-8 words (first within 6 words)."""
    words, size, gap = [], 0, int(rng.integers(1, 6))
    while size < doc_bytes:
        if gap == 0:
            word, gap = MARKERS[topic], int(rng.integers(4, 9))
        else:
            word, gap = FILLER[int(rng.integers(len(FILLER)))], gap - 1
        words.append(word)
        size += len(word.encode()) + 1
    return " ".join(words)


def rows(n: int, rng: np.random.Generator, topics: int, doc_bytes: int, prefix: str) -> list[str]:
    out = []
    for i in range(n):
        label = i % 2  # exactly balanced (rows are shuffled below)
        t1 = int(rng.integers(topics))
        t2 = t1 if label else int((t1 + rng.integers(1, topics)) % topics)
        text1, text2 = document(rng, t1, doc_bytes), document(rng, t2, doc_bytes)
        out.append(f"{float(label)}\t{prefix}-{2 * i:05d}\t{prefix}-{2 * i + 1:05d}\t{text1}\t{text2}")
    return [out[j] for j in rng.permutation(n)]


def write_fixture(out_dir: Path | str, sizes: tuple[int, int, int] = (8000, 1000, 1000), seed: int = 0,
                  topics: int = 4, doc_bytes: int = 600) -> Path:
    """Write the three TSVs (``sizes`` = train, eval, test pairs) into ``out_dir`` (created) and return it."""
    if not 2 <= topics <= len(MARKERS):
        raise ValueError(f"topics must be in [2, {len(MARKERS)}], got {topics}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for split, n in zip(FILES, sizes, strict=True):
        lines = rows(n, rng, topics, doc_bytes, prefix=f"F{seed:02d}{split[:2].upper()}")
        (out / FILES[split]).write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--train", type=int, default=8000)
    parser.add_argument("--eval", type=int, default=1000)
    parser.add_argument("--test", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--topics", type=int, default=4)
    parser.add_argument("--doc-bytes", type=int, default=600)
    a = parser.parse_args(argv)
    out = write_fixture(a.out_dir, (a.train, a.eval, a.test), a.seed, a.topics, a.doc_bytes)
    print(f"wrote {', '.join(FILES.values())} to {out}")


if __name__ == "__main__":
    main()
