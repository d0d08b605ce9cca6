"""The state-space block (``model=ssm``) and the s4 repository's recipes (``profile=s4``)."""

from __future__ import annotations

import math

import pytest
import torch
from omegaconf import OmegaConf

from lra_bench.attention.base import ChannelDropout
from lra_bench.config.attention import build_attention_factory
from lra_bench.config.plan import plan
from lra_bench.errors import ConfigError
from lra_bench.models.ssm import SSMEncoder
from lra_bench.run.runner import run
from tests.conftest import CONFIGS, compose_run

#: state-spaces/s4 at commit 62a14bb, configs/experiment/lra/s4-{cifar,listops,imdb,aan,pathfinder,pathx}.yaml, with
#: what they inherit (model/s4.yaml: tie_dropout true; model/layer/s4.yaml: lr 0.001 for dt, A, B, wd 0, dt_max 0.1;
#: optimizer/adamw.yaml: betas 0.9, 0.999, torch's eps 1e-8; trainer/default.yaml: no gradient clipping, fp32; the
#: scheduler cosine_warmup; dataset l_max: listops 2048, imdb 4096, aan 4000) and the training length its trainer
#: reaches: max_epochs x the batches of an epoch (loader drop_last: true) over the training split ("train").
S4_LRA = {
    "image": dict(n_layers=6, d_model=512, prenorm=False, norm="batch", dropout=0.1, d_state=64, lr_dt=0.001,
                  dt_min=0.001, n_ssm=1, batch_size=50, lr=0.01, num_training_steps=180000,
                  num_warmup_steps=18000, max_epochs=200, train=45000, l_max=1024),
    "listops": dict(n_layers=6, d_model=256, prenorm=False, norm="batch", dropout=0.0, d_state=4, lr_dt=None,
                    dt_min=0.001, n_ssm=1, batch_size=32, lr=0.01, num_training_steps=120000,
                    num_warmup_steps=12000, max_epochs=40, train=96000, l_max=2048),
    "text": dict(n_layers=6, d_model=256, prenorm=True, norm="batch", dropout=0.0, d_state=4, lr_dt=None,
                 dt_min=0.001, n_ssm=1, batch_size=16, lr=0.01, num_training_steps=50000, num_warmup_steps=5000,
                 max_epochs=32, train=25000, l_max=4096),
    "retrieval": dict(n_layers=6, d_model=256, prenorm=True, norm="batch", dropout=0.0, d_state=4, lr_dt=None,
                      dt_min=0.001, n_ssm=1, batch_size=64, lr=0.01, num_training_steps=50000,
                      num_warmup_steps=5000, max_epochs=20, train=147086, l_max=4000),
    "pathfinder": dict(n_layers=6, d_model=256, prenorm=True, norm="batch", dropout=0.0, d_state=64, lr_dt=0.001,
                       dt_min=0.001, n_ssm=None, batch_size=64, lr=0.004, num_training_steps=500000,
                       num_warmup_steps=50000, max_epochs=200, train=160000, l_max=1024),
    "pathx": dict(n_layers=6, d_model=256, prenorm=True, norm="batch", dropout=0.0, d_state=64, lr_dt=0.001,
                  dt_min=0.0001, n_ssm=None, batch_size=16, lr=0.002, num_training_steps=500000,
                  num_warmup_steps=50000, max_epochs=50, train=160000, l_max=16384),
}


