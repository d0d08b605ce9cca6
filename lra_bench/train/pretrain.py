"""Self-pretraining, the phase before the fine-tune: masked-token or next-token prediction on training inputs only.

Amos, Berant & Gupta 2024 ("Never Train from Scratch", https://arxiv.org/abs/2310.02980): the encoder first learns
to denoise the task's own training sequences, then fine-tunes on the labels. ``pretrain`` never receives a label:
it takes the training and validation *inputs* (``tests/test_pretraining.py`` checks that shuffled labels give
bit-identical weights).

* ``mlm``: in every sequence each real token is masked with probability ``mask_rate`` (drawn from a stream that is
  a pure function of (seed, step), so a resumed run masks what an uninterrupted one would), its embedding replaced by
  the learned mask embedding, and the head predicts the original token at the masked positions only.
* ``causal``: the head at position t predicts token t + 1 (every real target), for a causal mixer.
* ``loss: ce``: cross-entropy over the vocabulary, with the masked-token accuracy; ``loss: l1``: the mean absolute
  error of the grey value scaled to [0, 1] (the not-from-scratch configs' choice for pixels: it keeps the order of
  the grey levels, which cross-entropy over 256 classes ignores), reported in grey levels.

Like the fine-tune's loop: AdamW and LRA's schedules (``make_optimizer``), the trainer's clipping and precision,
steps timed without evaluation, checkpoints every ``trainer.checkpoint_every`` steps and when a stop is requested
(SIGTERM, SIGUSR2, Ctrl-C), bit-exact resumes on CPU. The weights at the last step are the result (the objective
keeps improving over a run; the validation curve is kept in the record).
"""

from __future__ import annotations

import copy
import logging
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lra_bench.data.batches import eval_batches, train_batches
from lra_bench.infra.memory import AllocatorReuse, peak_memory_bytes, reset_peak_memory
from lra_bench.infra.progress import TRAIN_FORMAT, live_bar
from lra_bench.infra.timing import StepTimer
from lra_bench.train import checkpoint
from lra_bench.train.loop import Checkpointing, finish_step, make_optimizer
from lra_bench.train.settings import PretrainSettings, TrainerSettings
from lra_bench.train.step import apply_gradients, autocast

log = logging.getLogger(__name__)

MASK_STREAM = 0x5E1F  # the masking's random stream: default_rng([seed, MASK_STREAM, step])
VAL_STEP = -1  # the stream's "step" of the fixed validation masks


def mask_positions(ids: np.ndarray, pad_id: int | None, rate: float, seed: int, step: int) -> np.ndarray:
    """Bool of ``ids``' shape: each real token (``ids != pad_id``) masked with probability ``rate``, drawn from the
    stream (seed, MASK_STREAM, step)."""
    draws = np.random.default_rng([seed, MASK_STREAM, step + 1]).random(ids.shape) < rate
    return draws if pad_id is None else draws & (ids != pad_id)


@dataclass
class Objective:
    """What one pretraining batch is scored on: the prediction and target at every selected position."""

    settings: PretrainSettings
    pad_id: int | None
    vocab_size: int

    def predictions(self, model: nn.Module, ids: Tensor, masked: Tensor | None) -> tuple[Tensor, Tensor, Tensor]:
        """(predictions, targets, selected) over B' single documents: (B', L', V) or (B', L'), (B', L') ids and
        (B', L') bool. mlm: every position, selected where masked; causal: position t against token t + 1."""
        out = model(ids, masked)  # (B', L, V) or (B', L)
        single = model.single(ids)  # (B', L)
        real = torch.ones_like(single, dtype=torch.bool) if self.pad_id is None else single != self.pad_id
        if self.settings.name == "mlm":
            return out, single, model.single(masked)
        return out[:, :-1], single[:, 1:], real[:, 1:]  # next token: the last position predicts nothing

    def score(self, out: Tensor, targets: Tensor, selected: Tensor) -> tuple[Tensor, int, float]:
        """(mean loss over the selected positions, how many, and the sum of hits (ce) or of absolute errors in
        grey levels (l1) there)."""
        n = int(selected.sum())
        if self.settings.loss == "ce":
            logits = out[selected].float()  # (n, V)
            loss = F.cross_entropy(logits, targets[selected]) if n else logits.sum() * 0.0
            return loss, n, float((logits.detach().argmax(-1) == targets[selected]).sum())
        scale = float(self.vocab_size - 1)  # grey value g in [0, 255] -> g / 255
        error = out[selected].float() - targets[selected].float() / scale  # (n,)
        loss = error.abs().mean() if n else error.sum() * 0.0
        return loss, n, float(error.detach().abs().sum()) * scale

    def metric_name(self) -> str:
        return "acc" if self.settings.loss == "ce" else "mae"  # accuracy, or mean absolute error in grey levels


