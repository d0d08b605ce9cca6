"""Handing a preempted sweep job over to its cluster scheduler (submitit under SLURM: ``hydra/launcher=slurm``)."""

from __future__ import annotations

import logging
import signal
import subprocess
from collections.abc import Callable

log = logging.getLogger(__name__)


def hand_over(scheduler: Callable[[int, object], None], signum: int) -> None:
    """Call the scheduler's own handler for ``signum`` (submitit on SIGUSR2: ``scontrol requeue``, then it ends
    this process with ``SystemExit(-1)``, leaving no result file, so the sweep's parent waits for the requeued
    attempt).

    A requeue stops the running attempt: SLURM sends SIGTERM to every process of the job, ``scontrol`` included,
    and under load that can reach ``scontrol`` before it has exited. submitit then raises CalledProcessError
    although the job was requeued, and the job would end as failed (seen in CI). That case is the requeue going
    through, so this attempt ends as submitit ends it after a requeue."""
    try:
        scheduler(signum, None)
    except subprocess.CalledProcessError as e:
        if e.returncode != -signal.SIGTERM or list(e.cmd)[:2] != ["scontrol", "requeue"]:
            raise
        log.warning("scontrol requeue was stopped by the requeue's own SIGTERM: the job is requeued, this "
                    "attempt ends")
        raise SystemExit(-1) from None
