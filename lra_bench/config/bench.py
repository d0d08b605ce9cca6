"""The benchmark's plan: a benchmark config (configs/benchmark.yaml) validated once and handed to ``lra_bench.bench``
as a typed ``BenchPlan``; the cells rebuild their model from its plain config through ``build_task``/``build_model``."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig

from lra_bench.checks import positive
from lra_bench.config.attention import attention_name
from lra_bench.config.plan import TRANSFORMER_ONLY, build_model, build_task, resolve_device
from lra_bench.config.sections import NON_SEMANTIC_KEYS, container, section_dataclass
from lra_bench.errors import ConfigError

log = logging.getLogger(__name__)

MODES = ("model", "attention")
CPU_DEFAULT_BATCH, CUDA_DEFAULT_BATCH = 4, 32


@dataclass
class BenchSettings:
    """``bench:`` of configs/benchmark.yaml (its comments say what each is)."""

    seq_lens: list[int] = field(default_factory=lambda: [1024, 2048, 3072, 4096])
    batch_size: int | None = None
    modes: list[str] = field(default_factory=lambda: list(MODES))
    warmup: int = 2
    repeats: int = 5
    timeout_s: float = 900
    device: str = "auto"
    interleaved: bool = True
    rounds: int = 3

    def __post_init__(self) -> None:
        lens = list(self.seq_lens)
        if not lens or any(not isinstance(n, int) or isinstance(n, bool) or n <= 0 for n in lens):
            raise ConfigError(f"bench.seq_lens must be a non-empty list of positive ints, got {lens}")
        bad = [m for m in self.modes if m not in MODES]
        if bad or not self.modes:
            raise ConfigError(f"bench.modes must be a subset of {MODES}, got {list(self.modes)}")
        positive("bench", repeats=self.repeats, timeout_s=self.timeout_s, batch_size=self.batch_size,
                 rounds=self.rounds)
        if self.warmup < 0:
            raise ConfigError(f"bench.warmup must be >= 0, got {self.warmup}")


@dataclass
class BenchPlan:
    """Everything the benchmark needs, validated (and the model built once) before any cell runs."""

    attention: str
    task: str
    profile: str
    device: torch.device
    batch: int
    settings: BenchSettings
    config: dict[str, Any]  # the resolved config, ``task.source`` synthetic: what each cell rebuilds its model from
    bench_dir: Path
    dropped: list[str] = field(default_factory=list)  # model=ssm: the profile's Transformer-block sizes left out

    @property
    def block(self) -> str:
        """The model's block: "ssm" (model=ssm) or "transformer"."""
        return str(self.config["model"].get("block", "transformer"))

    @property
    def semantic(self) -> dict[str, Any]:
        """The config without what does not change a measurement (paths, logger, the bench section itself)."""
        return {k: v for k, v in self.config.items() if k not in (*NON_SEMANTIC_KEYS, "bench")}


def bench_plan(cfg: DictConfig) -> BenchPlan:
    """Check the whole benchmark config (and that the model builds at the shortest length) before any cell runs."""
    settings = section_dataclass(BenchSettings, cfg.bench, "bench")
    device = resolve_device(settings.device)
    batch = settings.batch_size or (CUDA_DEFAULT_BATCH if device.type == "cuda" else CPU_DEFAULT_BATCH)
    name = attention_name(cfg.attention)
    config = container(cfg)
    config["task"]["source"] = "synthetic"
    dropped = transformer_sizes_dropped(config["model"])
    task = build_task({**config["task"], "max_len": min(settings.seq_lens)})
    build_model(config["model"], config["attention"], task)  # raises ConfigError on bad model/attention keys
    return BenchPlan(attention=name, task=str(config["task"]["name"]), profile=str(config["profile"]["name"]),
                     device=device, batch=batch, settings=settings, config=config,
                     bench_dir=Path(config["paths"]["bench_dir"]), dropped=dropped)


def transformer_sizes_dropped(model: dict[str, Any]) -> list[str]:
    """model=ssm benchmarked with a Transformer profile (the benchmark's default ``profile=cpu``): the profile sizes the
    model (dim, depth, dropout) and its Transformer-block keys, which the state-space block has none of, are left out
    of ``model`` (in place) and returned, so that the mixers run in the model they are meant for at the profile's size.
    (A run refuses them instead: there the profile is a training recipe, ``profile=s4``.)"""
    if model.get("block") != "ssm":
        return []
    dropped = sorted(TRANSFORMER_ONLY & set(model))
    for key in dropped:
        del model[key]
    if dropped:
        log.info("model=ssm: the profile's Transformer-block sizes %s do not apply and are left out (dim %s, depth %s "
                 "kept)", ", ".join(dropped), model.get("dim"), model.get("depth"))
    return dropped
