"""Run records: one JSON file per run, written atomically into the results store.

Layout: ``<results_dir>/<task>/<attention>/<profile>-seed<seed>-<hash10>/record.json``. A record is
written to a temporary file in the same folder, flushed to disk, then renamed over the target, so
a reader sees either the previous complete record or the new complete one, never a partial file.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import subprocess
from pathlib import Path
from typing import Any

from lra_bench.store.files import inside, stable_hash, write_json_atomic

log = logging.getLogger(__name__)
RECORD_NAME = "record.json"
STATUSES = ("ok", "oom", "diverged", "failed", "killed")  # killed: SIGKILLed (often the out-of-memory killer)
ATTEMPTS = "attempts"  # a non-ok attempt that would replace an ok record goes here instead
REQUIRED_FIELDS = (
    "run_id", "attention", "task", "profile", "seed", "config", "config_hash", "status", "message",
    "best_val_acc", "best_step", "test_acc", "throughput", "memory", "params", "device",
    "torch_version", "git_commit", "dataset_fingerprint", "wall_time_s",
)


#: config sections that change where or how a run is reported, not what it computes (left out of the hash)
NON_SEMANTIC_KEYS = ("paths", "logger", "hydra", "rerun", "resume", "guard")


#: settings added after runs were recorded, each with the value that means "as before": a config holding exactly
#: that value hashes as if the key were absent, so adding a knob leaves every earlier run's identity (its folder, its
#: place in a report, a resumed sweep's skip) as it was. A new knob whose default changes nothing belongs here.
NEUTRAL_DEFAULTS: dict[tuple[str, str], Any] = {
    ("trainer", "schedule_steps"): None,  # issue 39: the schedule's own length (None: max_steps)
    ("attention", "n_ssm"): None,  # issue 39: s4d's shared (A, B) sets (None: one per channel)
    ("trainer", "activation_checkpointing"): False,  # issue 45: blocks recomputed in backward (bit-identical)
    ("attention", "ssm_includes_b"): False,  # issue 39: lru's B at the recurrence's rate, no decay (profile=lru)
    ("task", "max_val_examples"): None,  # issue 46: text's validation subset of its test reviews (None: all of them)
}
#: whole sections added after runs were recorded, with the value that says "this phase is absent": a config holding
#: exactly that value hashes as if the section were absent (issue 44: ``pretrain=none``, every run trained from
#: scratch before the section existed, keeps its identity and a resumed sweep still finds it)
ABSENT_SECTIONS: dict[str, Any] = {"pretrain": {"name": "none"}}
#: the training protocols a record can carry (``protocol_of``): from scratch, or self-pretrained first (issue 44)
PROTOCOLS = ("scratch", "mlm", "causal")


def semantic_hash(config: dict[str, Any]) -> str:
    """A run's identity: sha256 of its resolved config without ``NON_SEMANTIC_KEYS``, without the keys of
    ``NEUTRAL_DEFAULTS`` holding their neutral value and without the ``ABSENT_SECTIONS`` at their absent value: same
    hash = same experiment."""
    kept = {k: v for k, v in config.items() if k not in NON_SEMANTIC_KEYS and ABSENT_SECTIONS.get(k, object()) != v}
    for (section, key), neutral in NEUTRAL_DEFAULTS.items():
        values = kept.get(section)
        if isinstance(values, dict) and key in values and values[key] == neutral:
            kept[section] = {k: v for k, v in values.items() if k != key}
    return stable_hash(kept)


def protocol_of(config: dict[str, Any] | None) -> str:
    """The training protocol of a run's resolved config: "scratch" (no ``pretrain`` section, as every record before
    issue 44, or ``pretrain=none``), else the pretraining objective ("mlm", "causal")."""
    section = (config or {}).get("pretrain")
    name = section.get("name", "none") if isinstance(section, dict) else "none"
    return "scratch" if name == "none" else str(name)


def resumed(record: dict[str, Any]) -> bool:
    """Whether a run's training or its pretraining resumed from a checkpoint (its ``wall_time_s`` then counts only
    the last process)."""
    pre = record.get("pretraining") or {}
    return bool(record.get("restarts") or pre.get("restarts"))


def run_wall_seconds(record: dict[str, Any]) -> float | None:
    """The wall seconds a run cost, whether or not it was interrupted; None when the record cannot say.

    A run that never resumed: its ``wall_time_s`` (start of ``run()`` to the record written). A resumed run's
    ``wall_time_s`` counts only its last process, while the training and pretraining loops' seconds carry over every
    process (they are checkpointed), so it costs at least its phases summed: data, pretraining (unless another run's
    cached encoder was reused), the training loop with its evaluations, the test evaluation. That sum is returned (or
    ``wall_time_s`` if larger): short of the earlier processes' start-up, their data loading (``data_s`` is the last
    process's, usually a cache hit, so a first process's dataset build is not in it) and the steps they redid after
    their last checkpoint. A resumed record without phases (written before they existed): None.
    """
    wall = record.get("wall_time_s")
    if wall is None or not resumed(record):
        return None if wall is None else float(wall)
    ph = record.get("phases")
    if not isinstance(ph, dict) or ph.get("train_loop_s") is None:
        return None
    pretrain = 0.0 if ph.get("pretrain_reused") else float(ph.get("pretrain_s") or 0.0)
    summed = float(ph.get("data_s") or 0.0) + pretrain + float(ph["train_loop_s"]) + float(ph.get("test_eval_s") or 0.0)
    return max(float(wall), summed)


def run_dir(results_dir: Path, task: str, attention: str, profile: str, seed: int, config_hash: str) -> Path:
    """A run's folder; every name is checked to stay inside ``results_dir`` (``files.inside``)."""
    return inside(Path(results_dir), task, attention, f"{profile}-seed{seed}-{str(config_hash)[:10]}")


