"""Our attention layers beside the PyPI packages at matched settings (``lra_bench.bench.peers``): time and memory.

For each pair and N, our layer and the package's each run in a fresh process (``lra_bench.bench.cell``, mode
``peer``): one self-attention layer, forward + backward on (batch, N, dim) with no padding and no dropout, under
bf16 autocast on CUDA (fp32 on CPU); peak memory = the first step's growth over what was held before it (CUDA: max
allocated; CPU: resident set); time = median of ``--repeats`` steps after ``--warmup``. The two sides of a pair are
timed in turns (``--rounds`` bursts each, ``lra_bench.bench.interleaved``), so a change of the machine's load hits
both alike, and each row keeps the cores other processes used meanwhile (``machine``). A package that is not
installed is reported as ``missing`` with the install command.

    python tools/bench_peers.py                                  # every pair, N=4096, batch 32 (CUDA) / 4 (CPU)
    python tools/bench_peers.py --pairs performer local --n 2048 4096 --out results/report/peers

Writes ``<out>/peers.json`` (one row per cell, with device, torch version and commit) and ``<out>/peers.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import torch

from lra_bench.bench.interleaved import Job, run_interleaved
from lra_bench.bench.peers import PAIR_NAMES, get_pair
from lra_bench.bench.table2 import device_label
from lra_bench.store.files import atomic_open, write_json_atomic
from lra_bench.store.records import git_commit


def run_pair(name: str, n: int, args: argparse.Namespace, batch: int) -> list[dict]:
    """Both sides of one pair at length ``n``, timed in turns; one row each."""
    rows = []
    jobs = []
    for side in ("ours", "peer"):
        cell = {"pair": name, "side": side, "n": n, "batch": batch, "dim": args.dim, "heads": args.heads,
                "warmup": args.warmup, "repeats": args.repeats, "device": args.device}
        payload = {"mode": "peer", "config": cell, "n": n, "batch": batch, "warmup": args.warmup,
                   "repeats": args.repeats, "device": args.device}
        jobs.append(Job(f"{name}-{side}", payload, args.timeout))
        rows.append(cell)
    for cell, res in zip(rows, run_interleaved(jobs, args.rounds), strict=True):
        if res["status"] == "failed" and res.get("message", "").startswith("PeerMissing"):
            res = {**res, "status": "missing"}
        cell.update(res)
        shown = f"{cell['median_s'] * 1e3:.2f} ms" if cell["status"] == "ok" else cell.get("message", "")[:200]
        busy = " (busy)" if (cell.get("machine") or {}).get("busy") else ""
        print(f"{name:>14} {cell['side']:>4} N={n}: {cell['status']} {shown}{busy}", file=sys.stderr, flush=True)
    return rows


def markdown(rows: list[dict], meta: dict) -> str:
    """One line per (pair, N): our time and memory, the package's, and the ratios ours / package."""
    lines = [f"# Our layers beside the PyPI packages ({meta['device']}, torch {meta['torch_version']})", "",
             f"Command: `{meta['command']}`  ", f"Commit {meta['git_commit']}, {meta['created_at']}. One "
             f"self-attention layer, batch {meta['batch']}, dim {meta['dim']}, {meta['heads']} heads, forward + "
             f"backward, {'bf16 autocast' if meta['device_type'] == 'cuda' else 'fp32'}, no padding, no dropout; "
             f"median of {meta['repeats']} steps after {meta['warmup']}, the two sides timed in turns "
             f"({meta['rounds']} bursts each). Time ratio < 1: ours is faster. Load: the 1-minute load average "
             "when each side's timing began and ended; other cores: how many cores other processes kept busy during "
             "its timed steps (busy = more than the cores it left spare).", "",
             "Memory: MiB the first step's resident set grew by (RSS, as in Table 2; it moves by 10 % and more "
             "between runs with the C allocator's caching) and, on a CPU, the exact peak of tensor memory a step "
             "allocates (tensor, from the profiler's allocation events: the same on every run, the one to compare).",
             "",
             "| pair | N | ours ms | package | package ms | time ours / package | ours MiB | package MiB | "
             "memory ours / package | tensor MiB ours / package | tensor ours / package | load (ours; package) | "
             "other cores (ours / package) | settings |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
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
            def tensor(r: dict | None) -> float | None:
                ok = r is not None and r["status"] == "ok" and r.get("tensor_peak_bytes")
                return r["tensor_peak_bytes"] / 2**20 if ok else None

            tm = (f"{tensor(ours):.0f} / {tensor(peer):.0f}" if tensor(ours) and tensor(peer) else "-")
            tr = f"{tensor(ours) / tensor(peer):.2f}" if tensor(ours) and tensor(peer) else "-"

            def load(r: dict | None) -> str:
                mach = (r or {}).get("machine") or {}
                before, after = mach.get("loadavg_before"), mach.get("loadavg_after")
                return f"{before[0]:.1f}-{after[0]:.1f}" if before and after else "-"

            def other(r: dict | None) -> str:
                mach = (r or {}).get("machine") or {}
                if mach.get("other_cores") is None:
                    return "-"
                return f"{mach['other_cores']:.2f}" + (" busy" if mach.get("busy") else "")

            knobs = ", ".join(f"{k}={v}" for k, v in pair.knobs_at(n).items())
            lines.append(f"| {name} | {n} | {ms(ours)} | {pair.peer_label} | {ms(peer)} | {t} | {mib(ours)} | "
                         f"{mib(peer)} | {m} | {tm} | {tr} | {load(ours)}; {load(peer)} | "
                         f"{other(ours)} / {other(peer)} | ours: {knobs or 'defaults'}; {pair.note} |")
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
    ap.add_argument("--rounds", type=int, default=3, help="turns: the repeats split into this many bursts per side")
    args = ap.parse_args()
    device = torch.device(args.device)
    batch = args.batch or (32 if device.type == "cuda" else 4)
    rows = [row for name in args.pairs for n in args.n for row in run_pair(name, n, args, batch)]
    meta = {"device": device_label(device), "device_type": device.type, "torch_version": torch.__version__,
            "git_commit": git_commit(), "created_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "command": "python tools/bench_peers.py " + " ".join(sys.argv[1:]), "batch": batch, "dim": args.dim,
            "heads": args.heads, "warmup": args.warmup, "repeats": args.repeats, "rounds": args.rounds}
    write_json_atomic(args.out / "peers.json", {"meta": meta, "rows": rows})
    with atomic_open(args.out / "peers.md") as f:
        f.write(markdown(rows, meta))
    print(markdown(rows, meta))


if __name__ == "__main__":
    main()
