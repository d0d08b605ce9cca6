"""One efficiency-benchmark cell in its own process (so its peak memory is isolated from every other cell).

stdin, first line: JSON {mode: "model" | "attention" | "peer", config: <resolved run config> (peer: the pair's
cell), n, batch, warmup, repeats, device, serve}.
    model:     the trainer's own step (``train.step.train_step``: forward under its autocast, loss, backward,
               clipping, AdamW with the trainer's settings) on a synthetic batch of n tokens per sequence (every
               position real, as at the benchmark's fixed length);
    attention: forward (under the trainer's autocast) + backward of one attention layer alone (model.dim,
               model.num_heads), input (batch, n, dim);
    peer:      forward + backward of one side of a ``bench.peers`` pair (ours or the package's layer).
The model and attention modes ``torch.compile`` what they time when ``trainer.compile`` says so for the device
(compilation then happens in the first, untimed step).

Peak memory is taken on the first step of the fresh process, relative to the memory held once the model and inputs
exist (so it includes activations, gradients and the optimizer state the step allocates); it comes before the timed
steps because a CPU allocator keeps freed pages resident, which would hide later steps' peaks. In peer mode on a CPU a
second, profiled step adds ``tensor_peak_bytes`` (``infra.memory.tensor_peak_of``): the exact peak of tensor memory
the step allocates, which does not move with the C allocator's caching as the resident set does. Timing then runs with
freed memory kept for reuse (``reuse_freed_memory``) so that no step pays page faults for memory the previous step
freed. Every timed interval also counts the cores other processes used meanwhile (``infra.machine``).

One-shot (``serve`` false): memory, ``warmup`` untimed steps, ``repeats`` timed ones; stdout one JSON line {status,
median_s, q1_s, q3_s, min_s, repeats, warmup, durations, peak_bytes, before_bytes, peak_delta_bytes, params,
compiled, allocator_reuse, machine}.

Served (``serve`` true, ``bench.interleaved``): after the memory step the process prints {"status": "ready", memory
fields, params, compiled, allocator_reuse}, hands its freed memory back and waits; each further stdin line
{"warmup": w, "repeats": k} runs w untimed and k timed steps and prints {"status": "timed", "durations": [...]},
then parks again; {"finish": true} (or the end of stdin) prints {"status": "finished", "machine": ...} and exits.
This lets ``bench.interleaved`` time several cells in turns (A B C A B C ...) with one process each.
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
from lra_bench.infra.machine import CoreUse
from lra_bench.infra.memory import is_oom, peak_memory_of, release_freed_memory, reuse_freed_memory, tensor_peak_of
from lra_bench.infra.timing import summarize, timed_runs
from lra_bench.train.loop import make_optimizer
from lra_bench.train.settings import TrainerSettings
from lra_bench.train.step import autocast, checkpoint_blocks, compile_enabled, train_step


def model_step(cfg: Mapping[str, Any], n: int, batch: int, device: torch.device) -> tuple[Callable[[], None], int]:
    """The trainer's step on a synthetic batch at length ``n``; ``cfg`` a resolved run config (dict or DictConfig)."""
    cfg = container(cfg)
    task = build_task({**cfg["task"], "max_len": n})
    model = build_model(cfg["model"], cfg["attention"], task).to(device).train()
    settings = section_dataclass(TrainerSettings, cfg["trainer"], "trainer")
    checkpoint_blocks(model, settings.activation_checkpointing)
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
    ``attention``, ``model.dim``, ``model.num_heads``, ``trainer.precision`` and ``trainer.compile`` are read; a
    model without heads, ``model=ssm``, gives its mixers one)."""
    cfg = container(cfg)
    dim, trainer = cfg["model"]["dim"], cfg["trainer"]
    heads = cfg["model"].get("num_heads", 1)
    layer = build_attention_factory(cfg["attention"])(dim=dim, num_heads=heads, seq_len=n,
                                                      dropout=0.0).to(device).train()
    if compile_enabled(trainer["compile"], device):
        layer.compile()
    x = torch.randn(batch, n, dim, device=device, requires_grad=True)  # (B, N, C)
    mask = torch.ones(batch, n, dtype=torch.bool, device=device)  # (B, N)
    return layer_step(layer, x, mask, device, trainer["precision"]), sum(p.numel() for p in layer.parameters())


def layer_step(layer: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor | None, device: torch.device,
               precision: str) -> Callable[[], None]:
    """Forward (under ``autocast``) + backward of ``layer`` on x (B, N, C), gradients cleared after each step."""

    def step() -> None:
        with autocast(device, precision):
            total = (layer(x) if mask is None else layer(x, mask)).float().sum()
        total.backward()
        x.grad = None
        layer.zero_grad(set_to_none=True)

    return step


def peer_step(cell: Mapping[str, Any], n: int, batch: int, device: torch.device) -> tuple[Callable[[], None], int]:
    """One side of a ``bench.peers`` pair (``cell``: pair, side, dim, heads), forward + backward, bf16 autocast on
    CUDA (fp32 on CPU), no mask; ``PeerMissing`` when the package is absent."""
    from lra_bench.bench.peers import build, get_pair

    layer = build(get_pair(cell["pair"]), cell["side"], cell["dim"], cell["heads"], n).to(device).train()
    x = torch.randn(batch, n, cell["dim"], device=device, requires_grad=True)  # (B, N, C)
    return layer_step(layer, x, None, device, "bf16"), sum(p.numel() for p in layer.parameters())


MAKERS = {"model": model_step, "attention": attention_step, "peer": peer_step}


def failure(e: BaseException, **fields: Any) -> dict[str, Any]:
    return {"status": "oom" if is_oom(e) else "failed", "message": f"{type(e).__name__}: {str(e)[:500]}", **fields}


def emit(message: dict[str, Any]) -> None:
    print(json.dumps(message), flush=True)


def main() -> None:
    p = json.loads(sys.stdin.readline())
    device = torch.device(p["device"])
    torch.manual_seed(0)
    cfg = p["config"]
    compiled = p["mode"] != "peer" and compile_enabled(cfg["trainer"]["compile"], device)
    try:
        step, params = MAKERS[p["mode"]](cfg, p["n"], p["batch"], device)
    except Exception as e:  # noqa: BLE001 - reported to the parent as a cell status
        emit(failure(e, compiled=compiled))
        return
    fields = {"params": params, "compiled": compiled}
    try:
        memory = peak_memory_of(step, device)  # first, with the default allocator (see reuse_freed_memory)
        if p["mode"] == "peer" and device.type == "cpu":  # the exact tensor peak of a second step, beside the RSS
            memory["tensor_peak_bytes"] = tensor_peak_of(step)
    except Exception as e:  # noqa: BLE001
        emit(failure(e, **fields))
        return
    fields.update(memory, allocator_reuse=reuse_freed_memory() if device.type == "cpu" else False)
    use = CoreUse(threads=torch.get_num_threads())

    def burst(warmup: int, repeats: int) -> list[float] | None:
        """``warmup`` untimed and ``repeats`` timed steps (the cores other work used counted meanwhile); None
        after reporting a failure."""
        try:
            for _ in range(warmup):
                step()
            with use.measuring():
                return timed_runs(step, device, repeats)
        except Exception as e:  # noqa: BLE001
            emit(failure(e, **fields))
            return None

    if not p.get("serve"):
        if (durations := burst(p["warmup"], p["repeats"])) is not None:
            emit({"status": "ok", **asdict(summarize(durations, p["warmup"])), "durations": durations, **fields,
                  "machine": use.summary()})
        return
    release_freed_memory(device)  # parked: only weights, optimizer state and inputs stay resident; released before
    emit({"status": "ready", **fields})  # answering, so the next variant's burst never runs beside this work
    for line in sys.stdin:
        command = json.loads(line)
        if command.get("finish"):
            break
        if (durations := burst(command["warmup"], command["repeats"])) is None:
            return
        release_freed_memory(device)
        emit({"status": "timed", "durations": durations})
    emit({"status": "finished", "machine": use.summary()})

if __name__ == "__main__":
    main()
