"""The state-space block (``model=ssm``) and the s4 repository's recipes (``profile=s4``)."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from lra_bench.build import plan
from lra_bench.errors import ConfigError
from lra_bench.models.factory import build_attention_factory
from lra_bench.models.ssm import SSMEncoder
from lra_bench.runner import run
from tests.conftest import CONFIGS, compose_run

# (task, d_model, prenorm, dropout, d_state, dt_min, dt_lr, batch, lr, steps, warmup): s4-*.yaml of state-spaces/s4
S4_RECIPES = [
    ("listops", 256, False, 0.0, 4, 0.001, None, 32, 0.01, 120000, 12000),
    ("text", 256, True, 0.0, 4, 0.001, None, 16, 0.01, 50000, 5000),
    ("retrieval", 256, True, 0.0, 4, 0.001, None, 64, 0.01, 50000, 5000),
    ("image", 512, False, 0.1, 64, 0.001, 0.001, 50, 0.01, 180000, 18000),
    ("pathfinder", 256, True, 0.0, 64, 0.001, 0.001, 64, 0.004, 500000, 50000),
    ("pathx", 256, True, 0.0, 64, 0.0001, 0.001, 16, 0.002, 500000, 50000),
]


@pytest.mark.parametrize("recipe", S4_RECIPES, ids=[r[0] for r in S4_RECIPES])
def test_profile_s4_transcribes_the_s4_configs(recipe, tmp_path):
    task, dim, prenorm, dropout, d_state, dt_min, dt_lr, batch, lr, steps, warmup = recipe
    cfg = compose_run(["attention=s4d", "model=ssm", "profile=s4", f"task={task}", "task.source=synthetic"], tmp_path)
    p = plan(cfg)
    assert (cfg.model.dim, cfg.model.depth, cfg.model.norm, cfg.model.prenorm, cfg.model.dropout) == (
        dim, 6, "batch", prenorm, dropout)
    assert (cfg.attention.d_state, cfg.attention.dt_min, cfg.attention.dt_max, cfg.attention.dt_lr) == (
        d_state, dt_min, 0.1, dt_lr)
    assert cfg.attention.ssm_lr == 0.001 and cfg.attention.bidirectional is True
    t = p.trainer
    assert (t.batch_size, t.lr, t.max_steps, t.warmup_steps, t.weight_decay, t.schedule) == (
        batch, lr, steps, warmup, 0.05, "cosine")
    assert warmup == steps // 10
    blocks = p.model.encoder.blocks
    assert len(blocks) == 6 and isinstance(blocks[0].norm, torch.nn.BatchNorm1d)
    assert not any("mlp" in name for name, _ in p.model.named_parameters()), "no MLP: the GLU is in the mixer"


def test_profile_s4_with_the_transformer_block_says_to_add_model_ssm(tmp_path):
    cfg = compose_run(["attention=s4d", "profile=s4", "task=listops"], tmp_path)
    with pytest.raises(ConfigError, match="model=ssm"):
        plan(cfg)


def test_model_ssm_with_a_transformer_profile_names_the_foreign_keys(tmp_path):
    cfg = compose_run(["attention=s4d", "model=ssm", "profile=smoke", "task=listops"], tmp_path)
    with pytest.raises(ConfigError, match="num_heads"):
        plan(cfg)


def encoder(name: str, norm: str, prenorm: bool) -> SSMEncoder:
    torch.manual_seed(0)
    factory = build_attention_factory(OmegaConf.load(CONFIGS / "attention" / f"{name}.yaml"))
    return SSMEncoder(factory, vocab_size=20, max_len=40, pad_id=0, dim=16, depth=2, dropout=0.1, norm=norm,
                      prenorm=prenorm)


@pytest.mark.parametrize("name", ["s4d", "lru", "mamba"])
@pytest.mark.parametrize(("norm", "prenorm"), [("batch", False), ("layer", True)])
def test_padding_content_never_reaches_the_pooled_output(name, norm, prenorm):
    assert_pooled_ignores_padding(encoder(name, norm, prenorm))


def assert_pooled_ignores_padding(model: torch.nn.Module) -> None:
    """A pooled encoder (vocab 20, max_len 40, pad id 0), trained a few steps, then in eval: the pooled output of a
    right-padded batch equals each row's truncated input's."""
    model.train()
    ids = torch.randint(1, 20, (4, 40))
    for _ in range(3):  # batch-norm running statistics away from their initial values
        model(ids)
    model.eval()
    lengths = torch.tensor([40, 25, 10, 33])
    padded = ids.masked_fill(torch.arange(40)[None] >= lengths[:, None], 0)
    with torch.no_grad():
        pooled = model(padded)
        truncated = torch.stack([model(padded[i : i + 1, : lengths[i]])[0] for i in range(4)])
    torch.testing.assert_close(pooled, truncated, rtol=1e-4, atol=1e-5)


def test_prenorm_and_postnorm_place_the_norm():
    x = torch.randn(2, 40, 16)
    for prenorm in (True, False):
        block = encoder("s4d", "layer", prenorm).blocks[0].eval()
        with torch.no_grad():
            y = block(x, None)
            expected = (x + block.mixer(block.norm(x), None)) if prenorm else block.norm(x + block.mixer(x, None))
        torch.testing.assert_close(y, expected)


@pytest.mark.parametrize("name", ["s4d", "lru"])
def test_model_ssm_trains_on_profile_smoke(smoke_cfg, name):
    record = run(smoke_cfg(f"attention={name}", "model=ssm", "~model.num_heads", "~model.mlp_dim",
                           "trainer.max_steps=6", "trainer.eval_every=3"))
    assert record["status"] == "ok", record["message"]
    assert record["config"]["model"]["block"] == "ssm"