@pytest.mark.parametrize("task", list(S4_LRA))
def test_profile_s4_is_the_s4_repositorys_lra_config(task, tmp_path):
    """The composed ``attention=s4d model=ssm profile=s4`` config equals s4's, value by value; the deviations that
    remain are in docs/zoo_part2.md's table (mode diag + init legs = S4D-LegS for s4's DPLR S4, exp step size, ...)."""
    s4 = S4_LRA[task]
    cfg = compose_run(["attention=s4d", "model=ssm", "profile=s4", f"task={task}", "task.source=synthetic"], tmp_path)
    epoch = s4["train"] // s4["batch_size"]  # batches per epoch, remainder dropped
    assert cfg.task.max_len == s4["l_max"]
    assert dict(cfg.model) == {"block": "ssm", "dim": s4["d_model"], "depth": s4["n_layers"],
                               "dropout": s4["dropout"], "tie_dropout": True, "norm": s4["norm"],
                               "prenorm": s4["prenorm"]}
    attention = {k: v for k, v in cfg.attention.items() if not k.startswith("_")}
    assert attention == {"d_state": s4["d_state"], "dt_min": s4["dt_min"], "dt_max": 0.1, "init": "legs",
                         "n_ssm": s4["n_ssm"], "bidirectional": True, "ssm_lr": 0.001, "dt_lr": s4["lr_dt"]}
    t = cfg.trainer
    assert (t.batch_size, t.lr, t.weight_decay, t.beta1, t.beta2, t.eps, t.grad_clip, t.precision) == (
        s4["batch_size"], s4["lr"], 0.05, 0.9, 0.999, 1e-8, None, "fp32")
    assert (t.schedule, t.warmup_steps, t.schedule_steps) == (
        "cosine_to_zero", s4["num_warmup_steps"], s4["num_training_steps"])
    assert (t.max_steps, t.eval_every) == (s4["max_epochs"] * epoch, epoch)  # whole epochs, validated after each
    if task == "retrieval":
        assert cfg.task.interaction == "nli"  # s4's retrieval decoder: nli: true
    if task.startswith("path"):
        assert (cfg.task.difficulty, cfg.task.num_images) == ("curv_contour_length_14", 200000)

    model = plan(cfg).model
    encoder = model.encoder
    assert len(encoder.blocks) == s4["n_layers"] and isinstance(encoder.blocks[0].norm, torch.nn.BatchNorm1d)
    assert (encoder.final_norm is not None) == s4["prenorm"], "s4: a final norm after the last block iff prenorm"
    kernel = encoder.blocks[0].mixer.kernel
    assert kernel.A_imag.shape[0] == (s4["n_ssm"] or s4["d_model"]) and kernel.B.requires_grad
    drops = [m for m in model.modules() if isinstance(m, ChannelDropout)]
    assert len(drops) == 3 * s4["n_layers"] and not any(isinstance(m, torch.nn.Dropout) for m in model.modules())
    assert not any("mlp" in name for name, _ in model.named_parameters()), "no MLP: the GLU is in the mixer"


