"""Experiment loggers: ``none`` (the JSON record is the source of truth) and ``wandb`` (a mirror).

``logger=none`` never imports wandb. ``logger=wandb`` is offline unless ``logger.mode=online``;
``finish()`` is always called (the caller uses ``try/finally``), so sweeps never merge runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from lra_bench.checks import check_fields


@dataclass
class LoggerSettings:
    """Args:
    kind: "none" or "wandb".
    project, entity, group: wandb placement (group defaults to the Hydra sweep when multirun).
    mode: wandb mode: "offline" (default, no network), "online" or "disabled".
    tags: extra tags (attention and task are always added).
    """

    kind: Literal["none", "wandb"] = "none"
    project: str = "lra-bench"
    entity: str | None = None
    group: str | None = None
    mode: Literal["offline", "online", "disabled"] = "offline"
    tags: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        check_fields(self, "logger")


class NullLogger:
    def log(self, metrics: dict[str, float], step: int) -> None:
        pass

    def finish(self, exit_code: int = 0) -> None:
        pass


class WandbLogger:
    def __init__(self, s: LoggerSettings, name: str, config: dict[str, Any], tags: list[str], out_dir: Path) -> None:
        import wandb

        out_dir.mkdir(parents=True, exist_ok=True)
        self._wandb = wandb
        self._run = wandb.init(project=s.project, entity=s.entity, group=s.group, mode=s.mode, name=name,
                               config=config, tags=[*tags, *s.tags], dir=str(out_dir), reinit="finish_previous")

    def log(self, metrics: dict[str, float], step: int) -> None:
        self._run.log(metrics, step=step)

    def finish(self, exit_code: int = 0) -> None:
        self._run.finish(exit_code=exit_code)


def build_logger(
    s: LoggerSettings, name: str, config: dict[str, Any], tags: list[str], out_dir: Path
) -> NullLogger | WandbLogger:
    if s.kind == "wandb":
        return WandbLogger(s, name, config, tags, out_dir)
    return NullLogger()
