"""The summary at the end of a multirun: one line per job -- status, test accuracy, wall time, where its record is.

Each job's outcome is appended as one JSON line to ``<sweep dir>/jobs.jsonl`` by whichever process runs the job
(the sweep's own process with Hydra's basic launcher, a worker or a cluster job with others), so the summary
does not depend on the launcher. The sweep's process learns its sweep folder from the ``SweepSummary`` Hydra
callback (configs/run.yaml) and prints the summary when the multirun ends -- also when a job failed, which makes
Hydra stop with only the first failure's message -- and writes it to ``<sweep dir>/summary.txt``.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

from lra_bench.store.files import atomic_open

JOBS_FILE = "jobs.jsonl"
SUMMARY_FILE = "summary.txt"
_state: dict[str, Path | None] = {"sweep_dir": None}


class SweepSummary(Callback):
    """Remembers the sweep folder in the sweep's own process (``on_multirun_start``); ``print_summary`` reads it."""

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        _state["sweep_dir"] = Path(config.hydra.sweep.dir)
        jobs = _state["sweep_dir"] / JOBS_FILE
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


def read_jobs(sweep_dir: Path | str) -> list[dict]:
    """The last line of each job, in job order (unreadable lines skipped)."""
    path = Path(sweep_dir) / JOBS_FILE
    if not path.is_file():
        return []
    latest: dict[int, dict] = {}
    for text in path.read_text().splitlines():
        try:
            entry = json.loads(text)
            latest[int(entry["job"])] = entry
        except (ValueError, KeyError, TypeError):
            continue
    return [latest[k] for k in sorted(latest)]


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
    bad = [j for j in jobs if not j["status"].startswith(("ok", "skipped"))]
    out = [f"sweep summary ({len(jobs)} jobs: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + ")", *lines]
    if bad:
        out.append("not ok:")
        out += [f"  job {j['job']} ({' '.join(j['overrides'])}): {j['status']}: {j['message']}" for j in bad]
        out.append("the same sweep command reruns exactly these (finished jobs are skipped)")
    return "\n".join(out)


def print_summary() -> None:
    """Print the summary of this process's multirun (once) and write it beside the jobs; nothing otherwise."""
    sweep_dir, _state["sweep_dir"] = _state["sweep_dir"], None
    if sweep_dir is None:
        return
    text = summary(read_jobs(sweep_dir))
    print(text, file=sys.stderr)
    try:
        with atomic_open(sweep_dir / SUMMARY_FILE) as f:
            f.write(text + "\n")
    except OSError as e:
        print(f"could not write {sweep_dir / SUMMARY_FILE}: {e}", file=sys.stderr)
