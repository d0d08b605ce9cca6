"""Self-pretraining as a phase of a run (``pretrain=mlm|causal``): labels never reach it, the fine-tune starts from
the pretrained encoder exactly (and otherwise as the same run from scratch), the objective learns, a resume inside
either phase is bit-exact, the pretrained encoder is cached and shared, and today's records keep their identity."""

from __future__ import annotations

import json
import math
import signal
from pathlib import Path

import numpy as np
import pytest
import torch

from lra_bench.config.plan import plan
from lra_bench.config.sections import config_hash
from lra_bench.data.listops.task import ListOpsTask
from lra_bench.errors import CheckpointMismatch, ConfigError
from lra_bench.run import runner
from lra_bench.run.runner import run
from lra_bench.store.records import protocol_of, read_records, run_wall_seconds, semantic_hash
from lra_bench.train import checkpoint
from lra_bench.train.loop import Checkpointing, Preempted
from lra_bench.train.pretrain import Objective, mask_positions, pretrain
from tests.conftest import ROOT, compose_run
from tests.test_fault_classes import preempt_at
from tests.test_faults import start, wait_for_checkpoint

SHORT = ["profile=smoke", "trainer.max_steps=8", "trainer.eval_every=4", "pretrain=mlm", "pretrain.max_steps=10",
         "pretrain.eval_every=5"]


def tensors_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def cached_encoder(cfg) -> dict:
    state = checkpoint.load(plan(cfg).pretrained_dir)
    assert state is not None, "the pretrained encoder must be cached"
    return state["encoder"]


def test_labels_never_reach_pretraining(tmp_path, monkeypatch):
    """Shuffled labels (every split) give bit-identical pretrained weights; the fine-tune does see them."""
    reference = run(compose_run(SHORT, tmp_path / "a"))
    original = ListOpsTask.load

    def shuffled(self, cache_dir):
        data = original(self, cache_dir)
        for split, y in data.labels.items():
            data.labels[split] = np.random.default_rng(7).permutation(y)
        return data

    monkeypatch.setattr(ListOpsTask, "load", shuffled)
    other = run(compose_run(SHORT, tmp_path / "b"))
    assert tensors_equal(cached_encoder(compose_run(SHORT, tmp_path / "a")),
                         cached_encoder(compose_run(SHORT, tmp_path / "b")))
    assert other["pretraining"]["evals"] == reference["pretraining"]["evals"]
    assert other["evals"] != reference["evals"] or other["test_acc"] != reference["test_acc"], \
        "the fine-tune must see the shuffled labels (else this test proves nothing)"


def test_fine_tune_starts_from_the_pretrained_encoder_and_otherwise_as_from_scratch(tmp_path, monkeypatch):
    """At the fine-tune's first step: the encoder is the cached pretrained one, bit for bit; the classifier head and
    the random stream (dropout, initialisation order) are those of the same run from scratch."""
    seen = {}
    train = runner.train

    def spy(model, *args, **kwargs):
        seen[len(seen)] = ({k: v.detach().clone() for k, v in model.state_dict().items()}, torch.get_rng_state())
        return train(model, *args, **kwargs)

    monkeypatch.setattr(runner, "train", spy)
    pretrained_cfg = compose_run(SHORT, tmp_path)
    run(pretrained_cfg)
    run(compose_run(SHORT[:3], tmp_path))  # the same run from scratch
    (pre_state, pre_rng), (scratch_state, scratch_rng) = seen[0], seen[1]
    encoder = cached_encoder(pretrained_cfg)
    assert tensors_equal({k.removeprefix("encoder."): v for k, v in pre_state.items() if k.startswith("encoder.")},
                         encoder)
    assert not tensors_equal({k: v for k, v in pre_state.items() if k.startswith("encoder.")},
                             {k: v for k, v in scratch_state.items() if k.startswith("encoder.")})
    head = [k for k in pre_state if k.startswith("head.")]
    assert head and all(torch.equal(pre_state[k], scratch_state[k]) for k in head)
    assert torch.equal(pre_rng, scratch_rng)


