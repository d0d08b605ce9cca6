"""Our attention layers beside the PyPI packages at matched settings (``lra_bench.bench.peers``): time and memory.

For each pair and each side (ours, the package's), one cell in a fresh process: one self-attention layer,
forward + backward on (batch, N, dim) with no padding and no dropout, under bf16 autocast on CUDA (fp32 on CPU);
peak memory = the first step's growth over what was held before it (CUDA: max allocated; CPU: resident set);
time = median of ``--repeats`` steps after ``--warmup``. The two sides of a pair run one after the other in the
same invocation. A package that is not installed is reported as ``missing`` with the install command.

    python tools/bench_peers.py                                  # every pair, N=4096, batch 32 (CUDA) / 4 (CPU)
    python tools/bench_peers.py --pairs performer local --n 2048 4096 --out results/report/peers

Writes ``<out>/peers.json`` (one row per cell, with device, torch version and commit) and ``<out>/peers.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import torch

from lra_bench.bench.peers import PAIR_NAMES, PeerMissing, build, get_pair
from lra_bench.bench.table2 import device_label
from lra_bench.infra.memory import is_oom, peak_memory_of, reuse_freed_memory
from lra_bench.infra.timing import time_callable
from lra_bench.store.files import atomic_open, write_json_atomic
from lra_bench.store.records import git_commit
from lra_bench.train.step import autocast


def run_cell(cell: dict) -> dict:
    """One (pair, side, N) cell in this process."""
    torch.manual_seed(0)
    device = torch.device(cell["device"])
    pair = get_pair(cell["pair"])
    try:
        layer = build(pair, cell["side"], cell["dim"], cell["heads"], cell["n"]).to(device).train()
    except PeerMissing as e:
        return {**cell, "status": "missing", "message": str(e)}
    x = torch.randn(cell["batch"], cell["n"], cell["dim"], device=device, requires_grad=True)  # (B, N, C)

    def step() -> None:
        with autocast(device, "bf16"):
            total = layer(x).float().sum()
        total.backward()
        x.grad = None
        layer.zero_grad(set_to_none=True)

    try:
        memory = peak_memory_of(step, device)
        if device.type == "cpu":
            reuse_freed_memory()
        timing = time_callable(step, device, warmup=cell["warmup"], repeats=cell["repeats"])
    except Exception as e:  # noqa: BLE001 - reported as the cell's status
        return {**cell, "status": "oom" if is_oom(e) else "failed", "message": f"{type(e).__name__}: {str(e)[:500]}"}
    return {**cell, "status": "ok", "median_s": timing.median_s, "q1_s": timing.q1_s, "q3_s": timing.q3_s,
            "peak_delta_bytes": memory["peak_delta_bytes"], "params": sum(p.numel() for p in layer.parameters())}


def markdown(rows: list[dict], meta: dict) -> str:
    """One line per (pair, N): our time and memory, the package's, and the ratios ours / package."""
    lines = [f"# Our layers beside the PyPI packages ({meta['device']}, torch {meta['torch_version']})", "",
             f"Command: `{meta['command']}`  ", f"Commit {meta['git_commit']}, {meta['created_at']}. One "
             f"self-attention layer, batch {meta['batch']}, dim {meta['dim']}, {meta['heads']} heads, forward + "
             f"backward, {'bf16 autocast' if meta['device_type'] == 'cuda' else 'fp32'}, no padding, no dropout; "
             f"median of {meta['repeats']} steps after {meta['warmup']}. Time ratio < 1: ours is faster.", "",
             "| pair | N | ours ms | package | package ms | time ours / package | ours MiB | package MiB | "
             "memory ours / package | settings |", "|---|---|---|---|---|---|---|---|---|---|"]
    by = {(r["pair"], r["n"], r["side"]): r for r in rows}
    for name in dict.fromkeys(r["pair"] for r in rows):
        pair = get_pair(name)
        for n in sorted({r["n"] for r in rows if r["pair"] == name}):
            ours, peer = by.get((name, n, "ours")), by.get((name, n, "peer"))

            def ms(r: dict | None) -> str:
                if r is None:
                    return "-"
                return f"{r['median_s'] * 1e3:.2f}" if r["status"] == "ok" else r["status"].upper()

            def mib(r: dict | None) -> str:
                ok = r is not None and r["status"] == "ok" and r["peak_delta_bytes"] is not None
                return f"{r['peak_delta_bytes'] / 2**20:.0f}" if ok else "-"

            both = ours and peer and ours["status"] == peer["status"] == "ok"
            t = f"{ours['median_s'] / peer['median_s']:.2f}" if both else "-"
            m = (f"{ours['peak_delta_bytes'] / peer['peak_delta_bytes']:.2f}"
                 if both and ours["peak_delta_bytes"] and peer["peak_delta_bytes"] else "-")
            knobs = ", ".join(f"{k}={v}" for k, v in pair.knobs.items())
            lines.append(f"| {name} | {n} | {ms(ours)} | {pair.peer_label} | {ms(peer)} | {t} | {mib(ours)} | "
                         f"{mib(peer)} | {m} | ours: {knobs or 'defaults'}; {pair.note} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", nargs="+", choices=PAIR_NAMES, default=list(PAIR_NAMES))
    ap.add_argument("--n", nargs="+", type=int, default=[4096])
    ap.add_argument("--batch", type=int, default=None, help="default 32 on CUDA (LRA), 4 on CPU")
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per cell")
    ap.add_argument("--out", type=Path, default=Path("results/report/peers"))
    ap.add_argument("--cell", default=None, help=argparse.SUPPRESS)  # internal: run one cell, print JSON
    args = ap.parse_args()
    if args.cell is not None:
        print(json.dumps(run_cell(json.loads(args.cell))))
        return
    device = torch.device(args.device)
    batch = args.batch or (32 if device.type == "cuda" else 4)
    rows = []
    for name in args.pairs:
        for n in args.n:
            for side in ("ours", "peer"):
                cell = {"pair": name, "side": side, "n": n, "batch": batch, "dim": args.dim, "heads": args.heads,
                        "warmup": args.warmup, "repeats": args.repeats, "device": args.device}
                try:
                    proc = subprocess.run([sys.executable, __file__, "--cell", json.dumps(cell)], capture_output=True,
                                          text=True, timeout=args.timeout)
                    lines = proc.stdout.strip().splitlines()
                    row = (json.loads(lines[-1]) if proc.returncode == 0 and lines
                           else {**cell, "status": "failed", "message": proc.stderr[-1000:]})
                except subprocess.TimeoutExpired:
                    row = {**cell, "status": "timeout", "message": f"over {args.timeout} s"}
                rows.append(row)
                shown = f"{row['median_s'] * 1e3:.2f} ms" if row["status"] == "ok" else row.get("message", "")[:200]
                print(f"{name:>14} {side:>4} N={n}: {row['status']} {shown}", file=sys.stderr, flush=True)
    meta = {"device": device_label(device), "device_type": device.type, "torch_version": torch.__version__,
            "git_commit": git_commit(), "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": "python tools/bench_peers.py " + " ".join(sys.argv[1:]), "batch": batch, "dim": args.dim,
            "heads": args.heads, "warmup": args.warmup, "repeats": args.repeats}
    write_json_atomic(args.out / "peers.json", {"meta": meta, "rows": rows})
    with atomic_open(args.out / "peers.md") as f:
        f.write(markdown(rows, meta))
    print(markdown(rows, meta))


if __name__ == "__main__":
    main()
