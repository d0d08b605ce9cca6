"""Run one measurement in a fresh process, so that its peak memory and its failure are its own."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from typing import Any

from lra_bench.infra.children import job_preexec


def _limit_address_space(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_isolated(module: str, payload: dict[str, Any], timeout: float,
                 memory_limit_bytes: int | None = None) -> dict[str, Any]:
    """Run ``python -m module`` in a fresh process with ``payload`` as JSON on stdin; parse its JSON stdout.

    Errors come back as ``{"status": "oom" | "failed" | "timeout", "message": ...}`` instead of raising,
    so one bad cell never stops a benchmark. ``memory_limit_bytes`` caps the child's address space
    (Linux RLIMIT_AS): a CPU stand-in for a device with that much memory.
    """
    dies = job_preexec(signal.SIGKILL)  # the cell ends with this process (infra/children.py)

    def prepare() -> None:
        dies()
        if memory_limit_bytes is not None:
            _limit_address_space(memory_limit_bytes)

    try:
        proc = subprocess.run([sys.executable, "-m", module], input=json.dumps(payload), capture_output=True,
                              text=True, timeout=timeout, preexec_fn=prepare)
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "message": f"exceeded {timeout:.0f}s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1])
    return exit_status(proc.returncode, proc.stderr)


def exit_status(code: int, stderr: str) -> dict[str, Any]:
    """A process that ended without its answer: ``oom`` when it was SIGKILLed (the out-of-memory killer) or said
    so, ``failed`` otherwise, with the last line of its stderr."""
    err = stderr.strip().splitlines()[-1:] or [f"exit code {code}"]
    oom = code in (-9, 137) or "out of memory" in stderr.lower() or "MemoryError" in stderr
    return {"status": "oom" if oom else "failed", "message": err[0][-500:]}