def test_the_record_carries_the_protocol_and_the_pretraining(tmp_path):
    rec = run(compose_run(SHORT, tmp_path))
    pre = rec["pretraining"]
    assert rec["protocol"] == "mlm" == protocol_of(rec["config"])
    assert pre["objective"] == "mlm" and pre["loss"] == "ce" and pre["mask_rate"] == 0.1 and pre["steps"] == 10
    assert [e["step"] for e in pre["evals"]] == [5, 10] and 0 <= pre["val_acc"] <= 1 and pre["val_loss"] > 0
    assert pre["steps_per_s"] > 0 and pre["loop_s"] > 0 and pre["reused"] is False
    assert rec["phases"]["pretrain_s"] == pre["loop_s"]
    assert rec["phases"]["train_total_s"] == pytest.approx(pre["loop_s"] + rec["phases"]["train_loop_s"])
    scratch = run(compose_run(SHORT[:3], tmp_path))
    assert scratch["protocol"] == "scratch" and scratch["pretraining"] is None


def test_fine_tunes_that_share_the_pretraining_reuse_the_cached_encoder(tmp_path, monkeypatch):
    """A sweep of the fine-tune's learning rate with the pretraining's pinned: one pretraining, reused after. The
    time probe counts the pretraining's steps (at its batch) only when it will run."""
    from lra_bench.train import estimate

    probed = []
    real = estimate.estimate_training
    monkeypatch.setattr(estimate, "estimate_training", lambda *a: probed.append(a[4:]) or real(*a))
    first = run(compose_run([*SHORT, "pretrain.lr=0.001", "trainer.lr=0.001", "pretrain.batch_size=3"], tmp_path))
    second = run(compose_run([*SHORT, "pretrain.lr=0.001", "trainer.lr=0.003", "pretrain.batch_size=3"], tmp_path))
    assert probed == [(8, (10, 3)), (8, (0, 0))]
    assert (first["pretraining"]["reused"], second["pretraining"]["reused"]) == (False, True)
    assert second["pretraining"]["evals"] == first["pretraining"]["evals"]
    assert second["phases"]["pretrain_s"] == first["phases"]["pretrain_s"], "the cost is the pretraining's own"
    third = run(compose_run([*SHORT, "pretrain.lr=0.002", "trainer.lr=0.003"], tmp_path))
    assert third["pretraining"]["reused"] is False, "another pretraining config is another encoder"


def test_only_the_run_that_made_the_encoder_is_charged_for_it(tmp_path):
    """The marker that a run made the cached encoder lives in its checkpoint folder until its record is written; a
    rerun of the finished run loads the cache and is not charged (its fine-tune resuming after its own pretraining
    is: the slow kill test in either phase)."""
    cfg = compose_run(SHORT, tmp_path)
    first = run(cfg)
    assert first["pretraining"]["reused"] is False
    assert not (plan(cfg).checkpoint_dir / runner.PRETRAINED_HERE).exists(), "cleared with the run's checkpoints"
    again = run(compose_run([*SHORT, "rerun=true"], tmp_path))
    assert again["pretraining"]["reused"] is True and again["phases"]["pretrain_reused"] is True
    assert again["pretraining"]["evals"] == first["pretraining"]["evals"]
    for record in plan(cfg).run_dir.rglob("record.json"):
        record.unlink()  # no finished record: the marker is a first process's, killed after it cached the encoder
    marker = plan(cfg).checkpoint_dir / runner.PRETRAINED_HERE
    marker.parent.mkdir(parents=True)
    marker.write_text(json.dumps({"cache_key": plan(cfg).pretrain.cache_key}))
    third = run(cfg)
    assert third["pretraining"]["reused"] is False and not marker.exists()


def test_a_cached_encoder_that_no_longer_fits_the_model_is_set_aside_and_pretrained_again(tmp_path):
    cfg = compose_run(SHORT, tmp_path)
    first = run(cfg)
    folder = plan(cfg).pretrained_dir
    state = checkpoint.load(folder)
    state["encoder"] = {k + ".renamed": v for k, v in state["encoder"].items()}  # as after a change of the code
    checkpoint.save(folder, state)
    again = run(compose_run([*SHORT, "rerun=true"], tmp_path))
    assert again["pretraining"]["reused"] is False and again["status"] == "ok"
    assert again["pretraining"]["evals"] == first["pretraining"]["evals"]
    assert list(folder.parent.glob(f"{folder.name}.unusable-*")), "the unusable encoder is kept aside, not deleted"


