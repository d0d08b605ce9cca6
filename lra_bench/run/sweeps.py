"""The summary at the end of a multirun: one line per job -- status, test accuracy, wall time, where its record is.

Each job's outcome is appended as one JSON line to ``<sweep dir>/jobs.jsonl`` by whichever process runs the job
(the sweep's own process with Hydra's basic launcher, a worker or a cluster job with others), so the summary
does not depend on the launcher. The sweep's process learns its sweep folder from the ``SweepSummary`` Hydra
callback (configs/run.yaml) and prints the summary when the multirun ends -- also when a job failed, which makes
Hydra stop with only the first failure's message -- and writes it to ``<sweep dir>/summary.txt``.

Every job of the sweep is in the summary: ``on_multirun_start`` lists the jobs the sweeper will launch (Hydra's
basic sweeper, the same expansion), and a job with no line in ``jobs.jsonl`` (the sweep stopped before it) is shown
as ``not started``. A job whose configuration is invalid leaves a ``record.json`` with status ``invalid`` in its
job folder (``<sweep dir>/<num>/``: it has no place in the results store).

One sweep folder per sweep: the default folder is named by the second the sweep started, and a second sweep started
in the same second gets ``<folder>-2`` (``claim_sweep_dir``, the ``lra_sweep_dir`` resolver of configs/run.yaml: the
first sweep holds a lock on its folder for its whole life). A folder given on the command line
(``hydra.sweep.dir=...``) that a running sweep holds is refused with one line.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import itertools
import json
import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from lra_bench.store.files import atomic_open, stable_hash, write_json_atomic

JOBS_FILE = "jobs.jsonl"
SUMMARY_FILE = "summary.txt"
LOCK_FILE = ".sweep.lock"
NOT_STARTED = "not started"
INVALID = "invalid configuration"
_state: dict[str, Any] = {"sweep_dir": None, "planned": []}
_held: dict[str, int] = {}  # sweep folders this process holds: folder -> the descriptor of its lock (kept open)


def _lock(folder: Path) -> bool:
    """Hold ``folder``'s sweep lock for the rest of this process's life; False when a live process holds it."""
    if str(folder) in _held:
        return True
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    os.set_inheritable(fd, False)
    _held[str(folder)] = fd
    return True


def claim_sweep_dir(path: str) -> str:
    """The ``lra_sweep_dir`` resolver (cached by OmegaConf, so every job of the sweep gets the same answer):
    ``path`` when no running sweep holds it, else the first free ``path-2``, ``path-3``, ..."""
    base = Path(path)
    for i in itertools.count(1):
        folder = base if i == 1 else base.with_name(f"{base.name}-{i}")
        if _lock(folder):
            return str(folder)
    raise AssertionError("unreachable")


def planned_jobs(config: DictConfig) -> list[list[str]]:
    """The overrides of every job Hydra's basic sweeper launches for ``config``, in job order (empty for another
    sweeper, whose expansion is its own)."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.override_parser.overrides_parser import OverridesParser

    sweeper = config.hydra.sweeper
    if not str(sweeper.get("_target_", "")).endswith("BasicSweeper") or not GlobalHydra.instance().is_initialized():
        return []
    params = [f"{k}={v}" for k, v in (sweeper.get("params") or {}).items()]
    parser = OverridesParser.create(config_loader=GlobalHydra.instance().config_loader())
    overrides = parser.parse_overrides([*params, *config.hydra.overrides.task])
    return [job for batch in BasicSweeper.split_arguments(overrides, None) for job in batch]


