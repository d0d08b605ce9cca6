"""Shared fixtures: Compose-API configs pointing at tmp folders, and the optional real-data folder; how the suite
spreads over cores (``pytest -n auto --dist loadgroup``, pytest-xdist: the README's test command)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
SHARED_DATA = ROOT.parent / "shared" / "data"
MAX_WORKERS = 8  # each worker holds torch (about 0.5 GB) and starts run.py processes of its own

if os.environ.get("PYTEST_XDIST_WORKER"):  # one worker per core: its torch, and the processes it starts, take one
    # thread each. Two threads per worker on a shared core spin against each other and slow the whole suite down.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    import torch

    torch.set_num_threads(1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per core this process may use, at most MAX_WORKERS. Measured on the 2-core CI machine:
    2 workers ran the suite in 995 s (1,708 CPU-seconds); 3 workers, on nearly the same tests, took 1,037 s (1,842
    CPU-seconds: the extra worker's processes compete for the cores more than they fill the waits)."""
    return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the longest work starts first, so no worker is left with it alone at the end: the modules that
    run as one group (``xdist_group``: a cluster, a shared reference run), then the ``slow`` tests, then the rest.
    The order within each class is unchanged; a serial run keeps the files' order."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def rank(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("xdist_group") else 1 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)  # stable


def compose_run(overrides: list[str], tmp_path: Path, config_name: str = "run") -> DictConfig:
    """configs/<config_name>.yaml composed like run.py does, with results, bench and cache under tmp_path."""
    paths = [f"paths.results_dir={tmp_path / 'runs'}", f"paths.cache_dir={tmp_path / 'cache'}",
             f"paths.bench_dir={tmp_path / 'bench'}"]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=[*paths, *overrides])
    OmegaConf.resolve(cfg)
    return cfg


@pytest.fixture
def smoke_cfg(tmp_path: Path):
    def make(*overrides: str) -> DictConfig:
        return compose_run(["profile=smoke", *overrides], tmp_path)

    return make


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test when that folder is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs ../shared/data/{'/'.join(parts)} beside the repo (the project's shared data folder, "
                    f"see its README.md); not found at {path}")
    return path