def unigram_entropy(inputs: np.ndarray, pad_id: int) -> float:
    counts = np.bincount(inputs[inputs != pad_id].ravel())
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())  # nats, as cross-entropy


def test_masked_token_loss_falls_below_the_unigram_entropy(tmp_path):
    """On smoke ListOps the masked-token cross-entropy on the validation inputs ends below the entropy of the
    training tokens' unigram distribution: the encoder uses the context, not only token frequencies."""
    cfg = compose_run(["profile=smoke", "pretrain=mlm", "pretrain.mask_rate=0.15", "pretrain.max_steps=150",
                       "pretrain.lr=0.003", "pretrain.eval_every=150"], tmp_path)
    p = plan(cfg)
    data = p.task.load(p.cache_dir)
    entropy = unigram_entropy(data.inputs["train"], p.task.pad_id)
    result = pretrain(p.pretrain.model, {"train": data.inputs["train"], "val": data.inputs["val"]},
                      p.pretrain.settings, p.trainer, p.task.pad_id, torch.device("cpu"), p.seed)
    loss = result.evals[-1]["val_loss"]
    assert loss < entropy - 0.1, f"masked-token loss {loss:.3f} nats, unigram entropy {entropy:.3f}"


def pretraining_parts(tmp_path: Path, stop_after: int | None, overrides: tuple[str, ...] = ()):
    """Pretrain the smoke config, optionally stopped (as by SIGTERM) after ``stop_after`` steps, then resumed."""
    cfg = compose_run(["profile=smoke", "pretrain=mlm", "pretrain.max_steps=20", "pretrain.eval_every=5",
                       "trainer.checkpoint_every=0", *overrides], tmp_path)
    p = plan(cfg)
    data = p.task.load(p.cache_dir)
    inputs = {"train": data.inputs["train"], "val": data.inputs["val"]}
    calls = {"n": 0}

    def stop() -> bool:
        calls["n"] += 1
        return stop_after is not None and calls["n"] == stop_after

    ckpt = Checkpointing(tmp_path / "ck", every=0, stop_requested=stop)
    if stop_after is not None:
        with pytest.raises(Preempted, match=f"at pretraining step {stop_after};"):
            pretrain(p.pretrain.model, inputs, p.pretrain.settings, p.trainer, p.task.pad_id, p.device, p.seed, ckpt)
        p = plan(cfg)  # a fresh process: the model rebuilt from the seed
    result = pretrain(p.pretrain.model, inputs, p.pretrain.settings, p.trainer, p.task.pad_id, p.device, p.seed,
                      ckpt)
    return p.pretrain.model.state_dict(), result


@pytest.mark.parametrize("overrides", [(), ("attention=s4d", "attention.bidirectional=false", "pretrain=causal")])
def test_a_stopped_pretraining_resumes_bit_exact(tmp_path, overrides):
    whole, reference = pretraining_parts(tmp_path / "whole", None, overrides)
    resumed, result = pretraining_parts(tmp_path / "parts", 7, overrides)
    assert tensors_equal(whole, resumed)
    assert result.evals == reference.evals and result.restarts == 1 and reference.restarts == 0


def test_masks_hit_real_tokens_only_at_the_rate_and_depend_on_seed_and_step_alone():
    ids = np.random.default_rng(0).integers(1, 20, size=(64, 100))
    ids[:, 70:] = 0
    m = mask_positions(ids, 0, 0.3, seed=3, step=5)
    assert not m[:, 70:].any() and abs(m[:, :70].mean() - 0.3) < 0.02
    assert np.array_equal(m, mask_positions(ids, 0, 0.3, seed=3, step=5))
    assert not np.array_equal(m, mask_positions(ids, 0, 0.3, seed=3, step=6))
    assert not np.array_equal(m, mask_positions(ids, 0, 0.3, seed=4, step=5))


