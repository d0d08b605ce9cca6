"""One ``flash`` attention layer (forward + backward) against the always-masked SDPA call it replaced and bare SDPA.

Implementations, all the same layer (qkv projection, attention, output projection) and the same weights:
    flash   lra_bench.attention.flash.FlashAttention as it is now
    legacy  the former ``flash``: SDPA always called with the (B, 1, 1, N) boolean key mask
    bare    SDPA with no mask and no dropout (the fastest exact attention torch offers on the device; one cell)
each with no padding (all-True mask) and with ``--padded`` of the keys padded (right padding), in training
mode with ``--attn-dropout`` (LRA: 0.1) and, with ``--no-dropout`` as well, with attention dropout 0.
Each cell runs in a fresh process: peak memory is the first step's growth (CPU: resident set, VmHWM; CUDA:
max allocated) over what was held before it; time is the median of ``--repeats`` steps after ``--warmup``.

    python tools/bench_flash.py                          # N=4096, batch 4, dim 256, 4 heads, fp32
    python tools/bench_flash.py --n 2048 --no-dropout --impls flash bare
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import torch
import torch.nn.functional as F
from torch import Tensor

from lra_bench.attention.flash import FlashAttention
from lra_bench.infra.memory import peak_memory_of, reuse_freed_memory
from lra_bench.infra.timing import time_callable

IMPLS = ("flash", "legacy", "bare")


class LegacyFlash(FlashAttention):
    """The ``flash`` layer before issue 12: SDPA always gets the boolean key mask."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        attn_mask = None
        if mask is not None:
            keep = mask | ~mask.any(dim=-1, keepdim=True)  # (B, N)
            attn_mask = keep[:, None, None, :]  # (B, 1, 1, N)
        p = self.attn_dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=p)  # (B, H, N, D)


class BareSDPA(FlashAttention):
    """SDPA with no mask and no dropout: the floor the other two are compared with."""

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        return F.scaled_dot_product_attention(q, k, v)  # (B, H, N, D)


def run_cell(cell: dict) -> dict:
    """One (impl, padding, dropout) cell in this process; returns time and memory."""
    torch.set_num_threads(cell["threads"])
    torch.manual_seed(0)
    device = torch.device(cell["device"])
    cls = {"flash": FlashAttention, "legacy": LegacyFlash, "bare": BareSDPA}[cell["impl"]]
    n, b = cell["n"], cell["batch"]
    layer = cls(cell["dim"], cell["heads"], seq_len=n, dropout=0.0, attn_dropout=cell["attn_dropout"])
    layer = layer.to(device).train()
    x = torch.randn(b, n, cell["dim"], device=device, requires_grad=True)
    real = n - int(round(cell["padded"] * n))
    mask = torch.arange(n, device=device)[None, :].expand(b, n) < real  # (B, N) True = real
    if cell["impl"] == "bare":
        mask = None

    def step() -> None:
        y = layer(x, mask)  # (B, N, C)
        (y if mask is None else y[mask]).float().sum().backward()
        x.grad = None
        layer.zero_grad(set_to_none=True)

    memory = peak_memory_of(step, device)
    if device.type == "cpu":
        reuse_freed_memory()
    timing = time_callable(step, device, warmup=cell["warmup"], repeats=cell["repeats"])
    return {**cell, "median_s": timing.median_s, "min_s": timing.min_s, "peak_delta_bytes": memory["peak_delta_bytes"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--impls", nargs="+", choices=IMPLS, default=list(IMPLS))
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--padded", type=float, default=0.3, help="fraction of keys padded in the padded case")
    ap.add_argument("--attn-dropout", type=float, default=0.1, help="attention dropout in training (LRA 0.1)")
    ap.add_argument("--no-dropout", action="store_true", help="also run every cell with attention dropout 0")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--cell", default=None, help=argparse.SUPPRESS)  # internal: run one cell, print JSON
    args = ap.parse_args()
    if args.cell is not None:
        print(json.dumps(run_cell(json.loads(args.cell))))
        return
    dropouts = [args.attn_dropout] + ([0.0] if args.no_dropout and args.attn_dropout else [])
    rows = []
    for p in dropouts:
        for padded in (0.0, args.padded):
            for impl in args.impls:
                if impl == "bare" and (padded or p != dropouts[0]):  # bare ignores mask and dropout: one cell
                    continue
                cell = {"impl": impl, "padded": padded, "attn_dropout": 0.0 if impl == "bare" else p, "n": args.n,
                        "batch": args.batch, "dim": args.dim, "heads": args.heads, "warmup": args.warmup,
                        "repeats": args.repeats, "threads": args.threads, "device": args.device}
                proc = subprocess.run([sys.executable, __file__, "--cell", json.dumps(cell)], capture_output=True,
                                      text=True)
                if proc.returncode != 0:
                    print(f"{impl} padded={padded} dropout={p}: failed\n{proc.stderr[-2000:]}", file=sys.stderr)
                    continue
                row = json.loads(proc.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(f"{impl:>7} padded={padded:.0%} attn_dropout={row['attn_dropout']}: "
                      f"median {row['median_s']:.3f}s peak +{(row['peak_delta_bytes'] or 0) / 2**20:.0f} MiB",
                      file=sys.stderr, flush=True)
    base = next((r for r in rows if r["impl"] == "bare"), None)
    print("| impl | keys padded | attn dropout | median s | peak MiB | time / bare | memory / bare |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        t = f"{r['median_s'] / base['median_s']:.2f}" if base else "-"
        m = (f"{r['peak_delta_bytes'] / base['peak_delta_bytes']:.1f}"
             if base and base["peak_delta_bytes"] and r["peak_delta_bytes"] is not None else "-")
        print(f"| {r['impl']} | {r['padded']:.0%} | {r['attn_dropout']} | {r['median_s']:.3f} | "
              f"{(r['peak_delta_bytes'] or 0) / 2**20:.0f} | {t} | {m} |")


if __name__ == "__main__":
    main()