def checksum(record: dict[str, Any]) -> str:
    """sha256 of the record's canonical JSON without its own ``checksum`` field."""
    return stable_hash({k: v for k, v in record.items() if k != "checksum"}, strict=True)


def verify(record: dict[str, Any]) -> bool:
    return record.get("checksum") == checksum(record)


def write_record(record: dict[str, Any], results_dir: Path) -> Path:
    missing = [k for k in REQUIRED_FIELDS if k not in record]
    if missing:
        raise ValueError(f"record lacks fields {missing}")
    if record["status"] not in STATUSES:
        raise ValueError(f"record status must be one of {STATUSES}, got {record['status']!r}")
    target = run_dir(results_dir, record["task"], record["attention"], record["profile"], record["seed"],
                     record["config_hash"]) / RECORD_NAME
    record["checksum"] = checksum(json.loads(json.dumps(record)))  # checksum of exactly what is stored
    if record["status"] != "ok" and target.exists() and (kept := read_record(target)) and kept["status"] == "ok":
        stamp = str(record.get("finished_at") or "unknown").replace(":", "")
        attempt = target.parent / ATTEMPTS / f"{record['status']}-{stamp}.json"
        log.warning("keeping the ok record %s: this attempt ended %s and is stored as %s instead",
                    target, record["status"], attempt)
        target = attempt
    write_json_atomic(target, record)
    return target


def load_verified(path: Path) -> dict[str, Any]:
    """The one rule for every stored result (run records and benchmark cells): a JSON object whose ``checksum``
    matches its content. Raises ValueError (or OSError) saying why not; a missing checksum is no exception."""
    record = json.loads(Path(path).read_text())
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    if "checksum" not in record:
        raise ValueError("no checksum (written by hand or edited: every result lra-bench writes carries one)")
    if not verify(record):
        raise ValueError("checksum mismatch (truncated, corrupt or edited by hand)")
    return record


def folder_mismatch(record: dict[str, Any], path: Path) -> str | None:
    """Why ``record`` does not belong in the folder of ``path`` (``run_dir``'s last three parts: task, attention,
    ``<profile>-seed<seed>-<hash10>``), or None when it does. Identity fields only: other fields may come and go."""
    try:
        expected = run_dir(Path("/"), record["task"], record["attention"], record["profile"], record["seed"],
                           record["config_hash"])
    except (KeyError, TypeError, ValueError) as e:
        return f"its identity fields are unusable ({e})"
    actual = Path(path).parent.parts[-3:]
    if expected.parts[-3:] != actual:
        return (f"it is the record of {'/'.join(expected.parts[-3:])} (task/attention/profile-seed-hash), "
                f"stored in {Path(path).parent}")
    return None


def read_record(path: Path) -> dict[str, Any] | None:
    """A stored record, or None (with a warning) when it is unreadable, fails ``load_verified`` or, for a
    ``record.json``, does not match its folder (``folder_mismatch``: copied or moved by hand)."""
    try:
        record = load_verified(path)
    except (OSError, ValueError) as e:
        log.warning("skipping record %s: %s", path, e)
        return None
    if Path(path).name == RECORD_NAME and (why := folder_mismatch(record, path)) is not None:
        log.warning("skipping record %s: it does not match its folder: %s", path, why)
        return None
    return record


def read_tree(root: Path, pattern: str = RECORD_NAME) -> tuple[list[tuple[Path, dict[str, Any]]], list[Path]]:
    """Every verified result under ``root`` matching ``pattern`` as (path, record) pairs, and the skipped paths.
    Temporary ``.*.tmp`` files and anything under a run's ``attempts/`` never match. The reader of the runner
    (one path: ``read_record``) and of every report (``reports.store``)."""
    found, skipped = [], []
    for path in sorted(Path(root).rglob(pattern)):
        if path.name.startswith(".") or ATTEMPTS in path.relative_to(root).parts[:-1]:
            continue
        record = read_record(path)
        if record is None:
            skipped.append(path)
        else:
            found.append((path, record))
    return found, skipped


def read_records(results_dir: Path) -> list[dict[str, Any]]:
    """Every valid run record under ``results_dir`` (``read_tree``); corrupt ones are skipped with a warning."""
    return [record for _, record in read_tree(results_dir)[0]]


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """The version of the code that computes a result: sha256 (16 hex digits) of every source file of this
    ``lra_bench`` package (path and bytes). Unlike ``git_commit`` it changes with uncommitted edits and stays the
    same across commits that touch only docs, tests or configs (configs are in the config hash)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def git_commit() -> str | None:
    """The commit of the checkout this package runs from, with '-dirty' when it has local changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return sha + ("-dirty" if dirty else "")
