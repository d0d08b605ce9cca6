"""Where a peer's layer spends its time against ours: ``torch.profiler`` over the benchmark's own peer step (issue 45).

For each pair and N, each side is built and stepped exactly as ``tools/bench_peers.py`` times it
(``lra_bench.bench.cell.peer_step``: one self-attention layer, forward + backward on (batch, N, dim), no padding, no
dropout), ``--warmup`` untimed steps, then ``--steps`` steps under the profiler. The table lists, per side, the
operators with the most self CPU time (summed over the profiled steps, in ms per step) and each side's total, so that
a gap in ``peers.md`` can be traced to the operators behind it. Timings under load are only indicative; compare the
shares of the two sides rather than their absolute values.

    python tools/profile_peers.py --pairs sinkhorn reformer --n 1024 --out results/speed_cpu/peers/profiles.md
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import torch
from _provenance import provenance, write_markdown
from torch.profiler import ProfilerActivity, profile

from lra_bench.bench.cell import peer_step
from lra_bench.bench.peers import PAIR_NAMES, get_pair


def side_profile(pair: str, side: str, n: int, args: argparse.Namespace) -> tuple[list[tuple[str, float, int]], float]:
    """(name, self CPU ms per step, calls per step) of the ``--top`` operators, and the total self CPU ms per step."""
    cell = {"pair": pair, "side": side, "dim": args.dim, "heads": args.heads}
    step, _ = peer_step(cell, n, args.batch, torch.device("cpu"))
    for _ in range(args.warmup):
        step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(args.steps):
            step()
    events = [e for e in prof.key_averages() if e.self_cpu_time_total > 0]
    total = sum(e.self_cpu_time_total for e in events) / 1e3 / args.steps
    events.sort(key=lambda e: e.self_cpu_time_total, reverse=True)
    top = [(e.key, e.self_cpu_time_total / 1e3 / args.steps, e.count // args.steps) for e in events[:args.top]]
    return top, total


def pair_table(pair: str, n: int, args: argparse.Namespace) -> str:
    sides = {side: side_profile(pair, side, n, args) for side in ("ours", "peer")}
    (ours, ours_total), (peer, peer_total) = sides["ours"], sides["peer"]
    lines = [f"### {pair}, N={n} ({get_pair(pair).package})", "",
             f"Self CPU per step: ours {ours_total:.1f} ms, package {peer_total:.1f} ms "
             f"(ratio {ours_total / peer_total:.2f}).", "",
             "| # | ours: operator | ms/step | calls | package: operator | ms/step | calls |",
             "|---|---|---|---|---|---|---|"]
    for i in range(max(len(ours), len(peer))):
        a = ours[i] if i < len(ours) else ("", float("nan"), 0)
        b = peer[i] if i < len(peer) else ("", float("nan"), 0)
        lines.append(f"| {i + 1} | `{a[0]}` | {a[1]:.1f} | {a[2]} | `{b[0]}` | {b[1]:.1f} | {b[2]} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", nargs="+", default=["sinkhorn", "reformer"], choices=PAIR_NAMES)
    ap.add_argument("--n", nargs="+", type=int, default=[1024])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--top", type=int, default=12)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    torch.manual_seed(0)
    header = (f"# Operator profiles: our layers beside the PyPI packages\n\n{provenance('profile_peers.py')}1-minute "
              f"load {os.getloadavg()[0]:.1f} at the start. Batch {args.batch}, dim {args.dim}, {args.heads} heads, "
              f"forward + backward, fp32, {args.steps} profiled steps after {args.warmup}.\n")
    write_markdown(header + "\n" + "\n".join(pair_table(p, n, args) for p in args.pairs for n in args.n), args.out)


if __name__ == "__main__":
    main()
