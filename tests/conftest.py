"""Shared fixtures: Compose-API configs pointing at tmp folders, and the optional real-data folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
SHARED_DATA = ROOT.parent / "shared" / "data"


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
