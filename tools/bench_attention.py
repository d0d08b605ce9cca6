"""Forward+backward time and peak memory of every attention layer alone, relative to softmax.

Each (attention, N) cell runs in a fresh process (memory isolation); timings are medians over repeats
after warm-up. Example (the figures in the zoo issues' notes):
    python tools/bench_attention.py --lengths 1024 4096 --batch 2 --dim 64 --heads 4 \
        --out results/cpu/attention_bench.csv
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import pandas as pd
from omegaconf import OmegaConf

from lra_bench.attention import list_attentions
from lra_bench.bench.isolated import run_isolated

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "attention"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attentions", nargs="*", default=None, help="default: every registered variant")
    ap.add_argument("--lengths", nargs="+", type=int, default=[1024, 4096])
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="cuda" if __import__("torch").cuda.is_available() else "cpu")
    ap.add_argument("--compile", choices=("auto", "true", "false"), default="auto",
                    help="torch.compile each layer, as trainer.compile: auto = on CUDA only")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", type=Path, default=None, help="CSV to write (printed as Markdown either way)")
    args = ap.parse_args()
    names = args.attentions or list_attentions()
    if "softmax" not in names:
        names = ["softmax", *names]
    compile_setting = {"true": True, "false": False}.get(args.compile, "auto")
    rows = []
    for n in args.lengths:
        for name in names:
            config = {"attention": OmegaConf.to_container(OmegaConf.load(CONFIGS / f"{name}.yaml")),
                      "model": {"dim": args.dim, "num_heads": args.heads},
                      "trainer": {"precision": "fp32", "compile": compile_setting}}
            payload = {"mode": "attention", "config": config, "n": n, "batch": args.batch,
                       "warmup": args.warmup, "repeats": args.repeats, "device": args.device}
            res = run_isolated("lra_bench.bench.cell", payload, args.timeout)
            rows.append({"attention": name, "n": n, **res})
            print(f"{name:>14} N={n:<6} {res.get('status')} median {res.get('median_s', float('nan')):.4f}s "
                  f"peak+{(res.get('peak_delta_bytes') or 0) / 2**20:.1f} MiB", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    failed = df[df.status == "failed"] if "message" in df else df.iloc[:0]
    if not failed.empty:  # an OOM or a timeout is a result; a failure is a bug to show, not a NaN in the table
        for r in failed.itertuples():
            print(f"{r.attention} N={r.n}: failed: {r.message}", file=sys.stderr)
        sys.exit(f"{len(failed)} of {len(df)} cells failed (above); no table written")
    for column in ("median_s", "peak_delta_bytes"):  # absent when every cell ran out of memory or time
        df[column] = df.get(column, float("nan"))
    base = df[df.attention == "softmax"].set_index("n")
    df["time_vs_softmax"] = df.apply(lambda r: r.median_s / base.loc[r.n, "median_s"], axis=1)
    df["memory_vs_softmax"] = df.apply(lambda r: r.peak_delta_bytes / base.loc[r.n, "peak_delta_bytes"], axis=1)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        df.to_csv(args.out, index=False)
    wide = df.pivot(index="attention", columns="n", values=["time_vs_softmax", "memory_vs_softmax"])
    print(f"batch {args.batch}, dim {args.dim}, heads {args.heads}, device {args.device}, "
          f"median of {args.repeats} after {args.warmup} warm-up; memory = peak growth over inputs+weights")
    print(wide.round(3).to_markdown())


if __name__ == "__main__":
    main()
