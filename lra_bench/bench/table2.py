"""Run the efficiency benchmark (LRA Table 2): every (length, mode) cell in a fresh process (``bench.cell``), results
stored one checksummed file per cell; finished cells are skipped, so an interrupted benchmark resumes."""

from __future__ import annotations

import datetime as dt
import logging
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from lra_bench.bench.isolated import run_isolated
from lra_bench.config.bench import bench_plan
from lra_bench.infra.memory import memory_kind
from lra_bench.store.files import stable_hash, write_json_atomic
from lra_bench.store.records import checksum, git_commit, read_record

log = logging.getLogger(__name__)
CELL_MODULE = "lra_bench.bench.cell"  # run as ``python -m`` in a fresh process per cell


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu-{platform.machine()}-{torch.get_num_threads()}threads"


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def cell_path(bench_dir: Path, device: str, attention: str, mode: str, n: int, batch: int, key_hash: str) -> Path:
    return Path(bench_dir) / slug(device) / attention / f"{mode}-N{n}-b{batch}-{key_hash[:10]}.json"


def run_benchmark(cfg: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every (length, mode) cell of a benchmark config (a composed configs/benchmark.yaml), each in a fresh process."""
    bp = bench_plan(cfg)
    label = device_label(bp.device)
    b = bp.settings
    results, failed = [], {}
    for n in sorted(b.seq_lens):
        for mode in b.modes:
            key = {"config": bp.semantic, "n": n, "batch": bp.batch, "mode": mode, "warmup": b.warmup,
                   "repeats": b.repeats, "device": label, "torch": torch.__version__}
            key_hash = stable_hash(key)
            path = cell_path(bp.bench_dir, label, bp.attention, mode, n, bp.batch, key_hash)
            previous = read_record(path) if path.is_file() else None  # a corrupt cell is run again
            if previous is not None and previous.get("status") == "ok":
                log.info("skip %s %s N=%d (done: %s)", bp.attention, mode, n, path)
                results.append(previous)
                continue
            if mode in failed:
                res = {"status": failed[mode][0], "message": f"not run: N={failed[mode][1]} already {failed[mode][0]}"}
            else:
                cell_config = {**bp.config, "task": {**bp.config["task"], "max_len": n}}
                payload = {"mode": mode, "config": cell_config, "n": n, "batch": bp.batch, "warmup": b.warmup,
                           "repeats": b.repeats, "device": str(bp.device)}
                res = run_isolated(CELL_MODULE, payload, timeout=b.timeout_s)
                if res["status"] in ("oom", "timeout"):
                    failed[mode] = (res["status"], n)
            model = bp.config["model"]
            record = {
                "attention": bp.attention, "task": bp.task, "profile": bp.profile, "mode": mode, "n": n,
                "batch": bp.batch, "device": label, "torch_version": torch.__version__, "git_commit": git_commit(),
                "model": {k: model[k] for k in ("dim", "depth", "num_heads", "mlp_dim")},
                "memory_kind": memory_kind(bp.device),
                "key_hash": key_hash, "created_at": dt.datetime.now(dt.UTC).isoformat(), **res,
            }
            record["checksum"] = checksum(record)
            write_json_atomic(path, record)
            results.append(record)
            if res["status"] == "ok":
                log.info("%s %s N=%d batch %d: %.4fs/step (IQR %.4f-%.4f), peak +%.1f MiB", bp.attention, mode, n,
                         bp.batch, res["median_s"], res["q1_s"], res["q3_s"], (res["peak_delta_bytes"] or 0) / 2**20)
            else:
                log.warning("%s %s N=%d: %s %s", bp.attention, mode, n, res["status"], res.get("message", ""))
    return results