@dataclass
class PretrainResult:
    """The pretraining's measurements, as the record keeps them (``summary``)."""

    steps: int
    evals: list[dict[str, float]]
    train: dict[str, float]  # the last logged window: loss and acc / mae on the training batches
    timer: StepTimer
    loop_seconds: float
    val_eval_seconds: float
    restarts: int
    peak_memory_bytes: int | None
    memory_reset: bool
    extra: dict[str, object] = field(default_factory=dict)

    def summary(self) -> dict[str, object]:
        last = self.evals[-1] if self.evals else {}
        return {"steps": self.steps, "train_loss": self.train.get("loss"), "val_loss": last.get("val_loss"),
                "val_acc": last.get("val_acc"), "val_mae": last.get("val_mae"), "evals": self.evals,
                "steps_per_s": self.timer.steps_per_second(), "timed_steps": self.timer.timed_steps,
                "warmup_steps_excluded": self.timer.excluded,
                "timed_seconds": self.timer.timed_seconds, "loop_s": self.loop_seconds,
                "val_eval_s": self.val_eval_seconds, "restarts": self.restarts,
                "peak_memory_bytes": self.peak_memory_bytes, "memory_reset": self.memory_reset, **self.extra}


@torch.no_grad()
def evaluate(model: nn.Module, objective: Objective, inputs: np.ndarray, masks: np.ndarray | None,
             batch_size: int, device: torch.device, precision: str) -> dict[str, float]:
    """The objective over every validation sequence (fixed masks): mean loss per selected position and its metric."""
    was_training = model.training
    model.eval()
    total, count, metric = 0.0, 0, 0.0
    positions = np.arange(len(inputs))
    for x, index in eval_batches(inputs, positions, batch_size):
        masked = None if masks is None else torch.from_numpy(masks[index.numpy()]).to(device)
        with autocast(device, precision):
            out, targets, selected = objective.predictions(model, x.to(device), masked)
        loss, n, m = objective.score(out, targets, selected)
        total, count, metric = total + float(loss) * n, count + n, metric + m
    model.train(was_training)
    name = objective.metric_name()
    return {"val_loss": total / max(count, 1), f"val_{name}": metric / max(count, 1)}


