"""Prepare a task's data once: obtain (generate / read / download when online), verify, tokenise and cache
it as Hugging Face Arrow, then print counts and label balance per split. Idempotent: a second call reuses
the cache. Takes the same overrides as run.py (the profile decides sizes of generated data):

    python scripts/prepare_data.py task=listops profile=paper
    python scripts/prepare_data.py task=listops task.data_dir=/data/lra_release/listops-1000
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: scripts/_repo.py)
import numpy as np
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException

from lra_bench.config.overrides import check_overrides
from lra_bench.config.plan import build_task
from lra_bench.errors import LRABenchError

ROOT = Path(__file__).resolve().parents[1]


def describe(overrides: list[str]) -> str:
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(config_name="run", overrides=overrides)
    task = build_task(cfg.task)
    t0 = time.perf_counter()
    data = task.load(Path(cfg.paths.cache_dir))
    seconds = time.perf_counter() - t0
    lines = [f"task {task.name} (source {data.meta.get('source')}): "
             f"{'cache reused' if data.reused else 'prepared'} in {seconds:.1f}s at {data.path}",
             f"fingerprint {data.meta['fingerprint']}"]
    for split, labels in data.labels.items():
        counts = np.bincount(labels, minlength=task.num_classes)
        balance = " ".join(f"{c}:{n}" for c, n in enumerate(counts))
        lines.append(f"  {split:>5}: {len(labels):>7} examples, inputs {tuple(data.inputs[split].shape)}; "
                     f"labels {balance}; majority {counts.max() / max(len(labels), 1):.3f}")
    for key in ("skipped", "skipped_files"):
        if data.meta.get(key):
            lines.append(f"  skipped: {data.meta[key]}")
    return "\n".join(lines)


def main() -> None:
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__.strip())
        return
    if (problem := check_overrides(sys.argv[1:], ROOT / "configs", "run")) is not None:
        print(f"error: {problem}", file=sys.stderr)  # a misspelt option or key, with the closest valid one
        sys.exit(2)
    try:
        print(describe(sys.argv[1:]))
    except LRABenchError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except HydraException as e:  # a malformed override or an unknown config option
        print(f"error: {str(e).splitlines()[0]}\n(overrides are key=value as for run.py, e.g. task=listops "
              "profile=paper; see --help)", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
