"""Time several benchmark cells in turns (A B C A B C ...), one fresh process each, so that a change of the
machine's load hits them alike.

Each cell's process (``bench.cell`` served) measures its peak memory on its first step, alone (the processes start
one after the other), then parks holding only its weights and inputs. The timed steps are then split into
``rounds`` bursts: round r times a burst of every live cell in turn. The first burst starts with the cell's
``warmup`` untimed steps, every later one with at least ``REWARM`` = 2 (``rewarm`` in the result): parking handed
memory back, and the heap takes two steps to regrow to its high-water mark (measured, S4D at 16K, width 256, CPU:
11.0, 3.8, then 3.1 s per step after a trim; one untimed step timed the 3.8). The
result per cell is the median and quartiles over all its bursts' steps, its ``machine`` summary (the cores other
processes used during its timed steps: ``infra.machine``) and the names of the cells it was interleaved with.
An out-of-memory, a failure or a timeout ends that cell alone, with that status.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from lra_bench.bench.isolated import exit_status
from lra_bench.infra.timing import summarize

CELL_MODULE = "lra_bench.bench.cell"
REWARM = 2  # at least this many untimed steps at the start of every burst after the first


@dataclass
class Job:
    """One cell to time: ``payload`` as ``bench.cell`` reads it (warmup and repeats included), a label for logs."""

    label: str
    payload: dict[str, Any]
    timeout_s: float
    result: dict[str, Any] | None = None  # set when the cell ended (ok or not)
    durations: list[float] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)  # from the "ready" line: memory, params, ...
    busy_s: float = 0.0  # seconds this cell's process has worked (the timeout counts these, not parked time)
    proc: subprocess.Popen | None = None
    pending: bytes = b""  # stdout read but not yet parsed
    stderr: Any = None


def rewarm(warmup: int) -> int:
    """Untimed steps before each burst after the first: the cell's own ``warmup``, and never fewer than REWARM."""
    return max(REWARM, warmup)


def bursts(repeats: int, rounds: int) -> list[int]:
    """``repeats`` timed steps split into at most ``rounds`` bursts, as even as possible (larger ones first)."""
    rounds = max(1, min(rounds, repeats))
    return [repeats // rounds + (1 if i < repeats % rounds else 0) for i in range(rounds)]


def _failed(job: Job, how: str, message: str) -> None:
    job.result = {"status": how, "message": message[-500:], **job.fields}
    _stop(job)


def _stop(job: Job) -> None:
    if job.proc is not None:
        if job.proc.poll() is None:
            job.proc.kill()
        job.proc.wait()
        for pipe in (job.proc.stdin, job.proc.stdout):
            with contextlib.suppress(OSError):
                pipe.close()
    if job.stderr is not None:
        job.stderr.close()
        job.stderr = None


def _died(job: Job) -> None:
    """The process ended without its answer: classified as ``run_isolated`` does (``isolated.exit_status``)."""
    code = job.proc.wait()
    job.stderr.seek(0)
    status = exit_status(code, job.stderr.read())
    _failed(job, status["status"], status["message"])


def _ask(job: Job, command: dict[str, Any] | None) -> dict[str, Any] | None:
    """Send ``command`` (None: nothing, wait for the first answer) and read the cell's next JSON line, within what
    is left of its time budget. None when the cell ended (``job.result`` then says how)."""
    assert job.proc is not None and job.proc.stdin is not None and job.proc.stdout is not None
    t0 = time.perf_counter()
    try:
        if command is not None:
            job.proc.stdin.write((json.dumps(command) + "\n").encode())
            job.proc.stdin.flush()
    except BrokenPipeError:
        _died(job)
        return None
    fd = job.proc.stdout.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            if b"\n" in job.pending:
                line, job.pending = job.pending.split(b"\n", 1)
                if line.startswith(b"{"):
                    job.busy_s += time.perf_counter() - t0
                    return json.loads(line)
                continue  # anything else a library printed
            left = job.timeout_s - job.busy_s - (time.perf_counter() - t0)
            if left <= 0 or not sel.select(timeout=left):
                job.busy_s += time.perf_counter() - t0
                _failed(job, "timeout", f"exceeded {job.timeout_s:.0f}s")
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                job.busy_s += time.perf_counter() - t0
                _died(job)
                return None
            job.pending += chunk


def _start(job: Job) -> None:
    job.stderr = tempfile.TemporaryFile("w+")
    job.proc = subprocess.Popen([sys.executable, "-m", CELL_MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=job.stderr)
    job.proc.stdin.write((json.dumps({**job.payload, "serve": True}) + "\n").encode())
    job.proc.stdin.flush()
    answer = _ask(job, None)
    if answer is None:
        return
    if answer["status"] != "ready":
        job.result = answer
        _stop(job)
        return
    job.fields = {k: v for k, v in answer.items() if k != "status"}


def run_interleaved(jobs: list[Job], rounds: int, log: Any = None) -> list[dict[str, Any]]:
    """Time ``jobs`` in turns over ``rounds`` rounds; returns one result per job (in order), as ``bench.cell``'s
    one-shot line plus ``rounds`` and ``interleaved_with``."""
    try:
        for job in jobs:
            _start(job)
        plans = {id(job): bursts(job.payload["repeats"], rounds) for job in jobs}
        for r in range(max(len(p) for p in plans.values())):
            for job in jobs:
                plan = plans[id(job)]
                if job.result is not None or r >= len(plan):
                    continue
                warmup = job.payload["warmup"] if r == 0 else rewarm(job.payload["warmup"])
                answer = _ask(job, {"warmup": warmup, "repeats": plan[r]})
                if answer is None:
                    continue
                if answer["status"] != "timed":
                    job.result = {**job.fields, **answer}
                    _stop(job)
                    continue
                job.durations += answer["durations"]
                if log is not None:
                    log(job, r)
        names = [job.label for job in jobs]
        for job in jobs:
            if job.result is not None:
                continue
            answer = _ask(job, {"finish": True})
            if answer is None:
                continue
            _stop(job)
            job.result = {"status": "ok", **asdict(summarize(job.durations, job.payload["warmup"])),
                          "durations": job.durations, **job.fields, "machine": answer["machine"],
                          "rounds": len(plans[id(job)]), "rewarm": rewarm(job.payload["warmup"]),
                          "interleaved_with": [n for n in names if n != job.label]}
    finally:
        for job in jobs:
            _stop(job)
    return [job.result for job in jobs]
