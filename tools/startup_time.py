"""Start-up to the first training step: ``run.py`` against a bare PyTorch loop training the same model.

Both are fresh processes timed from their start until they print the end of their first training step (``run.py``
with ``trainer.log_every=1`` logs "step 1 loss ..."; the bare loop prints "step 1"): the harness's share is Hydra's
composition, its imports, the config checks, the (cached) data, the logger and the checkpoint set-up. The bare loop
imports torch and the harness's model class only, builds the same model (the same config through ``config.plan``
would import the harness; its sizes are passed instead), feeds random token ids of the task's shape and takes one
AdamW step. The two are run in turns (``--repeats`` each, after one untimed harness run that fills the data cache);
medians, their ratio and the 1-minute load average before and after are printed and written as JSON.

    python tools/startup_time.py                       # listops, profile=smoke, softmax
    python tools/startup_time.py --attention s4d --out results/report/startup.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)

ROOT = Path(__file__).resolve().parents[1]

BARE = """
import sys, torch
from lra_bench.config.attention import build_attention_factory
from lra_bench.models.encoder import Classifier, Encoder
from omegaconf import OmegaConf
torch.manual_seed(0)
attention, (vocab, n, classes, batch) = sys.argv[1], map(int, sys.argv[2:6])
sizes = {"dim": 32, "depth": 1, "num_heads": 2, "mlp_dim": 64, "dropout": 0.1, "positions": "sinusoidal", "pool": "cls"}
encoder = Encoder(build_attention_factory(OmegaConf.load(f"configs/attention/{attention}.yaml")), vocab, n, 0, **sizes)
model = Classifier(encoder, sizes["mlp_dim"], classes)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randint(1, vocab, (batch, n)), torch.randint(0, classes, (batch,))
loss = torch.nn.functional.cross_entropy(model(x), y)
opt.zero_grad()
loss.backward()
opt.step()
print("step 1", flush=True)
"""


def time_to(marker: str, command: list[str], env: dict[str, str]) -> float:
    """Seconds from starting ``command`` until ``marker`` appears in its output (then it is left to finish)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = None
    for line in proc.stdout:
        if seen is None and marker in line:
            seen = time.perf_counter() - t0
    if proc.wait() != 0 or seen is None:
        raise SystemExit(f"{' '.join(command)} failed (exit {proc.returncode}) or never printed {marker!r}")
    return seen


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attention", default="softmax")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        harness = [sys.executable, "run.py", f"attention={args.attention}", "task=listops", "profile=smoke",
                   "trainer.max_steps=1", "trainer.log_every=1", "trainer.eval_every=1", "trainer.checkpoint_every=0",
                   "model.depth=1", "model.dim=32", "model.num_heads=2", "model.mlp_dim=64", "rerun=true",
                   f"paths.results_dir={tmp}/runs", f"paths.cache_dir={tmp}/cache"]
        bare = [sys.executable, "-c", BARE, args.attention, "17", "64", "10", "16"]  # vocab, N, classes, batch
        time_to("step 1 loss", harness, env)  # fills the data cache: every timed run reads it
        load_before = os.getloadavg()[0]
        times: dict[str, list[float]] = {"run.py": [], "bare": []}
        for _ in range(args.repeats):
            times["run.py"].append(time_to("step 1 loss", harness, env))
            times["bare"].append(time_to("step 1", bare, env))
        load_after = os.getloadavg()[0]
    medians = {k: statistics.median(v) for k, v in times.items()}
    result = {"attention": args.attention, "seconds": times, "median_s": medians,
              "ratio": medians["run.py"] / medians["bare"], "loadavg_1min": [load_before, load_after],
              "usable_cores": len(os.sched_getaffinity(0)), "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
              "command": "python tools/startup_time.py " + " ".join(sys.argv[1:])}
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
