"""Copy a sweep's finished run records into a curated results folder (``lra_bench/store/land.py``):

    python scripts/land_records.py /scratch/runs results/cpu/runs --commit 6ebdfac            # copy
    python scripts/land_records.py /scratch/runs results/cpu/runs --commit 6ebdfac --dry-run  # list only

Only verified ``ok`` records with per-example predictions, made at the sweep's commit (``--commit``, required) from a
clean checkout are copied, each into its own run folder; one already there unchanged is skipped, one that differs is
never overwritten. Exit status 1 when any record was refused, unreadable or in conflict (nothing of those is copied)
or a copy failed (copying stops there), 2 on bad arguments, else 0.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: scripts/_repo.py)

from lra_bench.errors import ConfigError
from lra_bench.store.land import land, summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", type=Path, help="the sweep's results folder (its LRA_RESULTS_DIR)")
    parser.add_argument("dest", type=Path, help="the curated folder (the layout of results/runs)")
    parser.add_argument("--commit", required=True,
                        help="the sweep's commit (7-40 hex digits): a record made at another is refused")
    parser.add_argument("--allow-dirty", action="store_true",
                        help="accept records made with uncommitted changes (say why in the folder's CURATED file)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be copied, copy nothing")
    args = parser.parse_args(argv)
    if not args.source.is_dir():
        print(f"error: {args.source} is not a folder of run records (a sweep's LRA_RESULTS_DIR)", file=sys.stderr)
        return 2
    try:
        out = land(args.source, args.dest, commit=args.commit, allow_dirty=args.allow_dirty, dry_run=args.dry_run)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for path, why in out.refused:
        print(f"refused {path}: {why}", file=sys.stderr)
    for path, why in out.conflicts:
        print(f"conflict {path}: {why}", file=sys.stderr)
    for path in out.unreadable:
        print(f"unreadable {path} (failed verification: see the warning above)", file=sys.stderr)
    for line in summary(out):
        print(("would add " if args.dry_run else "added ") + line)
    print(f"{len(out.added)} {'to copy' if args.dry_run else 'copied'}, {len(out.present)} already there, "
          f"{len(out.refused)} refused, {len(out.conflicts)} in conflict, {len(out.unreadable)} unreadable")
    if out.error:
        print(f"error: {out.error}; copying stopped there (run it again once it is fixed)", file=sys.stderr)
    return 1 if out.refused or out.conflicts or out.unreadable or out.error else 0


if __name__ == "__main__":
    sys.exit(main())
