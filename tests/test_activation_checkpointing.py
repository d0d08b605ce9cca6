"""``trainer.activation_checkpointing``: per-block ``torch.utils.checkpoint``, bit-identical training, recorded."""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
import torch.utils.checkpoint

from lra_bench.config.plan import plan
from lra_bench.errors import ConfigError
from lra_bench.store.records import semantic_hash
from lra_bench.train.loop import train
from lra_bench.train.step import checkpoint_blocks

SSM = ("attention=s4d", "model=ssm", "~model.num_heads", "~model.mlp_dim", "model.dropout=0.1", "model.depth=2")
S4_STYLE = (*SSM, "model.tie_dropout=true", "model.prenorm=true", "attention.init=legs", "attention.n_ssm=1")
TRANSFORMER = ("attention=local", "model.dropout=0.1", "model.depth=2", "attention.block_size=16")


@pytest.mark.parametrize("overrides", [SSM, S4_STYLE, TRANSFORMER],
                         ids=["ssm-batchnorm-dropout", "ssm-tied-dropout-prenorm-legs", "transformer-dropout"])
def test_checkpointed_training_is_bit_identical(smoke_cfg, tmp_path, monkeypatch, overrides):
    """Same weights (batch-norm running statistics included) and the same evaluations after training, with every
    block's forward run under torch.utils.checkpoint and recomputed in the backward."""
    p = plan(smoke_cfg(*overrides, "trainer.max_steps=6", "trainer.eval_every=3"))
    data = p.task.load(tmp_path / "cache")
    splits = {s: (data.inputs[s], data.labels[s]) for s in ("train", "val", "test")}
    calls = []
    real = torch.utils.checkpoint.checkpoint

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.utils.checkpoint, "checkpoint", counted)
    results = {}
    for on in (False, True):
        model = copy.deepcopy(p.model)
        settings = dataclasses.replace(p.trainer, activation_checkpointing=on)
        torch.manual_seed(0)
        result = train(model, splits, settings, torch.device("cpu"), seed=0)
        results[on] = (model.state_dict(), result.evals)
        if not on:
            assert not calls
    assert len(calls) == 2 * 6  # two blocks, six training steps; evaluation runs without
    (plain, plain_evals), (ckpt, ckpt_evals) = results[False], results[True]
    assert plain_evals == ckpt_evals
    assert plain.keys() == ckpt.keys()
    for name in plain:
        assert torch.equal(plain[name], ckpt[name]), name


def test_the_setting_is_recorded_and_old_records_keep_their_identity(smoke_cfg):
    on = plan(smoke_cfg("trainer.activation_checkpointing=true"))
    off = plan(smoke_cfg())
    assert on.config["trainer"]["activation_checkpointing"] is True  # the record keeps its config
    assert on.config_hash != off.config_hash
    before_the_key = copy.deepcopy(off.config)
    del before_the_key["trainer"]["activation_checkpointing"]
    assert semantic_hash(before_the_key) == off.config_hash  # records made before the key still match


def test_a_model_without_blocks_says_so():
    with pytest.raises(ConfigError, match="activation_checkpointing"):
        checkpoint_blocks(torch.nn.Linear(2, 2), True)
    assert checkpoint_blocks(torch.nn.Linear(2, 2), False) == 0
