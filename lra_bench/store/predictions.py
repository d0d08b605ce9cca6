"""Per-example test predictions in a run record: the predicted class of every test example (base64 of a uint8 or
uint16 array), which of them were right (base64 of packed bits) and the fingerprint of the test set (its inputs
and labels, in order), so two records can be compared example by example -- the paired test of the reports."""

from __future__ import annotations

import base64
import hashlib

import numpy as np

FIELD = "test_predictions"


def test_fingerprint(inputs: np.ndarray, labels: np.ndarray) -> str:
    """sha256 over the test inputs and labels (shapes, dtypes and bytes, in order)."""
    h = hashlib.sha256()
    for a in (np.ascontiguousarray(inputs), np.ascontiguousarray(labels)):
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def encode(predicted: np.ndarray, labels: np.ndarray, fingerprint: str) -> dict:
    """The record's ``test_predictions`` field for ``predicted`` classes against ``labels``."""
    predicted, labels = np.asarray(predicted), np.asarray(labels)
    if predicted.shape != labels.shape or predicted.ndim != 1:
        raise ValueError(f"predictions {predicted.shape} and labels {labels.shape} must be equal 1-D arrays")
    dtype = np.uint8 if predicted.max(initial=0) < 256 else np.uint16
    return {"n": int(len(predicted)), "dtype": np.dtype(dtype).name, "test_fingerprint": fingerprint,
            "predicted": base64.b64encode(predicted.astype(dtype).tobytes()).decode("ascii"),
            "correct": base64.b64encode(np.packbits(predicted == labels).tobytes()).decode("ascii")}


def decode(field: dict) -> tuple[np.ndarray, np.ndarray]:
    """(predicted classes, correct as bool) of a ``test_predictions`` field; ValueError when malformed."""
    try:
        n, dtype = int(field["n"]), np.dtype(field["dtype"])
        predicted = np.frombuffer(base64.b64decode(field["predicted"], validate=True), dtype=dtype)
        bits = np.frombuffer(base64.b64decode(field["correct"], validate=True), dtype=np.uint8)
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"malformed {FIELD}: {e}") from e
    if dtype not in (np.uint8, np.uint16) or len(predicted) != n or len(bits) != (n + 7) // 8:
        raise ValueError(f"malformed {FIELD}: {len(predicted)} predictions, {len(bits)} bytes of bits for n={n}")
    return predicted, np.unpackbits(bits, count=n).astype(bool)
