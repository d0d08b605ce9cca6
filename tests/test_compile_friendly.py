"""Every variant is friendly to ``torch.compile`` (``trainer.compile``, on by default on CUDA): its forward traces into
one graph, with no graph break, in training and in eval, on both kernels of the sparse variants. A graph break splits
the compiled model and costs a host sync or a Python round trip per layer per step.

``flash`` has one deliberate host sync (does the batch have padding? then SDPA without a mask can run FlashAttention);
it is the only break allowed.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch._dynamo as dynamo
from omegaconf import OmegaConf

from lra_bench.attention import list_attentions
from lra_bench.config.attention import build_attention_factory
from tests.conftest import CONFIGS

ALLOWED_BREAKS = {"flash": "Tensor.item()"}  # the padding check, see lra_bench/attention/flash.py
SPARSE = ("local", "strided", "global", "longformer", "bigbird")
CASES = [(name, "auto") for name in list_attentions()] + [(name, "flex") for name in SPARSE]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kernel"), CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_forward_traces_into_one_graph(name, kernel):
    cfg = OmegaConf.load(CONFIGS / "attention" / f"{name}.yaml")
    if kernel == "flex":
        cfg.kernel = "flex"
    layer = build_attention_factory(cfg)(dim=64, num_heads=4, seq_len=256, dropout=0.1)
    x, mask = torch.randn(2, 256, 64), torch.ones(2, 256, dtype=torch.bool)
    mask[1, 200:] = False
    for training in (True, False):
        layer.train(training)
        dynamo.reset()
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            explained = dynamo.explain(layer)(x, mask)
        reasons = {str(b.reason).splitlines()[0] for b in explained.break_reasons}
        allowed = ALLOWED_BREAKS.get(name)
        assert all(allowed and allowed in r for r in reasons), (training, reasons)
        assert explained.graph_break_count == 0 or allowed, (training, reasons)
