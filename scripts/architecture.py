"""Write docs/architecture.md: the package's layers and who imports whom, read from the code's own imports.

    python scripts/architecture.py            # rewrite docs/architecture.md
    python scripts/architecture.py --check    # exit 1 when docs/architecture.md is out of date (the tests run this)

Every module belongs to the first layer whose prefix matches it (LAYERS, top to bottom); an edge A -> B means some
module of A imports some module of B (at module level or inside a function).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "architecture.md"

#: (layer, module prefixes, paragraph); order = top (entry points) to bottom (foundation)
LAYERS: list[tuple[str, tuple[str, ...], str]] = [
    ("entry points", ("run", "scripts."),
     "`run.py` (Hydra: one run, or a multirun with one child process per job) and `scripts/` (data preparation, the "
     "efficiency benchmark, reports, this diagram). They parse the command line and call one function below; only "
     "they (and the tests) import `lra_bench.runner`."),
    ("runner", ("lra_bench.runner", "lra_bench.runlock", "lra_bench.distributed", "lra_bench.sweeps"),
     "`runner.py` orchestrates one run: the per-run lock, signals, data, training, the test evaluation and the "
     "record (skip finished, resume, failure records). `runlock.py` is the lock, `distributed.py` DDP, `sweeps.py` "
     "the summary at the end of a multirun. Nothing in the library imports the runner."),
    ("bench", ("lra_bench.bench.cell", "lra_bench.bench.table2", "lra_bench.bench.isolated", "lra_bench.bench.peers"),
     "The efficiency benchmark (LRA Table 2): `table2.py` runs every (length, mode) cell of a benchmark config, "
     "each in a fresh process (`isolated.py`) running `cell.py`, which times the trainer's own step "
     "(`train/step.py`) and measures its peak memory. `peers.py` pairs our layers with the PyPI packages' at "
     "matched settings (`scripts/bench_peers.py`)."),
    ("build", ("lra_bench.build", "lra_bench.models"),
     "`build.py` turns config sections into a validated task, model, trainer settings and device (`plan(cfg)`), "
     "for the runner, the benchmark and the scripts alike. `models/` holds the encoder and classifiers, the "
     "state-space block of `model=ssm` (`ssm.py`) and `factory.py`, which validates an attention config against its "
     "class and returns the partial the encoder completes."),
    ("train", ("lra_bench.train",),
     "The training loop (`loop.py`), the one optimizer step shared with the benchmark (`step.py`), the AdamW "
     "parameter groups from the mixers' declared settings (`param_groups.py`), LRA's schedules, the typed trainer "
     "settings and resumable, checksummed checkpoints."),
    ("attention", ("lra_bench.attention",),
     "The zoo: `base.py` holds `TokenMixer` (the contract checks, output dropout and registry) and "
     "`Attention(TokenMixer)` (q/k/v and output projections around `attend`); `_sparse.py` gives the sparse "
     "variants their two kernels (blocked reference, FlexAttention block mask from `_flex.py`); one file per "
     "variant, each registered by its `name`."),
    ("data", ("lra_bench.data",),
     "Tasks (the task contract and one `*_task.py` per LRA task), generators and readers, tokenisers and the "
     "build-once Arrow cache (`cache.py`)."),
    ("reports", ("lra_bench.reports", "lra_bench.paper", "lra_bench.stats"),
     "Table 1, Table 2, the bubble chart, accuracy plots and validation curves, and the planning table "
     "(`planning.py`), read from the results store through `records.py`; `paper.py` holds the LRA paper's "
     "numbers; `stats/` the statistics behind every accuracy (intervals, the paired test with Holm's correction, "
     "rank reliability) and `reports/significance.py` applies them to the records."),
    ("measurement", ("lra_bench.bench.timing", "lra_bench.bench.memory", "lra_bench.bench"),
     "Leaves of `lra_bench/bench/` that the trainer uses too: step timing, warm-up/repeats/medians, peak memory, "
     "OOM classification."),
    ("store", ("lra_bench.records", "lra_bench.predictions"),
     "`records.py`: the run record, its checksum and the one reading rule (`load_verified`, `read_record`, "
     "`read_tree`) for the runner, the benchmark and every report; `predictions.py`: the per-example test "
     "predictions a record keeps (compact, with the test set's fingerprint)."),
    ("foundation", ("lra_bench",),
     "`errors.py` (every error the harness raises; `ConfigError` for every bad knob), `files.py` (the one place "
     "for hashing -- `stable_hash`, `file_sha256` -- and atomic writes -- `atomic_open`, `write_json_atomic`), "
     "`config.py` (typed "
     "validation of config sections against signatures, choices from `Literal`s, the config hash), "
     "`suggest.py` (closest valid names), `progress.py` (progress bars), `loggers.py` (logger settings and the "
     "optional wandb mirror)."),
]


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> str | None:
    for name, prefixes, _ in LAYERS:
        for prefix in prefixes:
            if module == prefix.rstrip(".") or module.startswith(prefix if prefix.endswith(".") else prefix + ".") \
                    or module == prefix:
                return name
    return None


def imports_of(path: Path) -> set[str]:
    """The lra_bench modules ``path`` imports (``from lra_bench.x import y`` counts x.y when that is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("lra_bench")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("lra_bench"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                is_module = (ROOT / Path(*sub.split("."))).with_suffix(".py").exists() or \
                    (ROOT / Path(*sub.split("."))).is_dir()
                found.add(sub if is_module else node.module)
    return found


def sources() -> list[Path]:
    return [ROOT / "run.py", *sorted((ROOT / "scripts").glob("*.py")), *sorted((ROOT / "lra_bench").rglob("*.py"))]


def graph() -> tuple[dict[tuple[str, str], set[str]], dict[str, list[str]]]:
    """Layer edges (with the importing modules behind each) and each layer's modules."""
    edges: dict[tuple[str, str], set[str]] = {}
    members: dict[str, list[str]] = {name: [] for name, _, _ in LAYERS}
    for path in sources():
        module = module_name(path)
        source = layer_of(module)
        if source is None:
            continue
        members[source].append(module)
        for target_module in imports_of(path):
            target = layer_of(target_module)
            if target is not None and target != source:
                edges.setdefault((source, target), set()).add(f"{module} -> {target_module}")
    return edges, members


def render() -> str:
    edges, members = graph()
    ids = {name: name.replace(" ", "_") for name, _, _ in LAYERS}
    lines = ["# Architecture", "",
             "Generated by `python scripts/architecture.py` from the code's imports; do not edit by hand "
             "(tests/test_architecture.py fails when it is out of date).", "",
             "An arrow A --> B: some module of layer A imports some module of layer B.", "", "```mermaid",
             "flowchart TD"]
    lines += [f"    {ids[name]}[\"{name}\"]" for name, _, _ in LAYERS]
    lines += [f"    {ids[a]} --> {ids[b]}" for a, b in sorted(edges, key=lambda e: (order(e[0]), order(e[1])))]
    lines += ["```", "", "## Layers", ""]
    for name, _, paragraph in LAYERS:
        listed = [m for m in sorted(members[name]) if not is_variant(m)]
        variants = " and one module per variant, `lra_bench.attention.NAME` (`list_attentions()` names them)" \
            if len(listed) < len(members[name]) else ""
        lines += [f"### {name}", "", paragraph, "",
                  "Modules: " + ", ".join(f"`{m}`" for m in listed) + variants + ".", ""]
        uses = sorted({b for a, b in edges if a == name}, key=order)
        used_by = sorted({a for a, b in edges if b == name}, key=order)
        lines += [f"Imports from: {', '.join(uses) or 'nothing in the package'}. "
                  f"Imported by: {', '.join(used_by) or 'nothing'}.", ""]
    return "\n".join(lines).rstrip() + "\n"


def is_variant(module: str) -> bool:
    """An attention variant's own module (``lra_bench.attention.NAME``): not listed one by one, so adding a variant
    leaves this document as it is unless the variant imports from a new layer."""
    parts = module.split(".")
    return len(parts) == 3 and parts[:2] == ["lra_bench", "attention"] and parts[2] != "base" \
        and not parts[2].startswith("_")


def order(layer: str) -> int:
    return [name for name, _, _ in LAYERS].index(layer)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="compare with docs/architecture.md instead of writing")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run python scripts/architecture.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
