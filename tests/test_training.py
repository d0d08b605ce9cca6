"""Trainer behaviour: best-val weights are the ones tested, determinism, every variant trains, hooks."""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from lra_bench.attention import list_attentions
from lra_bench.config.attention import build_attention_factory
from lra_bench.infra.timing import StepTimer
from lra_bench.models.encoder import Classifier, Encoder
from lra_bench.run.runner import run
from lra_bench.train import loop
from lra_bench.train.settings import TrainerSettings
from tests.conftest import CONFIGS


def tiny_model(attention: str = "softmax", max_len: int = 64, vocab: int = 17, classes: int = 10) -> Classifier:
    factory = build_attention_factory(OmegaConf.load(CONFIGS / "attention" / f"{attention}.yaml"))
    encoder = Encoder(factory, vocab, max_len, 0, dim=32, depth=1, num_heads=2, mlp_dim=64, dropout=0.0,
                      positions="sinusoidal", pool="mean")
    return Classifier(encoder, mlp_dim=64, num_classes=classes)


def settings(**over) -> TrainerSettings:
    base = dict(max_steps=12, batch_size=8, eval_batch_size=7, lr=1e-3, schedule="constant", warmup_steps=0,
                weight_decay=0.0, eval_every=3, log_every=4, timing_warmup_steps=2)
    return TrainerSettings(**{**base, **over})


def toy_data(n: int = 64, max_len: int = 64, seed: int = 0):
    rng = np.random.default_rng(seed)
    x = rng.integers(1, 17, size=(n, max_len)).astype(np.uint8)
    x[:, max_len // 2 :] *= rng.random((n, 1)) < 0.5  # some rows padded halfway
    y = (x[:, 0] % 10).astype(np.int64)
    return {s: (x, y) for s in ("train", "val", "test")}


def test_best_validation_weights_are_restored_and_tested(monkeypatch):
    """Val accuracy peaks at the 2nd eval; the returned model must hold exactly those weights."""
    torch.manual_seed(0)
    model = tiny_model()
    scripted = iter([0.2, 0.9, 0.5, 0.9])  # evals at steps 3, 6, 9, 12; tie at 12 must not replace 6
    snapshots = {}

    def fake_evaluate(m, inputs, labels, s, device):
        snapshots[len(snapshots)] = {k: v.clone() for k, v in m.state_dict().items()}
        return next(scripted)

    monkeypatch.setattr(loop, "evaluate", fake_evaluate)
    result = loop.train(model, toy_data(), settings(), torch.device("cpu"), seed=0)
    assert (result.best_val_acc, result.best_step) == (0.9, 6)
    assert [e["step"] for e in result.evals] == [3, 6, 9, 12]
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, snapshots[1][key], rtol=0, atol=0)
    assert not torch.equal(snapshots[1]["head.0.weight"], snapshots[3]["head.0.weight"])


def test_evaluation_counts_every_example_including_the_remainder():
    model = tiny_model().eval()
    x, y = toy_data(n=23)["test"]  # 23 examples, eval batch 7: 3 full batches + remainder of 2
    with torch.no_grad():
        preds = model(torch.from_numpy(x.astype(np.int64))).argmax(-1).numpy()
    expected = float((preds == y).mean())
    assert loop.evaluate(model, x, y, settings(), torch.device("cpu")) == pytest.approx(expected)
    assert np.array_equal(loop.predict(model, x, settings(), torch.device("cpu")), preds)  # every example, in order


def test_timer_excludes_warmup_steps():
    result = loop.train(tiny_model(), toy_data(), settings(max_steps=10, timing_warmup_steps=4), torch.device("cpu"), 0)
    assert result.timer.timed_steps == 6
    assert result.timer.steps_per_second() > 0


def test_a_resumed_run_excludes_the_warm_up_of_its_new_process_too(tmp_path):
    """A resumed process grows its heap again (default allocator, then reuse): its first steps are not timed."""
    calls = {"n": 0}

    def stop_after_five() -> bool:
        calls["n"] += 1
        return calls["n"] == 5

    s = settings(max_steps=12, timing_warmup_steps=3)
    with pytest.raises(loop.Preempted):
        loop.train(tiny_model(), toy_data(), s, torch.device("cpu"), 0,
                   checkpointing=loop.Checkpointing(tmp_path, stop_requested=stop_after_five))
    resumed = loop.train(tiny_model(), toy_data(), s, torch.device("cpu"), 0,
                         checkpointing=loop.Checkpointing(tmp_path))
    assert resumed.restarts == 1
    # steps 1-3 and 6-8 (the first three of each process) untimed; 4-5 and 9-12 timed
    assert (resumed.timer.excluded, resumed.timer.timed_steps) == (6, 6)
    uninterrupted = loop.train(tiny_model(), toy_data(), s, torch.device("cpu"), 0)
    assert (uninterrupted.timer.excluded, uninterrupted.timer.timed_steps) == (3, 9)


def test_a_timer_from_a_checkpoint_counts_its_excluded_steps_and_warms_up_again():
    timer = StepTimer(device=torch.device("cpu"), warmup=2)
    timer.load_state_dict({"durations": [0.1, 0.2, 0.3], "seen": 5})  # the checkpoint's timer state
    assert timer.excluded == 2
    timer.start()
    timer.stop()  # the first step of this process: warm-up again
    assert (timer.excluded, timer.timed_steps) == (3, 3)


def test_nan_loss_raises_diverged(monkeypatch):
    model = tiny_model()
    with torch.no_grad():
        model.head[2].bias.fill_(float("nan"))
    with pytest.raises(loop.Diverged, match="step 1"):
        loop.train(model, toy_data(), settings(), torch.device("cpu"), 0)


