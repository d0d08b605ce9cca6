"""The plugin contract, checked for every registered attention variant (tests enumerate the registry).

Your own mixer, outside this package, goes through the same checks: name its config file(s) in
``LRA_ATTENTION_CONFIGS`` (separated by ``:``) with its package importable, e.g.
``LRA_ATTENTION_CONFIGS=myconf/attention/meanpool.yaml PYTHONPATH=. python -m pytest tests/test_attention_contract.py``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from hydra.utils import instantiate
from omegaconf import OmegaConf

from lra_bench.attention import cites_its_source, get_attention_class
from lra_bench.attention import list_attentions as zoo
from lra_bench.config.attention import attention_class, build_attention_factory
from lra_bench.errors import ConfigError

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs" / "attention"
DIM, HEADS, SEQ_LEN = 32, 4, 80
OUTSIDE_ENV = "LRA_ATTENTION_CONFIGS"


def outside_configs() -> dict[str, Path]:
    """name -> config of the mixers named in $LRA_ATTENTION_CONFIGS (imported here, so they register)."""
    found = {}
    for text in filter(None, os.environ.get(OUTSIDE_ENV, "").split(os.pathsep)):
        path = Path(text).resolve()
        found[attention_class(OmegaConf.load(path)).name] = path
    return found


OUTSIDE = outside_configs()


def list_attentions() -> list[str]:
    """The zoo, plus the outside mixers of $LRA_ATTENTION_CONFIGS."""
    return sorted({*zoo(), *OUTSIDE})


def config_of(name: str) -> Path:
    return OUTSIDE.get(name, CONFIG_DIR / f"{name}.yaml")


def make(name: str, seq_len: int = SEQ_LEN, dropout: float = 0.0):
    torch.manual_seed(0)
    factory = build_attention_factory(OmegaConf.load(config_of(name)))
    layer = factory(dim=DIM, num_heads=HEADS, seq_len=seq_len, dropout=dropout)
    return layer.eval()


def random_mask(b: int, n: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(n // 3, n, (b,), generator=g)
    lengths[0] = n  # one row without padding
    return torch.arange(n)[None, :] < lengths[:, None]  # (B, N) True = real


def test_registry_matches_config_folder_one_to_one():
    stems = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
    assert stems == [n for n in zoo() if get_attention_class(n).__module__.startswith("lra_bench.")]
    for stem in stems:
        cls = get_attention_class(stem)
        assert cls.__module__ == f"lra_bench.attention.{stem}", "one variant = one file named after it"


@pytest.mark.parametrize("name", list_attentions())
def test_config_names_its_class_and_the_class_cites_its_source(name):
    cfg = OmegaConf.load(config_of(name))
    assert cfg._partial_ is True, f"{config_of(name)} must set _partial_: true"
    cls = get_attention_class(name)
    assert cfg._target_ == f"{cls.__module__}.{cls.__qualname__}"
    assert cites_its_source(cls), "cite the paper (an http address) or say 'No paper: <why>' in the docstring"
    assert "${" not in OmegaConf.to_yaml(cfg)  # self-contained: no interpolation into other config groups


@pytest.mark.parametrize("name", list_attentions())
def test_config_instantiates_on_its_own(name):
    cfg = OmegaConf.load(config_of(name))
    layer = instantiate(cfg)(dim=DIM, num_heads=HEADS, seq_len=SEQ_LEN, dropout=0.1)
    assert isinstance(layer, get_attention_class(name))


@pytest.mark.parametrize("name", list_attentions())
def test_unknown_knob_fails_loudly(name):
    cfg = OmegaConf.load(config_of(name))
    cfg.not_a_knob = 3
    with pytest.raises(ConfigError, match="not_a_knob"):
        build_attention_factory(cfg)


@pytest.mark.parametrize("name", list_attentions())
@pytest.mark.parametrize("n", [SEQ_LEN, 37])
def test_shapes_finite_and_gradients(name, n):
    layer = make(name).train()
    x = torch.randn(3, n, DIM, requires_grad=True)
    mask = random_mask(3, n)
    y = layer(x, mask)
    assert y.shape == (3, n, DIM)
    assert torch.isfinite(y).all()
    y[mask].square().mean().backward()
    assert torch.isfinite(x.grad).all()
    no_grad = [p for p, t in layer.named_parameters() if t.requires_grad and t.grad is None]
    assert not no_grad, f"parameters without gradient: {no_grad}"
    assert layer(x, None).shape == (3, n, DIM)


@pytest.mark.parametrize("name", list_attentions())
def test_padding_content_never_reaches_real_positions(name):
    layer = make(name)
    x = torch.randn(4, SEQ_LEN, DIM)
    mask = random_mask(4, SEQ_LEN)
    scrambled = torch.where(mask[..., None], x, 1e3 * torch.randn_like(x))
    with torch.no_grad():
        y1, y2 = layer(x, mask), layer(scrambled, mask)
    assert torch.isfinite(y2).all()
    torch.testing.assert_close(y1[mask], y2[mask], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list_attentions())
def test_mask_polarity_true_means_real(name):
    """Flipping the mask must change real outputs: True marks tokens that are attended to."""
    layer = make(name)
    x = torch.randn(2, SEQ_LEN, DIM)
    mask = torch.zeros(2, SEQ_LEN, dtype=torch.bool)
    mask[:, : SEQ_LEN // 2] = True
    with torch.no_grad():
        y_true = layer(x, mask)
        y_flip = layer(x, ~mask)
        # with the right polarity, changing the second half (padding) leaves the first half alone
        x2 = x.clone()
        x2[:, SEQ_LEN // 2 :] = torch.randn_like(x2[:, SEQ_LEN // 2 :])
        y_changed = layer(x2, mask)
    torch.testing.assert_close(y_true[mask], y_changed[mask], rtol=1e-4, atol=1e-5)
    assert not torch.allclose(y_true[mask], y_flip[mask], atol=1e-4)


@pytest.mark.parametrize("name", [n for n in list_attentions() if get_attention_class(n).truncation_exact])
def test_padded_equals_truncated_at_real_positions(name):
    layer = make(name)
    n_real = 45
    x = torch.randn(2, SEQ_LEN, DIM)
    mask = torch.zeros(2, SEQ_LEN, dtype=torch.bool)
    mask[:, :n_real] = True
    with torch.no_grad():
        padded = layer(x, mask)[:, :n_real]
        truncated = layer(x[:, :n_real], None)
    torch.testing.assert_close(padded, truncated, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", list_attentions())
def test_eval_is_deterministic(name):
    layer = make(name, dropout=0.1)
    x = torch.randn(2, SEQ_LEN, DIM)
    mask = random_mask(2, SEQ_LEN)
    with torch.no_grad():
        torch.testing.assert_close(layer(x, mask), layer(x, mask), rtol=0, atol=0)


@pytest.mark.parametrize("name", list_attentions())
def test_rejects_sequences_longer_than_seq_len(name):
    layer = make(name)
    with pytest.raises(ValueError, match="seq_len"):
        layer(torch.randn(1, SEQ_LEN + 1, DIM), None)


@pytest.mark.parametrize(("name", "knob", "bad"), [
    ("performer", "nb_features", 0), ("performer", "kernel", "tanh"), ("linformer", "low_rank_features", 0),
    ("gmlp", "expansion", 0), ("mlp_mixer", "hidden", 0), ("synthesizer", "mode", "sparse"), ("synthesizer", "k", 0),
    ("compressed", "compression", 0), ("nystromformer", "conv_kernel", 2), ("rfa", "sigma", 0.0),
    ("reformer", "n_buckets", 3), ("local", "block_size", SEQ_LEN + 1),
])
def test_a_knob_out_of_range_is_a_config_error_naming_it(name, knob, bad):
    cls = get_attention_class(name)
    with pytest.raises(ConfigError, match=knob):
        cls(dim=DIM, num_heads=HEADS, seq_len=SEQ_LEN, dropout=0.0, **{knob: bad})