def test_l1_scores_the_grey_value_and_reports_the_error_in_grey_levels(smoke_cfg):
    p = plan(smoke_cfg("task=image", "task.source=synthetic", "pretrain=mlm"))
    objective = Objective(p.pretrain.settings, p.task.pad_id, p.task.vocab_size)
    assert p.pretrain.settings.loss == "l1" and p.pretrain.settings.mask_rate == 0.5
    targets = torch.tensor([[0, 255, 100, 50]])
    out = torch.tensor([[0.0, 1.0, 110 / 255, 0.9]])
    selected = torch.tensor([[True, True, True, False]])
    loss, n, error = objective.score(out, targets, selected)
    assert n == 3 and float(loss) == pytest.approx(10 / 255 / 3) and error == pytest.approx(10.0, abs=1e-3)


def test_next_token_prediction_needs_a_causal_mixer_and_predicts_the_next_token(smoke_cfg):
    with pytest.raises(ConfigError, match="needs a causal mixer; attention=softmax sees both directions"):
        plan(smoke_cfg("pretrain=causal"))
    with pytest.raises(ConfigError, match="attention=s4d sees both directions"):
        plan(smoke_cfg("attention=s4d", "pretrain=causal"))
    p = plan(smoke_cfg("attention=s4d", "attention.bidirectional=false", "pretrain=causal"))
    model = p.pretrain.model.eval()
    ids = torch.randint(1, 10, (2, 64))
    objective = Objective(p.pretrain.settings, p.task.pad_id, p.task.vocab_size)
    out, targets, selected = objective.predictions(model, ids, None)
    assert out.shape[:2] == targets.shape == (2, 63) and torch.equal(targets, ids[:, 1:])
    changed = ids.clone()
    changed[:, 40:] = torch.randint(1, 10, (2, 24))  # the future of position 39
    with torch.no_grad():
        torch.testing.assert_close(model(changed)[:, :40], model(ids)[:, :40], rtol=0, atol=1e-6)


BLOCKS = {"transformer": [], "ssm": ["model=ssm", "attention=lru", "~model.num_heads", "~model.mlp_dim"],
          "mega": ["model=mega", "attention=mega", "~model.num_heads", "~model.mlp_dim"]}


@pytest.mark.parametrize("block", list(BLOCKS))
def test_the_token_head_reads_every_token_of_every_block_and_both_documents(smoke_cfg, block):
    p = plan(smoke_cfg("task=retrieval", "task.source=synthetic", "pretrain=mlm", *BLOCKS[block]))
    ids = torch.randint(1, 50, (3, 2, p.task.max_len))
    masked = torch.zeros_like(ids, dtype=torch.bool)
    masked[:, :, 5] = True
    out = p.pretrain.model.eval()(ids, masked)
    assert out.shape == (6, p.task.max_len, p.task.vocab_size), "(2B, L, V): both documents of every pair"
    assert "head.weight" not in {k.removeprefix("encoder.") for k in p.model.state_dict()}, \
        "the token head and the mask embedding belong to the pretrainer, not to the classifier"
    assert {k for k, _ in p.pretrain.model.named_parameters() if not k.startswith("encoder.")} == \
        {"mask", "head.weight", "head.bias"}


def test_pretrain_none_keeps_the_hash_of_records_made_before_the_group_existed(smoke_cfg):
    cfg = smoke_cfg()
    config = plan(cfg).config
    assert config["pretrain"] == {"name": "none"}
    assert config_hash(config) == semantic_hash({k: v for k, v in config.items() if k != "pretrain"})
    committed = json.loads(next((ROOT / "results/cpu_ssm/runs/listops/softmax").glob("cpu-seed0-*/record.json"))
                           .read_text())
    assert "pretrain" not in committed["config"] and protocol_of(committed["config"]) == "scratch"
    remade = compose_run(["attention=softmax", "task=listops", "profile=cpu", "seed=0"], Path("/unused"))
    assert config_hash(remade) == committed["config_hash"], "a committed scratch record must keep its identity"


