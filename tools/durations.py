"""Every duration the README and docs may quote as measured, from the committed run records: one line per figure
with its rounded text (what a doc writes before its ``<!-- measured: NAME -->`` marker), the seconds, how it is
computed, the number of records and the hosts they ran on. tests/test_durations.py checks the docs against it.

Run:  python tools/durations.py [--match SUBSTRING]
"""

from __future__ import annotations

import argparse

import _repo  # this checkout's lra_bench first (tools/_repo.py)

from lra_bench.reports.durations import SOURCES, measured_figures

ROOT = _repo.ROOT


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--match", default="", help="only the figures whose name contains this")
    args = parser.parse_args()
    figures = measured_figures(ROOT)
    sources = [f"{name} = {folder} (profile={profile})" for name, (folder, profile) in SOURCES.items()]
    print("sources: " + "; ".join(sources))
    for name, fig in sorted(figures.items()):
        if args.match in name:
            print(f"{name:<40} {fig.text:>8}  {fig.seconds:10.3f} s  {fig.how}; {fig.runs} records on "
                  f"{', '.join(fig.hosts)}")


if __name__ == "__main__":
    main()