def test_on_train_step_hook_is_called_every_step():
    model = tiny_model()
    calls = []
    model.encoder.blocks[0].attn.on_train_step = calls.append
    loop.train(model, toy_data(), settings(max_steps=5), torch.device("cpu"), 0)
    assert calls == [1, 2, 3, 4, 5]


def test_runs_are_bit_identical_for_a_seed(smoke_cfg):
    a = run(smoke_cfg("seed=7", "trainer.max_steps=8", "trainer.eval_every=4"))
    b = run(smoke_cfg("seed=7", "trainer.max_steps=8", "trainer.eval_every=4", "rerun=true"))
    assert b["finished_at"] != a["finished_at"], "the second run must really run"
    assert a["evals"] == b["evals"] and a["test_acc"] == b["test_acc"] and a["config_hash"] == b["config_hash"]
    assert b["data_cache_reused"] and not a["data_cache_reused"]


@pytest.mark.parametrize("name", list_attentions())
def test_every_variant_trains_on_a_fixed_batch(name):
    torch.manual_seed(0)
    model = tiny_model(name)
    x, y = (torch.from_numpy(a) for a in toy_data(n=16)["train"])
    x = x.long()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        assert torch.isfinite(loss)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5]), losses


@pytest.mark.parametrize("name", list_attentions())
def test_every_variant_runs_the_smoke_profile(smoke_cfg, name):
    """What `python run.py attention=NAME task=listops profile=smoke` does, in-process."""
    record = run(smoke_cfg(f"attention={name}", "trainer.max_steps=6", "trainer.eval_every=3"))
    assert record["status"] == "ok", record["message"]
    assert record["attention"] == name and record["test_acc"] is not None


FTZ_PROBE = """
import sys, torch
from pathlib import Path
from tests.conftest import compose_run
from lra_bench.config.plan import plan
plan(compose_run(["profile=smoke", "trainer.flush_denormal=" + sys.argv[1]], Path(sys.argv[2])))
y = torch.full((4_000_000,), 1e-39) * 1.5  # float32 denormals, multiplied by every intra-op worker thread
print("torch._dynamo" in sys.modules, (y == 0).float().mean().item())
"""


@pytest.mark.parametrize("flush", [True, False])
def test_cpu_runs_flush_denormals_on_every_worker_thread(flush, tmp_path):
    """plan() sets the flag before torch starts its worker threads, so they all flush (a fresh process, as run.py).
    And plan() alone does not import torch._dynamo (about 2 s of start-up for a sweep's parent or a config check)."""
    import subprocess
    import sys

    from tests.conftest import ROOT

    out = subprocess.run([sys.executable, "-c", FTZ_PROBE, str(flush).lower(), str(tmp_path)], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "OMP_NUM_THREADS": "2"})
    assert out.returncode == 0, out.stderr
    dynamo_imported, flushed = out.stdout.split()[-2:]
    assert float(flushed) == (1.0 if flush else 0.0)
    assert dynamo_imported == "False", "plan() imported torch._dynamo (torch.use_deterministic_algorithms does)"


@pytest.mark.parametrize("deterministic", [True, False])
def test_a_run_trains_under_its_determinism_setting(smoke_cfg, monkeypatch, deterministic):
    """trainer.deterministic reaches torch before training (the runner sets it; plan() leaves it alone)."""
    seen = []
    real_train = loop.train

    def train_and_look(*args, **kwargs):
        seen.append(torch.are_deterministic_algorithms_enabled())
        return real_train(*args, **kwargs)

    import lra_bench.run.runner as runner

    monkeypatch.setattr(runner, "train", train_and_look)
    before = torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        torch.use_deterministic_algorithms(not deterministic)
        record = run(smoke_cfg(f"trainer.deterministic={str(deterministic).lower()}", "trainer.max_steps=2",
                               "trainer.eval_every=2"))
    finally:
        torch.use_deterministic_algorithms(before[0], warn_only=before[1])
    assert record["status"] == "ok", record["message"]
    assert seen == [deterministic]


def test_compile_setting_resolves_per_device_and_rejects_typos():
    from lra_bench.errors import ConfigError
    from lra_bench.train.step import compile_enabled

    assert compile_enabled("auto", torch.device("cuda")) and not compile_enabled("auto", torch.device("cpu"))
    assert compile_enabled(True, torch.device("cpu")) and not compile_enabled(False, torch.device("cuda"))
    base = dict(max_steps=1, batch_size=1, eval_batch_size=1, lr=1.0, schedule="constant", warmup_steps=0,
                weight_decay=0.0)
    with pytest.raises(ConfigError, match="trainer.compile='yes' is not allowed: must be one of 'auto', True, False"):
        TrainerSettings(**base, compile="yes")


@pytest.mark.slow
def test_compiled_run_is_recorded_and_learns_the_same(smoke_cfg):
    """trainer.compile=true on CPU (torch.compile with inductor's C++ backend): same evaluations, record says so."""
    overrides = ("attention=linear", "trainer.max_steps=8", "trainer.eval_every=4")
    plain = run(smoke_cfg(*overrides))
    compiled = run(smoke_cfg(*overrides, "trainer.compile=true"))
    assert compiled["status"] == "ok", compiled["message"]
    assert compiled["compiled"] is True and plain["compiled"] is False
    assert compiled["config_hash"] != plain["config_hash"]
    for a, b in zip(plain["evals"], compiled["evals"], strict=True):
        assert a["step"] == b["step"] and abs(a["val_acc"] - b["val_acc"]) <= 2 / plain["val_examples"]
