"""Is the data loader ever the bottleneck? Batches/s of the training batch iterator vs the model's step time.

For each task, composes ``configs/run.yaml`` with the chosen profile (default ``cpu``), loads the data the way a
run does (cached), then times (a) ``lra_bench.data.batches.train_batches`` alone over ``--batches`` batches
(numpy gather + int64 cast + tensor wrap) and (b) ``--steps`` full training steps of the profile's model (forward,
backward, AdamW; ``--warmup`` steps excluded). Prints one line per task.

Data: text and image read ``../shared/data/{imdb,cifar10}`` when present (else synthetic data of the same shape),
retrieval a fixture written by ``lra_bench.data.retrieval.fixture`` into the cache folder.

Run:  python tools/loader_throughput.py [--tasks text image retrieval] [--profile cpu] [--steps 20]
      [--override trainer.batch_size=64 ...]   (extra Hydra overrides applied to every task)
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import _repo  # noqa: F401  (this checkout's lra_bench first: tools/_repo.py)
import torch
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from lra_bench.config.plan import plan, use_deterministic_algorithms
from lra_bench.data.batches import train_batches
from lra_bench.data.retrieval.fixture import write_fixture
from lra_bench.train.loop import make_optimizer

ROOT = Path(__file__).resolve().parents[1]

SHARED = ROOT.parent / "shared" / "data"


def data_overrides(task: str, cache_dir: Path) -> list[str]:
    if task in ("text", "image"):
        folder = SHARED / ("imdb" if task == "text" else "cifar10")
        return [f"task.data_dir={folder}"] if folder.is_dir() else ["task.source=synthetic"]
    if task == "retrieval":
        fixture = cache_dir / "retrieval_fixture"
        if not (fixture / "new_aan_pairs.test.tsv").is_file():
            write_fixture(fixture)
        return [f"task.data_dir={fixture}"]
    return []


def measure(task: str, profile: str, extra: list[str], cache_dir: Path, n_batches: int, steps: int,
            warmup: int) -> str:
    overrides = [f"task={task}", f"profile={profile}", f"paths.cache_dir={cache_dir}",
                 *data_overrides(task, cache_dir), *extra]
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        cfg = compose(config_name="run", overrides=overrides)
    OmegaConf.resolve(cfg)
    p = plan(cfg)
    use_deterministic_algorithms(p.trainer.deterministic)  # as a run trains (plan() leaves it to the runner)
    data = p.task.load(p.cache_dir)
    x, y = data.inputs["train"], data.labels["train"]
    bs = p.trainer.batch_size

    batches = train_batches(x, y, bs, seed=0)
    next(batches)
    t0 = time.perf_counter()
    for _ in range(n_batches):
        next(batches)
    loader_s = (time.perf_counter() - t0) / n_batches

    model = p.model.to(p.device).train()
    optimizer, _ = make_optimizer(model, p.trainer)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches = train_batches(x, y, bs, seed=1)
    durations = []
    for step in range(warmup + steps):
        t0 = time.perf_counter()
        xb, yb = next(batches)
        loss = loss_fn(model(xb.to(p.device)).float(), yb.to(p.device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if p.device.type == "cuda":
            torch.cuda.synchronize(p.device)
        if step >= warmup:
            durations.append(time.perf_counter() - t0)
    step_s = sum(durations) / len(durations)
    shape = "x".join(map(str, x.shape[1:]))
    return (f"{task:9s} [{profile}, bs {bs}, {shape} {x.dtype}, {data.meta.get('source')}]: loader "
            f"{1 / loader_s:8.1f} batches/s ({loader_s * 1e3:6.2f} ms/batch) | model step {step_s * 1e3:7.1f} ms "
            f"({1 / step_s:5.2f} steps/s, {steps} steps) | loader = {100 * loader_s / step_s:.2g}% of a step")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["text", "image", "retrieval"])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--batches", type=int, default=200, help="batches timed for the loader alone")
    parser.add_argument("--steps", type=int, default=20, help="training steps timed")
    parser.add_argument("--warmup", type=int, default=3, help="training steps run before timing")
    parser.add_argument("--override", nargs="*", default=[], help="extra Hydra overrides for every task")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(os.environ.get("LRA_CACHE_DIR", ROOT / ".cache" / "lra_bench")))
    a = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    for task in a.tasks:
        print(measure(task, a.profile, a.override, a.cache_dir, a.batches, a.steps, a.warmup), flush=True)


if __name__ == "__main__":
    main()