class SweepSummary(Callback):
    """Remembers the sweep folder and its jobs in the sweep's own process (``on_multirun_start``); ``print_summary``
    reads them."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        folder = Path(config.hydra.sweep.dir)
        if not _lock(folder):
            print(f"error: another sweep is running in {folder} (it holds {folder / LOCK_FILE}); wait for it to "
                  "end, or give this one its own folder: hydra.sweep.dir=OTHER_FOLDER", file=sys.stderr)
            raise SystemExit(2)
        _state["sweep_dir"] = folder
        try:
            _state["planned"] = planned_jobs(config)
        except Exception:  # noqa: BLE001 - the summary then lists the jobs that ran, as before
            _state["planned"] = []
        jobs = folder / JOBS_FILE
        if jobs.exists():  # the same sweep folder run again (a resumed sweep): this summary is this run's
            jobs.unlink()

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        print_summary()


def note_job(sweep_dir: Path | str, num: int, overrides: list[str], status: str, *, test_acc: float | None = None,
             wall_s: float | None = None, record: Path | str | None = None, message: str = "") -> None:
    """Append one job's outcome to ``sweep_dir/jobs.jsonl`` (one short line, appended in one write)."""
    line = json.dumps({"job": num, "overrides": overrides, "status": status, "test_acc": test_acc,
                       "wall_s": wall_s, "record": None if record is None else str(record),
                       "message": message[:300], "at": dt.datetime.now(dt.UTC).isoformat()}) + "\n"
    path = Path(sweep_dir) / JOBS_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def read_jobs(sweep_dir: Path | str, planned: list[list[str]] | None = None) -> list[dict]:
    """The last line of each job, in job order (unreadable lines skipped); each of the ``planned`` jobs without a
    line is there too, as ``not started``."""
    path = Path(sweep_dir) / JOBS_FILE
    latest: dict[int, dict] = {}
    for text in path.read_text().splitlines() if path.is_file() else []:
        try:
            entry = json.loads(text)
            latest[int(entry["job"])] = entry
        except (ValueError, KeyError, TypeError):
            continue
    for num, overrides in enumerate(planned or []):
        latest.setdefault(num, {"job": num, "overrides": list(overrides), "status": NOT_STARTED, "test_acc": None,
                                "wall_s": None, "record": None, "message": "the sweep stopped before this job"})
    return [latest[k] for k in sorted(latest)]


def invalid_record(folder: Path | str, num: int, overrides: list[str], message: str) -> Path:
    """The record of a job whose configuration is invalid, in its job folder (it cannot be filed in the results
    store: its task, mixer or hash may be what is invalid). Checksummed like every record."""
    record = {"status": "invalid", "job": num, "overrides": list(overrides), "message": message,
              "finished_at": dt.datetime.now(dt.UTC).isoformat()}
    record["checksum"] = stable_hash(record, strict=True)
    path = Path(folder) / "record.json"
    write_json_atomic(path, record)
    return path


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else \
        f"{seconds // 60}:{seconds % 60:02d}"


def summary(jobs: list[dict]) -> str:
    """A plain-text table of the jobs and one line of counts; every job that did not end ok is named with why."""
    if not jobs:
        return "sweep summary: no job finished"
    rows = [("job", "status", "test acc", "wall", "overrides", "record")]
    for j in jobs:
        acc = "-" if j.get("test_acc") is None else f"{100 * j['test_acc']:.2f}"
        rows.append((str(j["job"]), j["status"], acc, _duration(j.get("wall_s")), " ".join(j["overrides"]),
                     j.get("record") or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=False)) + "  " + r[-1] for r in rows]
    counts: dict[str, int] = {}
    for j in jobs:
        kind = j["status"].split(" (")[0]
        counts[kind] = counts.get(kind, 0) + 1
    bad = [j for j in jobs if not j["status"].startswith(("ok", "skipped", NOT_STARTED))]
    waiting = [j for j in jobs if j["status"] == NOT_STARTED]
    out = [f"sweep summary ({len(jobs)} jobs: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")", *lines]
    if bad:
        out.append("not ok:")
        out += [f"  job {j['job']} ({' '.join(j['overrides'])}): {j['status']}: {j['message']}" for j in bad]
    if waiting:
        out.append(f"{len(waiting)} job(s) not started: " + ", ".join(str(j["job"]) for j in waiting))
    if bad or waiting:
        out.append("the same sweep command reruns exactly these (finished jobs are skipped)")
    return "\n".join(out)


def print_summary() -> None:
    """Print the summary of this process's multirun (once) and write it beside the jobs; nothing otherwise."""
    sweep_dir, _state["sweep_dir"] = _state["sweep_dir"], None
    if sweep_dir is None:
        return
    text = summary(read_jobs(sweep_dir, _state["planned"]))
    print(text, file=sys.stderr)
    try:
        with atomic_open(sweep_dir / SUMMARY_FILE) as f:
            f.write(text + "\n")
    except OSError as e:
        print(f"could not write {sweep_dir / SUMMARY_FILE}: {e}", file=sys.stderr)
