"""One benchmark cell, run in its own process: forward+backward of one attention layer at one length.

stdin: JSON {attention, n, batch, dim, heads, warmup, repeats, device, seed}; stdout: one JSON line.
Used by ``scripts/bench_attention.py``; the fresh process keeps each cell's peak memory isolated.
"""

from __future__ import annotations

import json
import sys

import torch
from omegaconf import OmegaConf

from lra_bench.benchmark import asdict, peak_memory_of, time_callable
from lra_bench.models.factory import build_attention_factory

CONFIGS = __import__("pathlib").Path(__file__).resolve().parents[1] / "configs" / "attention"


def main() -> None:
    p = json.loads(sys.stdin.read())
    device = torch.device(p["device"])
    torch.manual_seed(p["seed"])
    factory = build_attention_factory(OmegaConf.load(CONFIGS / f"{p['attention']}.yaml"), p["attention"])
    layer = factory(dim=p["dim"], num_heads=p["heads"], seq_len=p["n"], dropout=0.0).to(device).train()
    x = torch.randn(p["batch"], p["n"], p["dim"], device=device, requires_grad=True)
    mask = torch.ones(p["batch"], p["n"], dtype=torch.bool, device=device)

    def step() -> None:
        layer(x, mask).sum().backward()
        x.grad = None
        layer.zero_grad(set_to_none=True)

    memory = peak_memory_of(step, device)  # first call: measured before any warm-up caching
    timing = time_callable(step, device, warmup=p["warmup"], repeats=p["repeats"])
    print(json.dumps({"status": "ok", **asdict(timing), **memory}))


if __name__ == "__main__":
    main()
