"""Regenerate the curated results in ``results/`` from the raw results store:

    python scripts/report.py                      # Table 2 (efficiency) from results/bench
    python scripts/report.py --bench-dir D --out results

Writes table2_<mode>.md / .csv and scaling_<mode>.png / .svg, and prints the command that regenerates them.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lra_bench.reports.efficiency import load_cells, scaling_plot, table2  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench-dir", type=Path, default=Path("results/bench"))
    ap.add_argument("--out", type=Path, default=Path("results"))
    args = ap.parse_args(argv)
    given = argv if argv is not None else sys.argv[1:]
    command = "python scripts/report.py " + " ".join(shlex.quote(a) for a in given)
    args.out.mkdir(parents=True, exist_ok=True)
    cells = load_cells(args.bench_dir)
    if cells.empty:
        print(f"no benchmark cells under {args.bench_dir}; run python scripts/benchmark.py first", file=sys.stderr)
        return 1
    for mode in sorted(cells["mode"].unique()):
        table, markdown = table2(cells, mode)
        table.to_csv(args.out / f"table2_{mode}.csv", index=False)
        (args.out / f"table2_{mode}.md").write_text(f"# LRA Table 2 on this hardware ({mode} mode)\n\n"
                                                    f"Regenerate: `{command.strip()}`\n\n{markdown}\n")
        scaling_plot(cells, args.out / f"scaling_{mode}.png", mode)
        print(markdown)
    print(f"wrote {args.out}/table2_*.md|csv and scaling_*.png|svg; regenerate with: {command.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