def pretrain(model: nn.Module, inputs: dict[str, np.ndarray], settings: PretrainSettings,
             trainer: TrainerSettings, pad_id: int | None, device: torch.device, seed: int,
             checkpointing: Checkpointing | None = None) -> PretrainResult:
    """Pretrain ``model`` (a ``lra_bench.models.pretraining.Pretrainer``: its encoder in place) on
    ``inputs["train"]``, scored on ``inputs["val"]``; no labels.

    With ``checkpointing.directory`` set it resumes from the newest valid checkpoint there and writes one every
    ``checkpointing.every`` steps and when a stop is requested (``Preempted``); a NaN loss raises ``Diverged``."""
    s = settings.optimization(trainer)
    ckpt = checkpointing or Checkpointing()
    objective = Objective(settings, pad_id, model.vocab_size)
    metric = objective.metric_name()
    optimizer, scheduler = make_optimizer(model, s)
    hooks = [m for m in model.modules() if callable(getattr(m, "on_train_step", None))]  # feature redraws
    timer = StepTimer(device=device, warmup=s.timing_warmup_steps)
    evals: list[dict[str, float]] = []
    running = {"loss": 0.0, "metric": 0.0, "seen": 0}
    last_window: dict[str, float] = {}
    start, peak_before, restarts = 0, None, 0
    seconds = {"loop": 0.0, "val_eval": 0.0}
    state = checkpoint.load(ckpt.directory) if ckpt.directory is not None else None
    if state is not None and state.get("phase") == "pretrain":
        initial, rng = copy.deepcopy(model.state_dict()), checkpoint.rng_state()
        try:
            model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
            scheduler.load_state_dict(state["scheduler"])
            checkpoint.set_rng_state(state["rng"])
            timer.load_state_dict(state["timer"])
            start, evals, running, last_window = state["step"], state["evals"], state["running"], state["window"]
            peak_before, seconds, restarts = state["peak_memory_bytes"], state["seconds"], state["restarts"] + 1
        except Exception as e:  # noqa: BLE001 - it verified but does not fit this code: start over, not fail forever
            checkpoint.set_aside(ckpt.directory, f"{type(e).__name__}: {str(e)[:500]}")
            model.load_state_dict(initial)
            checkpoint.set_rng_state(rng)
            return pretrain(model, inputs, settings, trainer, pad_id, device, seed, checkpointing)

    def save_checkpoint(step: int) -> None:
        if ckpt.directory is None:
            return
        checkpoint.save(ckpt.directory, {
            "phase": "pretrain", "step": step, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "rng": checkpoint.rng_state(), "evals": evals,
            "running": running, "window": last_window, "timer": timer.state_dict(),
            "seconds": {**seconds, "loop": seconds["loop"] + time.perf_counter() - t_loop},
            "peak_memory_bytes": max(filter(None, [peak_before, peak_memory_bytes(device)]), default=None),
            "restarts": restarts}, identity=ckpt.identity)

    train_x = inputs["train"]
    val_masks = None
    if settings.name == "mlm":
        val_masks = mask_positions(inputs["val"], pad_id, settings.mask_rate, seed, VAL_STEP)
    batches = train_batches(train_x, np.zeros(len(train_x), np.int64), s.batch_size, seed, start_step=start)
    model.train()
    memory_reset = reset_peak_memory(device)
    t_loop = time.perf_counter()
    with AllocatorReuse(device) as allocator, live_bar(s.max_steps, "pretrain", " steps", initial=start,
                                                       bar_format=TRAIN_FORMAT) as bar:
        for step in range(start + 1, s.max_steps + 1):
            timer.start()
            x, _ = next(batches)  # the zeros stand in for labels: the batches' order only
            masked = None
            if settings.name == "mlm":
                masked = torch.from_numpy(mask_positions(x.numpy(), pad_id, settings.mask_rate, seed, step))
                masked = masked.to(device, non_blocking=True)
            x = x.to(device, non_blocking=True)
            with autocast(device, s.precision):
                out, targets, selected = objective.predictions(model, x, masked)
            loss, n, hits = objective.score(out, targets, selected)
            apply_gradients(model, optimizer, loss, s.grad_clip)
            scheduler.step()
            loss_value = finish_step(step, loss, hooks, timer, allocator)  # the benchmark's allocator too
            running["loss"] += loss_value * n
            running["metric"] += hits
            running["seen"] += n
            bar.update(1)
            if step % s.log_every == 0 or step == s.max_steps:
                seen = max(running["seen"], 1)
                last_window = {"loss": running["loss"] / seen, metric: running["metric"] / seen}
                sps = timer.steps_per_second()
                log.info("pretrain step %d loss %.4f %s %.4f lr %.2e steps/s %s", step, last_window["loss"], metric,
                         last_window[metric], scheduler.get_last_lr()[0], f"{sps:.2f}" if sps else "n/a")
                running = {"loss": 0.0, "metric": 0.0, "seen": 0}
            if step % s.eval_every == 0 or step == s.max_steps:
                t_eval = time.perf_counter()
                scores = evaluate(model, objective, inputs["val"], val_masks, s.eval_batch_size, device, s.precision)
                seconds["val_eval"] += time.perf_counter() - t_eval
                evals.append({"step": step, **scores})
                log.info("pretrain step %d val loss %.4f val %s %.4f", step, scores["val_loss"], metric,
                         scores[f"val_{metric}"])
            ckpt.after_step(step, s.max_steps, save_checkpoint, "pretraining")
    if start < s.max_steps:  # the finished state: a stop before the encoder is cached resumes from here
        save_checkpoint(s.max_steps)
    seconds["loop"] += time.perf_counter() - t_loop
    peak = max(filter(None, [peak_before, peak_memory_bytes(device)]), default=None)
    return PretrainResult(steps=s.max_steps, evals=evals, train=last_window, timer=timer,
                          loop_seconds=seconds["loop"], val_eval_seconds=seconds["val_eval"], restarts=restarts,
                          peak_memory_bytes=peak, memory_reset=memory_reset)
