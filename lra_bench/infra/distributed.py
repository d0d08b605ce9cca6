"""Data parallelism for one run over several processes (``torchrun --nproc_per_node=K run.py ...``).

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; each process takes its slice of every global batch
(``trainer.batch_size`` stays the global batch), DDP averages the gradients, every rank evaluates the full splits,
and only rank 0 logs progress (the others log warnings and errors only) and writes the record. Backend: NCCL on
CUDA, gloo on CPU. The ranks agree, once per step, on whether to stop (a stop signal that reached any of them) and
whether the loss diverged on any of them (``any_rank``): all stop at the same step boundary, so none is left
waiting in a collective the others never join. A collective that still waits longer than ``LRA_DIST_TIMEOUT_S``
seconds (default 1800, as PyTorch's) raises instead of hanging the job.
"""

from __future__ import annotations

import contextlib
import datetime
import faulthandler
import logging
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist

from lra_bench.errors import ConfigError

TIMEOUT_ENV = "LRA_DIST_TIMEOUT_S"
TEARDOWN_S = 60.0  # leaving the group, after the run's last collective: a rank past this ends without it


@dataclass
class DistInfo:
    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def from_env() -> DistInfo:
    world = int(os.environ.get("WORLD_SIZE", "1"))
    return DistInfo(rank=int(os.environ.get("RANK", "0")), world=world,
                    local_rank=int(os.environ.get("LOCAL_RANK", "0")))


def setup(info: DistInfo, device: torch.device, batch_size: int) -> torch.device:
    """Join the process group; on CUDA, each rank uses GPU ``local_rank``. Returns this rank's device."""
    if not info.enabled:
        return device
    if batch_size % info.world:
        raise ConfigError(f"trainer.batch_size={batch_size} (the global batch) must be divisible by the "
                          f"{info.world} processes of torchrun")
    if device.type == "cuda":
        device = torch.device("cuda", info.local_rank)
        torch.cuda.set_device(device)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", timeout=collective_timeout())
    quiet_other_ranks(info)
    return device


def quiet_other_ranks(info: DistInfo) -> None:
    """Only rank 0 logs progress: the other ranks' ``lra_bench`` loggers keep warnings and errors (a signal, a
    divergence, a failure on that rank) and drop the step lines every rank would otherwise print."""
    if not info.is_main:
        logging.getLogger("lra_bench").setLevel(logging.WARNING)


def collective_timeout() -> datetime.timedelta:
    """How long one collective may wait for the other ranks: ``LRA_DIST_TIMEOUT_S`` seconds (default 1800)."""
    raw = os.environ.get(TIMEOUT_ENV, "1800")
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not seconds > 0:
        raise ConfigError(f"{TIMEOUT_ENV}={raw!r}: give the seconds a collective may wait, a number > 0 (e.g. 1800)")
    return datetime.timedelta(seconds=seconds)


def _max(value: float) -> float:
    """The largest ``value`` over the ranks (every rank must call it at the same point)."""
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else None
    t = torch.tensor([value], dtype=torch.float64, device=device)  # NCCL reduces CUDA tensors only
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def any_rank(flag: bool) -> bool:
    """True when ``flag`` is true on any rank (every rank must call it at the same point); ``flag`` alone outside
    torchrun."""
    if not (dist.is_available() and dist.is_initialized()):
        return flag
    return _max(1.0 if flag else 0.0) > 0


def max_over_ranks(value: float | None, info: DistInfo) -> float | None:
    if not info.enabled or value is None:
        return value
    return _max(float(value))


def teardown(info: DistInfo, exit_code: int) -> None:
    """Leave the process group together: a barrier (bounded by the collective timeout, ``LRA_DIST_TIMEOUT_S``: a
    rank that comes first waits there while rank 0 writes the record or a checkpoint), then
    ``destroy_process_group``. That last call has no timeout and once, in CI, never returned on one rank after the
    record was written (gloo's teardown; pytorch/pytorch#75097): past ``TEARDOWN_S`` seconds in it, this process
    writes every thread's stack to stderr and ends with ``exit_code``, the code it would have ended with -- by then
    every rank has passed the barrier, so the record or the checkpoint is written. A barrier that fails (a peer
    gone) is logged; the group is still destroyed and the run's outcome stands."""
    if not (info.enabled and dist.is_initialized()):
        return
    log = logging.getLogger(__name__)
    try:
        dist.barrier()
    except RuntimeError as e:  # DistBackendError, a timeout: a peer that ended first
        log.warning("rank %d: the last barrier failed (%s); the run's outcome stands", info.rank, first_line(e))
    with exit_if_stuck(TEARDOWN_S, exit_code, f"rank {info.rank}: leaving the process group"):
        try:
            dist.destroy_process_group()
        except RuntimeError as e:
            log.warning("rank %d: leaving the process group failed (%s); the run's outcome stands", info.rank,
                        first_line(e))


def first_line(error: BaseException) -> str:
    return str(error).splitlines()[0] if str(error).strip() else type(error).__name__


@contextlib.contextmanager
def exit_if_stuck(seconds: float, exit_code: int, what: str, backstop_s: float = 60.0) -> Iterator[None]:
    """End the process with ``exit_code`` when the block has not finished in ``seconds``: a watchdog thread logs
    the hang and every thread's stack, then ``os._exit`` (no cleanup that could hang again). When a stuck call
    holds the GIL, so that no Python thread runs, faulthandler's own thread (C, no GIL) dumps the stacks and exits
    with code 1 ``backstop_s`` seconds later (faulthandler has one such timer per process: this one replaces and
    then cancels any other, e.g. pytest's ``faulthandler_timeout``). Stacks go to the process's real stderr
    (``sys.__stderr__``); without one (no file descriptor) there is no backstop and no stack, only the exit."""
    done = threading.Event()
    stderr = _stderr_file()

    def watch() -> None:
        if done.wait(seconds):
            return
        try:
            logging.getLogger(__name__).warning("%s did not finish in %.0f s: ending this process with code %d (its "
                                                "stacks follow)", what, seconds, exit_code)
            if stderr is not None:
                faulthandler.dump_traceback(file=stderr, all_threads=True)
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(exit_code)

    threading.Thread(target=watch, name="teardown-watchdog", daemon=True).start()
    if stderr is not None:
        faulthandler.dump_traceback_later(seconds + backstop_s, exit=True, file=stderr)
    try:
        yield
    finally:
        if stderr is not None:
            faulthandler.cancel_dump_traceback_later()
        done.set()


def _stderr_file():
    """The process's own stderr when it has a file descriptor (faulthandler writes there), else None."""
    try:
        sys.__stderr__.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return sys.__stderr__