def flat(node: dict, prefix: str = "") -> dict:
    """{"generator": {"num_train": 512}} -> {"generator.num_train": 512}; lists as Hydra writes them."""
    out = {}
    for key, value in node.items():
        if isinstance(value, dict):
            out.update(flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = f"[{','.join(map(str, value))}]" if isinstance(value, list) else value
    return out


#: The LRU paper (Orvieto et al. 2023, arXiv 2303.06349, its ar5iv rendering): Table 9 (depth 6 and weight decay 0.05
#: for every task; H, N, iterations, batch size, LR factor, dropout), Table 8's LRU row ([r_min, r_max]) and caption
#: (phase range [0, pi/10] on PathX, [0, 2 pi] elsewhere), D.1 (bidirectional on PathFinder and PathX only), D.2 (10 %
#: warm-up, cosine; A, B, gamma at base x factor without decay). The base rate is not printed: S5's (lindermanlab/S5 at
#: d133f4d, bin/run_experiments/run_lra_{cifar,listops,imdb,aan,pathfinder,pathx}.sh, ssm_lr_base x lr_factor).
LRU_PAPER = {
    "image": dict(H=512, N=384, iterations=180_000, batch=50, lr_factor=0.25, dropout=0.1, ring=(0.9, 0.999),
                  phase=2 * math.pi, bidirectional=False, s5=(0.001, 4.5), train=45000),
    "listops": dict(H=128, N=256, iterations=80_000, batch=32, lr_factor=0.5, dropout=0.0, ring=(0.0, 0.99),
                    phase=2 * math.pi, bidirectional=False, s5=(0.001, 3), train=96000),
    "text": dict(H=256, N=192, iterations=50_000, batch=32, lr_factor=0.1, dropout=0.1, ring=(0.5, 0.9),
                 phase=2 * math.pi, bidirectional=False, s5=(0.001, 4), train=25000),
    "retrieval": dict(H=128, N=256, iterations=100_000, batch=64, lr_factor=0.5, dropout=0.1, ring=(0.5, 0.9),
                      phase=2 * math.pi, bidirectional=False, s5=(0.001, 2), train=147086),
    "pathfinder": dict(H=192, N=256, iterations=500_000, batch=64, lr_factor=0.25, dropout=0.0, ring=(0.9, 0.999),
                       phase=2 * math.pi, bidirectional=True, s5=(0.0009, 5), train=160000),
    "pathx": dict(H=128, N=256, iterations=250_000, batch=32, lr_factor=0.25, dropout=0.0, ring=(0.999, 0.9999),
                  phase=math.pi / 10, bidirectional=True, s5=(0.0006, 3), train=160000),
}


@pytest.mark.parametrize("task", list(LRU_PAPER))
def test_profile_lru_is_the_lru_papers_lra_recipe(task, tmp_path):
    """The composed ``attention=lru model=ssm profile=lru`` config equals the paper's recipe, value by value; the
    deviations (base rate from S5, grey images, the full GLU on Path-X, the final norm) are in docs/zoo_part2.md."""
    lru = LRU_PAPER[task]
    cfg = compose_run(["attention=lru", "model=ssm", "profile=lru", f"task={task}", "task.source=synthetic"], tmp_path)
    assert dict(cfg.model) == {"block": "ssm", "dim": lru["H"], "depth": 6, "dropout": lru["dropout"],
                               "tie_dropout": False, "norm": "batch", "prenorm": True}
    base = lru["s5"][0] * lru["s5"][1]
    attention = {k: v for k, v in cfg.attention.items() if not k.startswith("_")}
    assert attention == pytest.approx({"d_state": lru["N"], "r_min": lru["ring"][0], "r_max": lru["ring"][1],
                                       "max_phase": lru["phase"], "bidirectional": lru["bidirectional"],
                                       "ssm_lr": base * lru["lr_factor"], "ssm_includes_b": True})
    t = cfg.trainer
    assert (t.batch_size, t.weight_decay, t.beta1, t.beta2, t.eps, t.grad_clip, t.precision) == (
        lru["batch"], 0.05, 0.9, 0.999, 1e-8, None, "fp32")
    assert t.lr == pytest.approx(base)
    assert (t.max_steps, t.schedule_steps, t.schedule, t.warmup_steps) == (
        lru["iterations"], lru["iterations"], "cosine_to_zero", lru["iterations"] // 10)
    assert t.eval_every == lru["train"] // lru["batch"]  # once per epoch
    if task == "retrieval":
        assert cfg.task.interaction == "nli"
    if task.startswith("path"):
        assert (cfg.task.difficulty, cfg.task.num_images, cfg.task.resolution) == (
            "curv_contour_length_14", 200000, 32 if task == "pathfinder" else 128)

    model = plan(cfg).model
    encoder = model.encoder
    assert len(encoder.blocks) == 6 and isinstance(encoder.blocks[0].norm, torch.nn.BatchNorm1d)
    assert encoder.final_norm is not None  # prenorm
    mixer = encoder.blocks[0].mixer
    assert mixer.nu_log.shape == (2 if lru["bidirectional"] else 1, lru["N"])
    modulus = torch.exp(-torch.exp(mixer.nu_log.detach()))
    assert lru["ring"][0] <= modulus.min() and modulus.max() <= lru["ring"][1]
    assert torch.exp(mixer.theta_log.detach()).max() <= lru["phase"]


@pytest.mark.parametrize("profile", ["s4", "lru"])
@pytest.mark.parametrize("task", list(S4_LRA))
def test_attention_lru_with_profile_s4_or_lru_builds_and_trains_on_smoke_data(task, profile, tmp_path):
    """``attention=lru model=ssm profile=s4`` composes with LRU's own knobs (profile=s4 sets only S4D's),
    ``profile=lru`` with the LRU paper's; each builds at full size and trains 20 steps on each task's smoke-profile
    data with its block shrunk; LRU's recurrence parameters, gamma_log included, train without weight decay, and
    under profile=lru B too (the paper's Appendix D.2)."""
    base = ["attention=lru", "model=ssm", f"profile={profile}", f"task={task}"]
    full = compose_run([*base, "task.source=synthetic"], tmp_path)
    assert {k for k in full.attention if not k.startswith("_")} == {
        "d_state", "r_min", "r_max", "max_phase", "bidirectional", "ssm_lr", "ssm_includes_b"}
    plan(full)  # the full-size model builds
    smoke = OmegaConf.load(CONFIGS / "task_profile" / f"{task}_smoke.yaml")  # the smoke profile's data for the task
    data = [f"task.{key}={value}" for key, value in flat(OmegaConf.to_container(smoke.task)).items()]
    if task in ("image", "text", "retrieval"):
        data.append("task.source=synthetic")  # no real data needed
    small = ["model.dim=16", "model.depth=2", "attention.d_state=8", "trainer.max_steps=20", "trainer.eval_every=10",
             "trainer.warmup_steps=2", "trainer.schedule_steps=null", "trainer.log_every=10",
             f"trainer.batch_size={smoke.trainer.batch_size}",
             f"trainer.eval_batch_size={smoke.trainer.get('eval_batch_size', 64)}"]
    record = run(compose_run([*base, *data, *small], tmp_path))
    assert record["status"] == "ok", record["message"]
    assert record["steps"] == 20 and record["config"]["trainer"]["schedule"] == "cosine_to_zero"
    assert record["config"]["model"]["tie_dropout"] is (profile == "s4")
    no_decay = [g for g in record["param_groups"] if g["weight_decay"] == 0.0]
    slow = {"nu_log", "theta_log", "gamma_log"} | ({"B_re", "B_im"} if profile == "lru" else set())
    assert {n.rsplit(".", 1)[-1] for g in no_decay for n in g["names"]} == slow
    assert {g["lr"] for g in no_decay} == {record["config"]["attention"]["ssm_lr"]}  # below the base rate


def test_profile_s4_with_the_transformer_block_says_to_add_model_ssm(tmp_path):
    cfg = compose_run(["attention=s4d", "profile=s4", "task=listops"], tmp_path)
    with pytest.raises(ConfigError, match="model=ssm"):
        plan(cfg)


def test_model_ssm_with_a_transformer_profile_names_the_foreign_keys(tmp_path):
    cfg = compose_run(["attention=s4d", "model=ssm", "profile=smoke", "task=listops"], tmp_path)
    with pytest.raises(ConfigError, match="num_heads"):
        plan(cfg)


def encoder(name: str, norm: str, prenorm: bool, tie_dropout: bool = False) -> SSMEncoder:
    torch.manual_seed(0)
    factory = build_attention_factory(OmegaConf.load(CONFIGS / "attention" / f"{name}.yaml"))
    return SSMEncoder(factory, vocab_size=20, max_len=40, pad_id=0, dim=16, depth=2, dropout=0.1, norm=norm,
                      prenorm=prenorm, tie_dropout=tie_dropout)


PADDING_CASES = [("batch", False, False), ("layer", True, False), ("batch", True, True)]  # norm, prenorm, tie


@pytest.mark.parametrize(("name", "norm", "prenorm", "tie"),  # tie_dropout is s4's, inside s4d and lru only
                         [(n, *case) for n in ("s4d", "lru") for case in PADDING_CASES]
                         + [("mamba", *case) for case in PADDING_CASES if not case[2]])
def test_padding_content_never_reaches_the_pooled_output(name, norm, prenorm, tie):
    assert_pooled_ignores_padding(encoder(name, norm, prenorm, tie))


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


@pytest.mark.parametrize("prenorm", [True, False])
def test_prenorm_ends_with_a_final_norm_as_s4(prenorm):
    """s4's SequenceModel normalises once more after the last block when prenorm (a postnorm block ends on its norm
    already): pooled = mean over tokens of Norm(last block's output)."""
    model = encoder("s4d", "layer", prenorm).eval()
    ids = torch.randint(1, 20, (3, 40))  # no padding
    with torch.no_grad():
        x = model.embed(ids)
        for block in model.blocks:
            x = block(x, torch.ones(3, 40, dtype=torch.bool))
        if prenorm:
            assert isinstance(model.final_norm, torch.nn.LayerNorm)
            x = model.final_norm(x)
        else:
            assert model.final_norm is None
        torch.testing.assert_close(model(ids), x.mean(1))


def test_channel_dropout_keeps_one_mask_per_example_and_channel():
    """s4's tied dropout (DropoutNd, tie=True): a channel of an example is kept or dropped at every position."""
    torch.manual_seed(0)
    drop = ChannelDropout(0.5).train()
    y = drop(torch.ones(8, 50, 16))  # (B, N, C)
    assert torch.equal(y, y[:, :1].expand_as(y)), "the same mask at every position"
    assert set(y.unique().tolist()) == {0.0, 2.0}  # dropped, or kept and scaled by 1 / (1 - p)
    assert 0.3 < (y[:, 0] == 0).float().mean() < 0.7
    x = torch.randn(2, 5, 3)
    assert torch.equal(drop.eval()(x), x)
    with pytest.raises(ConfigError, match="dropout"):
        ChannelDropout(1.0)


@pytest.mark.parametrize("name", ["s4d", "lru"])
def test_tie_dropout_is_s4s_three_tied_dropouts_per_block(name):
    """model.tie_dropout: true puts s4's dropout layout in every block: a tied dropout before the mixer's GELU (s4's
    FFTConv), one after it (S4Block) and one on the residual branch (SequenceResidualBlock); false keeps two
    element-wise ones (after the GELU, on the residual branch)."""
    tied, plain = encoder(name, "batch", False, tie_dropout=True), encoder(name, "batch", False)
    for block in tied.blocks:
        drops = (block.mixer.pre_drop, block.mixer.out_drop, block.drop)
        assert all(isinstance(d, ChannelDropout) and d.p == 0.1 for d in drops)
    for block in plain.blocks:
        assert isinstance(block.mixer.pre_drop, torch.nn.Identity)
        assert type(block.mixer.out_drop) is type(block.drop) is torch.nn.Dropout
    mixer = tied.blocks[0].mixer.train()
    seen = {}
    mixer.pre_drop.register_forward_hook(lambda m, i, o: seen.update(pre=(i[0], o)))
    mixer.out_drop.register_forward_hook(lambda m, i, o: seen.update(out=i[0]))
    x = torch.randn(2, 40, 16)
    with torch.no_grad():
        mixer(x, None)
        torch.testing.assert_close(seen["pre"][0], mixer.ssm(x))  # the system's output, before the GELU
        torch.testing.assert_close(seen["out"], torch.nn.functional.gelu(seen["pre"][1]))  # then GELU, then drop


def test_tie_dropout_needs_a_state_space_mixer():
    factory = build_attention_factory(OmegaConf.load(CONFIGS / "attention" / "softmax.yaml"))
    with pytest.raises(ConfigError, match="tie_dropout"):
        SSMEncoder(factory, vocab_size=20, max_len=40, pad_id=0, dim=16, depth=1, dropout=0.1, norm="batch",
                   prenorm=True, tie_dropout=True)


@pytest.mark.parametrize("name", ["s4d", "lru"])
def test_model_ssm_trains_on_profile_smoke(smoke_cfg, name):
    record = run(smoke_cfg(f"attention={name}", "model=ssm", "~model.num_heads", "~model.mlp_dim",
                           "trainer.max_steps=6", "trainer.eval_every=3"))
    assert record["status"] == "ok", record["message"]
    assert record["config"]["model"]["block"] == "ssm"
