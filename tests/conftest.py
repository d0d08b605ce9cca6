"""Shared fixtures: Compose-API configs pointing at tmp folders, and the optional real-data folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
SHARED_DATA = ROOT.parent / "shared" / "data"


def compose_run(overrides: list[str], tmp_path: Path) -> DictConfig:
    """configs/run.yaml composed like run.py does, with results and cache under tmp_path."""
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(
            config_name="run",
            overrides=[f"paths.results_dir={tmp_path / 'runs'}", f"paths.cache_dir={tmp_path / 'cache'}", *overrides],
        )
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
        pytest.skip(f"{path} not present (real-data tests need ../shared/data)")
    return path
