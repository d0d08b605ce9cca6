"""Carry run records across a change of the config layout (``lra_bench/store/migrate.py`` says which changes):

    python scripts/migrate_records.py results/runs            # your own records
    python scripts/migrate_records.py results/runs --dry-run  # list what would move

Records whose config names a moved class get the config, hash and folder the current code gives the same
experiment (commit, metrics and predictions as they were), so a resumed sweep skips them and reports pair them
with new runs. Records that need no change are left alone; running it twice changes nothing the second time.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: scripts/_repo.py)

from lra_bench.store.migrate import migrate_tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="results folders (the layout of results/runs)")
    parser.add_argument("--dry-run", action="store_true", help="list the folders that would move, move nothing")
    args = parser.parse_args(argv)
    failed = False
    for folder in args.folders:
        if not folder.is_dir():
            print(f"error: {folder} is not a folder of run records (e.g. results/runs)", file=sys.stderr)
            return 2
        moved, problems = migrate_tree(folder, dry_run=args.dry_run)
        verb = "would move" if args.dry_run else "moved"
        for m in moved:
            print(f"{verb} {m.old} -> {m.new.name}")
        for path, why in problems:
            print(f"left as it was: {path}: {why}", file=sys.stderr)
        failed |= bool(problems)
        print(f"{folder}: {len(moved)} run folder(s) {verb}, {len(problems)} left as they were")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
