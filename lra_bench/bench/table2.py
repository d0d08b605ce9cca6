"""Run the efficiency benchmark (LRA Table 2): every (length, mode) cell in a fresh process (``bench.cell``), results
stored one checksummed file per cell; finished cells are skipped, so an interrupted benchmark resumes."""

from __future__ import annotations

import datetime as dt
import logging
import platform
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from lra_bench.bench.interleaved import Job, run_interleaved
from lra_bench.bench.isolated import run_isolated
from lra_bench.config.bench import BenchPlan, bench_plan
from lra_bench.infra.memory import memory_kind
from lra_bench.store.files import stable_hash, write_json_atomic
from lra_bench.store.records import checksum, git_commit, read_record

log = logging.getLogger(__name__)
CELL_MODULE = "lra_bench.bench.cell"  # run as ``python -m`` in a fresh process per cell
MODEL_SIZES = ("dim", "depth", "num_heads", "mlp_dim")  # kept in each cell (model=ssm has no heads, no mlp_dim)


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
    return run_benchmarks([bench_plan(cfg)])


@dataclass
class _Cell:
    plan: BenchPlan
    mode: str
    n: int
    key_hash: str
    path: Path


def run_benchmarks(plans: list[BenchPlan]) -> list[dict[str, Any]]:
    """The cells of several benchmark plans (the variants of one ``-m`` sweep), length by length and mode by mode;
    the cells of one (length, mode) are timed interleaved (``bench.interleaved``), one fresh process each. A cell
    that ran out of memory or time stops its variant's longer lengths in that mode."""
    results, failed = [], {}
    lengths = sorted({n for bp in plans for n in bp.settings.seq_lens})
    modes = list(dict.fromkeys(m for bp in plans for m in bp.settings.modes))
    for n in lengths:
        for mode in modes:
            todo = []
            for bp in plans:
                if n not in bp.settings.seq_lens or mode not in bp.settings.modes:
                    continue
                cell = _locate(bp, mode, n)
                previous = read_record(cell.path) if cell.path.is_file() else None  # a corrupt cell runs again
                if previous is not None and previous.get("status") == "ok":
                    log.info("skip %s %s N=%d (done: %s)", bp.attention, mode, n, cell.path)
                    results.append(previous)
                elif (bp.attention, mode) in failed:
                    how, at = failed[(bp.attention, mode)]
                    results.append(_write(cell, {"status": how, "message": f"not run: N={at} already {how}"}))
                else:
                    todo.append(cell)
            for cell, res in zip(todo, _measure(todo), strict=True):
                if res["status"] in ("oom", "timeout"):
                    failed[(cell.plan.attention, mode)] = (res["status"], n)
                results.append(_write(cell, res))
    return results


def _locate(bp: BenchPlan, mode: str, n: int) -> _Cell:
    b = bp.settings
    key = {"config": bp.semantic, "n": n, "batch": bp.batch, "mode": mode, "warmup": b.warmup,
           "repeats": b.repeats, "device": device_label(bp.device), "torch": torch.__version__}
    key_hash = stable_hash(key)
    return _Cell(bp, mode, n, key_hash, cell_path(bp.bench_dir, device_label(bp.device), bp.attention, mode, n,
                                                  bp.batch, key_hash))


def _payload(cell: _Cell) -> dict[str, Any]:
    bp, b = cell.plan, cell.plan.settings
    config = {**bp.config, "task": {**bp.config["task"], "max_len": cell.n}}
    return {"mode": cell.mode, "config": config, "n": cell.n, "batch": bp.batch, "warmup": b.warmup,
            "repeats": b.repeats, "device": str(bp.device)}


def _measure(cells: list[_Cell]) -> list[dict[str, Any]]:
    """Time ``cells`` (one length and mode): those whose plans say ``bench.interleaved`` in turns over
    ``bench.rounds`` rounds when there are two or more of them, every other one alone."""
    together = [c for c in cells if c.plan.settings.interleaved]
    if len(together) < 2:
        together = []
    out: dict[int, dict[str, Any]] = {}
    if together:
        jobs = [Job(c.plan.attention, _payload(c), c.plan.settings.timeout_s) for c in together]
        rounds = max(c.plan.settings.rounds for c in together)
        log.info("N=%d %s: timing %s in turns over %d rounds", cells[0].n, cells[0].mode,
                 ", ".join(j.label for j in jobs), rounds)
        out.update(zip(map(id, together), run_interleaved(jobs, rounds), strict=True))
    for cell in cells:
        if id(cell) not in out:
            out[id(cell)] = run_isolated(CELL_MODULE, _payload(cell), timeout=cell.plan.settings.timeout_s)
    return [out[id(c)] for c in cells]


def _write(cell: _Cell, res: dict[str, Any]) -> dict[str, Any]:
    bp = cell.plan
    model = bp.config["model"]
    record = {
        "attention": bp.attention, "task": bp.task, "profile": bp.profile, "mode": cell.mode, "n": cell.n,
        "batch": bp.batch, "device": device_label(bp.device), "torch_version": torch.__version__,
        "git_commit": git_commit(), "model": {k: model[k] for k in MODEL_SIZES if k in model}, "block": bp.block,
        "memory_kind": memory_kind(bp.device), **({"sizes_left_out": bp.dropped} if bp.dropped else {}),
        "key_hash": cell.key_hash, "created_at": dt.datetime.now(dt.UTC).isoformat(), **res,
    }
    record["checksum"] = checksum(record)
    write_json_atomic(cell.path, record)
    machine = res.get("machine") or {}
    if res["status"] == "ok":
        log.info("%s %s N=%d batch %d: %.4fs/step (IQR %.4f-%.4f), peak +%.1f MiB%s", bp.attention, cell.mode,
                 cell.n, bp.batch, res["median_s"], res["q1_s"], res["q3_s"], (res["peak_delta_bytes"] or 0) / 2**20,
                 f"; BUSY: other work used {machine['other_cores']:.2f} cores" if machine.get("busy") else "")
    else:
        log.warning("%s %s N=%d: %s %s", bp.attention, cell.mode, cell.n, res["status"], res.get("message", ""))
    return record
