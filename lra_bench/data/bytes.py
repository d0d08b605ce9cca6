"""Byte-level tokenisation of LRA's Text and Retrieval tasks (``tfds.deprecated.text.ByteTextEncoder``).

ByteTextEncoder with no additional tokens maps each byte b of the UTF-8 encoding to the id b + 1 and keeps
0 for padding, so the vocabulary has 257 ids. LRA then truncates to ``max_length`` and pads with 0
(``padded_batch``). Nothing is lower-cased, normalised or decoded: a multi-byte character is several ids.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

PAD_ID = 0
VOCAB_SIZE = 256 + 1  # 256 byte values shifted by one, plus the pad id 0


def to_bytes(text: str | bytes) -> bytes:
    """The UTF-8 bytes of ``text`` (bytes pass through unchanged, as ``tf.compat.as_bytes`` does)."""
    return text if isinstance(text, bytes) else text.encode("utf-8")


def encode(text: str | bytes, max_len: int | None = None) -> np.ndarray:
    """Ids (uint16, byte + 1) of the first ``max_len`` bytes of ``text``; no padding."""
    raw = to_bytes(text)[:max_len]
    return np.frombuffer(raw, dtype=np.uint8).astype(np.uint16) + 1


def encode_into(out: np.ndarray, row: int | tuple[int, ...], text: str | bytes) -> int:
    """Write the ids of ``text`` into ``out[row]`` (already zero = padded), truncated to its width.

    Returns the number of ids written.
    """
    width = out.shape[-1]
    ids = np.frombuffer(to_bytes(text)[:width], dtype=np.uint8)
    out[row][: len(ids)] = ids
    out[row][: len(ids)] += 1
    return len(ids)


def encode_batch(texts: Iterable[str | bytes], max_len: int) -> np.ndarray:
    """(n, max_len) uint16 ids: each text encoded, truncated to ``max_len`` and padded with 0."""
    texts = list(texts)
    out = np.zeros((len(texts), max_len), dtype=np.uint16)
    for i, text in enumerate(texts):
        encode_into(out, i, text)
    return out


def decode(ids: Iterable[int]) -> bytes:
    """The bytes behind ``ids`` (pads dropped); for inspection and tests."""
    return bytes(int(i) - 1 for i in ids if int(i) != PAD_ID)
