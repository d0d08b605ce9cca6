"""Entry point: ``python run.py attention=NAME task=TASK profile=PROFILE`` (see configs/run.yaml)."""

from __future__ import annotations

import logging
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from lra_bench.errors import LRABenchError

log = logging.getLogger("lra_bench")


@hydra.main(config_path="configs", config_name="run", version_base="1.3")
def main(cfg: DictConfig) -> float | None:
    from lra_bench.runner import run

    multirun = HydraConfig.get().mode == RunMode.MULTIRUN
    try:
        record = run(cfg)
    except LRABenchError as e:
        log.error("%s", e)
        if multirun:
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    if record["status"] != "ok" and not multirun:
        print(f"run ended with status {record['status']}: {record['message']}", file=sys.stderr)
        sys.exit(1)
    return record["test_acc"]


if __name__ == "__main__":
    main()