def test_a_pretraining_checkpoint_of_other_code_is_refused_unless_forced(tmp_path, monkeypatch, caplog):
    """The pretraining's checkpoints carry the run's identity like the fine-tune's (issue 40): a run stopped inside
    its pretraining and resumed by other code is refused in one line; resume=force resumes it."""
    cfg = compose_run(SHORT, tmp_path)
    preempt_at(monkeypatch, 4)  # a stop requested after a few pretraining steps (of 10)
    with pytest.raises(Preempted):
        run(cfg)
    monkeypatch.undo()
    meta_path = plan(cfg).checkpoint_dir / runner.PRETRAIN_DIR / "ckpt.json"
    meta = json.loads(meta_path.read_text())
    assert 0 < meta["step"] < 10 and meta["identity"]["config_hash"] == plan(cfg).config_hash
    meta["identity"]["code_version"] = "0" * 16  # as if written by another lra_bench
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(CheckpointMismatch, match="another code_version"):
        run(compose_run(SHORT, tmp_path))
    caplog.set_level("INFO", logger="lra_bench")
    forced = run(compose_run([*SHORT, "resume=force"], tmp_path))
    assert forced["status"] == "ok" and forced["pretraining"]["restarts"] == 1 and "resume=force" in caplog.text


def test_bad_pretraining_settings_fail_before_any_data(smoke_cfg):
    with pytest.raises(ConfigError, match=r"pretrain.mask_rate=1.0 is out of range: allowed \(0, 1\)"):
        plan(smoke_cfg("pretrain=mlm", "pretrain.mask_rate=1.0"))
    with pytest.raises(ConfigError, match="pretrain=mlm needs pretrain.mask_rate"):
        plan(smoke_cfg("pretrain=mlm", "pretrain.mask_rate=null"))
    with pytest.raises(ConfigError, match="pretrain.lr=-1.0 is out of range"):
        plan(smoke_cfg("pretrain=mlm", "pretrain.lr=-1.0"))
    with pytest.raises(ConfigError, match="loss=l1 regresses a grey value"):
        plan(smoke_cfg("pretrain=mlm", "pretrain.loss=l1"))
    with pytest.raises(ConfigError, match="pretrain.max_steps=0 is out of range"):
        plan(smoke_cfg("pretrain=mlm", "pretrain.max_steps=0"))


# -- a whole run stopped inside either phase, in its own process (as a cluster preempts it) --------------------

LONG = ["profile=smoke", "pretrain=mlm", "pretrain.max_steps=200", "pretrain.eval_every=50", "trainer.max_steps=200",
        "trainer.eval_every=50", "trainer.checkpoint_every=20", "task.generator.num_train=1024"]
SAME = ("status", "best_val_acc", "best_step", "test_acc", "evals", "config_hash", "dataset_fingerprint")


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return run(compose_run(LONG, tmp_path_factory.mktemp("reference")))


@pytest.mark.slow
@pytest.mark.parametrize(("phase", "sig", "code"), [("pretrain", signal.SIGTERM, 75),
                                                    ("fine-tune", signal.SIGKILL, -signal.SIGKILL)])
def test_a_run_stopped_in_either_phase_resumes_bit_exact(tmp_path, reference, phase, sig, code):
    proc = start(tmp_path, *LONG)
    if phase == "pretrain":
        wait_for_checkpoint(tmp_path, 40, proc, timeout=300, where=runner.PRETRAIN_DIR)
    else:  # the fine-tune's checkpoints are in the run's own folder, named after it
        own = plan(compose_run(LONG, tmp_path)).checkpoint_dir.name
        wait_for_checkpoint(tmp_path, 40, proc, timeout=300, where=own)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == code, out[-2000:]
    if phase == "pretrain":
        assert "at pretraining step" in out
    assert not list((tmp_path / "runs").rglob("record.json"))
    resumed = start(tmp_path, *LONG)
    out, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out[-3000:]
    assert "resuming from" in out
    (rec,) = read_records(tmp_path / "runs")
    for key in SAME:
        assert rec[key] == reference[key], key
    assert rec["pretraining"]["evals"] == reference["pretraining"]["evals"]
    assert rec["pretraining"]["restarts"] == (1 if phase == "pretrain" else 0)
    # a fine-tune resumes with the cached encoder, but this run made it: its cost is the run's (not reused)
    assert rec["pretraining"]["reused"] is False and rec["phases"]["pretrain_reused"] is False
    assert run_wall_seconds(rec) >= rec["pretraining"]["loop_s"] + rec["phases"]["train_loop_s"]
    assert rec["restarts"] == (1 if phase == "fine-tune" else 0)
    assert not list((tmp_path / "cache" / "checkpoints").rglob("ckpt.pt")), "checkpoints kept after the record"
    assert math.isfinite(rec["test_acc"])
