"""Run the efficiency benchmark (LRA Table 2): every (length, mode) cell in a fresh process (``bench.cell``), results
stored one checksummed file per cell; finished cells are skipped, so an interrupted benchmark resumes."""

from __future__ import annotations

import datetime as dt
import logging
import platform
import re
from pathlib import Path
from typing import Any

import torch
from omegaconf import DictConfig, OmegaConf

from lra_bench.bench.isolated import run_isolated
from lra_bench.bench.memory import memory_kind
from lra_bench.build import build_model, build_task, resolve_device
from lra_bench.config import positive
from lra_bench.errors import ConfigError
from lra_bench.files import stable_hash, write_json_atomic
from lra_bench.models.factory import attention_name
from lra_bench.records import checksum, git_commit, read_record

log = logging.getLogger(__name__)
MODES = ("model", "attention")
CELL_MODULE = "lra_bench.bench.cell"  # run as ``python -m`` in a fresh process per cell
CPU_DEFAULT_BATCH, CUDA_DEFAULT_BATCH = 4, 32


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu-{platform.machine()}-{torch.get_num_threads()}threads"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def validate(cfg: DictConfig) -> tuple[str, torch.device, int]:
    """Check the whole benchmark config (and that the model builds) before any cell runs."""
    b = cfg.bench
    lens = list(b.seq_lens)
    if not lens or any(not isinstance(n, int) or n <= 0 for n in lens):
        raise ConfigError(f"bench.seq_lens must be a non-empty list of positive ints, got {lens}")
    bad = [m for m in b.modes if m not in MODES]
    if bad or not b.modes:
        raise ConfigError(f"bench.modes must be a subset of {MODES}, got {list(b.modes)}")
    positive("bench", repeats=b.repeats, timeout_s=b.timeout_s, batch_size=b.batch_size)
    if b.warmup < 0:
        raise ConfigError(f"bench.warmup must be >= 0, got {b.warmup}")
    device = resolve_device(b.device)
    batch = b.batch_size or (CUDA_DEFAULT_BATCH if device.type == "cuda" else CPU_DEFAULT_BATCH)
    name = attention_name(cfg.attention)
    probe = OmegaConf.create(OmegaConf.to_container(cfg, resolve=True))
    probe.task.source = "synthetic"
    probe.task.max_len = min(lens)
    build_model(probe, probe.attention, build_task(probe.task))  # raises ConfigError on bad model/attention keys
    return name, device, batch


def cell_path(bench_dir: Path, device: str, attention: str, mode: str, n: int, batch: int, key_hash: str) -> Path:
    return Path(bench_dir) / slug(device) / attention / f"{mode}-N{n}-b{batch}-{key_hash[:10]}.json"


def run_benchmark(cfg: DictConfig) -> list[dict[str, Any]]:
    name, device, batch = validate(cfg)
    label = device_label(device)
    config = OmegaConf.to_container(cfg, resolve=True)
    config["task"]["source"] = "synthetic"
    semantic = {k: v for k, v in config.items() if k not in ("paths", "logger", "bench", "hydra")}
    b = cfg.bench
    results, failed = [], {}
    for n in sorted(b.seq_lens):
        for mode in b.modes:
            key = {"config": semantic, "n": n, "batch": batch, "mode": mode, "warmup": b.warmup,
                   "repeats": b.repeats, "device": label, "torch": torch.__version__}
            key_hash = stable_hash(key)
            path = cell_path(Path(cfg.paths.bench_dir), label, name, mode, n, batch, key_hash)
            previous = read_record(path) if path.is_file() else None  # a corrupt cell is run again
            if previous is not None and previous.get("status") == "ok":
                log.info("skip %s %s N=%d (done: %s)", name, mode, n, path)
                results.append(previous)
                continue
            if mode in failed:
                res = {"status": failed[mode][0], "message": f"not run: N={failed[mode][1]} already {failed[mode][0]}"}
            else:
                cell_config = {**config, "task": {**config["task"], "max_len": n}}
                payload = {"mode": mode, "config": cell_config, "n": n, "batch": batch, "warmup": b.warmup,
                           "repeats": b.repeats, "device": str(device)}
                res = run_isolated(CELL_MODULE, payload, timeout=b.timeout_s)
                if res["status"] in ("oom", "timeout"):
                    failed[mode] = (res["status"], n)
            record = {
                "attention": name, "task": cfg.task.name, "profile": cfg.profile.name, "mode": mode, "n": n,
                "batch": batch, "device": label, "torch_version": torch.__version__, "git_commit": git_commit(),
                "model": {k: cfg.model[k] for k in ("dim", "depth", "num_heads", "mlp_dim")},
                "memory_kind": memory_kind(device),
                "key_hash": key_hash, "created_at": dt.datetime.now(dt.UTC).isoformat(), **res,
            }
            record["checksum"] = checksum(record)
            write_json_atomic(path, record)
            results.append(record)
            if res["status"] == "ok":
                log.info("%s %s N=%d batch %d: %.4fs/step (IQR %.4f-%.4f), peak +%.1f MiB", name, mode, n, batch,
                         res["median_s"], res["q1_s"], res["q3_s"], (res["peak_delta_bytes"] or 0) / 2**20)
            else:
                log.warning("%s %s N=%d: %s %s", name, mode, n, res["status"], res.get("message", ""))
    return results
