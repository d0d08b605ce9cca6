"""One efficiency-benchmark cell in its own process (so its peak memory is isolated from every other cell).

stdin: JSON {mode: "model" | "attention", config: <resolved run config>, n, batch, warmup, repeats, device}.
    model:     the trainer's own step (``train.step.train_step``: forward under its autocast, loss, backward,
               clipping, AdamW with the trainer's settings) on a synthetic batch of n tokens per sequence (every
               position real, as at the benchmark's fixed length);
    attention: forward (under the trainer's autocast) + backward of one attention layer alone (model.dim,
               model.num_heads), input (batch, n, dim).
Both modes ``torch.compile`` what they time when ``trainer.compile`` says so for the device (compilation then
happens in the first, untimed step).
stdout: one JSON line {status, median_s, q1_s, q3_s, min_s, repeats, warmup, peak_bytes, before_bytes,
        peak_delta_bytes, params, compiled}. Peak memory is taken on the first step of the fresh process, relative
        to the memory held once the model and inputs exist (so it includes activations, gradients and the optimizer
        state the step allocates); it comes before the timed steps because a CPU allocator keeps freed pages
        resident, which would hide later steps' peaks. Timing then runs with freed memory kept for reuse
        (``reuse_freed_memory``) so that no step pays page faults for memory the previous step freed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import Any

import torch

from lra_bench.config.attention import build_attention_factory
from lra_bench.config.plan import build_model, build_task
from lra_bench.config.sections import container, section_dataclass
from lra_bench.infra.memory import is_oom, peak_memory_of, reuse_freed_memory
from lra_bench.infra.timing import time_callable
from lra_bench.train.loop import make_optimizer
from lra_bench.train.settings import TrainerSettings
from lra_bench.train.step import autocast, compile_enabled, train_step


def model_step(cfg: Mapping[str, Any], n: int, batch: int, device: torch.device) -> tuple[Callable[[], None], int]:
    """The trainer's step on a synthetic batch at length ``n``; ``cfg`` a resolved run config (dict or DictConfig)."""
    cfg = container(cfg)
    task = build_task({**cfg["task"], "max_len": n})
    model = build_model(cfg["model"], cfg["attention"], task).to(device).train()
    settings = section_dataclass(TrainerSettings, cfg["trainer"], "trainer")
    if compile_enabled(settings.compile, device):
        model.compile()
    low = 0 if task.pad_id is None else 1
    shape = (batch, 2, n) if task.dual else (batch, n)
    x = torch.randint(low, task.vocab_size, shape, device=device)  # (B, N) or (B, 2, N)
    y = torch.randint(0, task.num_classes, (batch,), device=device)  # (B,)
    optimizer, _ = make_optimizer(model, settings)

    def step() -> None:
        train_step(model, optimizer, x, y, device, settings.precision, settings.grad_clip)

    return step, sum(p.numel() for p in model.parameters())


def attention_step(cfg: Mapping[str, Any], n: int, batch: int,
                   device: torch.device) -> tuple[Callable[[], None], int]:
    """One attention layer alone, forward + backward, at length ``n``; ``cfg`` as for ``model_step`` (only its
    ``attention``, ``model.dim``, ``model.num_heads``, ``trainer.precision`` and ``trainer.compile`` are read)."""
    cfg = container(cfg)
    dim, trainer = cfg["model"]["dim"], cfg["trainer"]
    layer = build_attention_factory(cfg["attention"])(dim=dim, num_heads=cfg["model"]["num_heads"], seq_len=n,
                                                      dropout=0.0).to(device).train()
    if compile_enabled(trainer["compile"], device):
        layer.compile()
    x = torch.randn(batch, n, dim, device=device, requires_grad=True)  # (B, N, C)
    mask = torch.ones(batch, n, dtype=torch.bool, device=device)  # (B, N)
    precision = trainer["precision"]

    def step() -> None:
        with autocast(device, precision):
            total = layer(x, mask).float().sum()
        total.backward()
        x.grad = None
        layer.zero_grad(set_to_none=True)

    return step, sum(p.numel() for p in layer.parameters())


def main() -> None:
    p = json.loads(sys.stdin.read())
    device = torch.device(p["device"])
    torch.manual_seed(0)
    cfg = p["config"]
    make = model_step if p["mode"] == "model" else attention_step
    step, params = make(cfg, p["n"], p["batch"], device)
    compiled = compile_enabled(cfg["trainer"]["compile"], device)
    try:
        memory = peak_memory_of(step, device)  # first, with the default allocator (see reuse_freed_memory)
        reused = reuse_freed_memory() if device.type == "cpu" else False
        timing = time_callable(step, device, warmup=p["warmup"], repeats=p["repeats"])
    except Exception as e:  # noqa: BLE001 - reported to the parent as a cell status
        status = "oom" if is_oom(e) else "failed"
        print(json.dumps({"status": status, "message": f"{type(e).__name__}: {str(e)[:500]}", "params": params,
                          "compiled": compiled}))
        return
    print(json.dumps({"status": "ok", **asdict(timing), **memory, "params": params, "allocator_reuse": reused,
                      "compiled": compiled}))


if __name__ == "__main__":
    main()
