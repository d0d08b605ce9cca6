"""Data parallelism for one run over several processes (``torchrun --nproc_per_node=K run.py ...``).

torchrun sets RANK / WORLD_SIZE / LOCAL_RANK; each process takes its slice of every global batch
(``trainer.batch_size`` stays the global batch), DDP averages the gradients, every rank evaluates the
full splits, and only rank 0 logs and writes the record. Backend: NCCL on CUDA, gloo on CPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from lra_bench.errors import ConfigError


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
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return device


def max_over_ranks(value: float | None, info: DistInfo) -> float | None:
    if not info.enabled or value is None:
        return value
    t = torch.tensor([float(value)], dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def teardown(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
