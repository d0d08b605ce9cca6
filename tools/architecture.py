"""Write docs/architecture.md: the package's layers and who imports whom, read from the code's own imports.

    python tools/architecture.py            # rewrite docs/architecture.md
    python tools/architecture.py --check    # exit 1 when docs/architecture.md is out of date (the tests run this)

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
    ("entry points", ("run", "scripts.", "tools."),
     "`run.py` (Hydra: one run, or a multirun with one child process per job), `scripts/` (the commands a user runs: "
     "data preparation, the efficiency benchmark, reports, the planner, the CPU sweep, the local SLURM cluster) and "
     "`tools/` (developer diagnostics: peer and kernel benchmarks, the GPU visit, this diagram). They parse the "
     "command line and call one function below; only they (and the tests) import `lra_bench.run`."),
    ("run", ("lra_bench.run",),
     "Running jobs: `runner.py` orchestrates one run (the per-run lock, signals, data, training, the test evaluation "
     "and the record: skip finished, resume, failure records), `sweeps.py` the summary at the end of a multirun (a "
     "Hydra callback), `scheduler.py` the hand-over to a cluster scheduler's signal handler. It may read the "
     "DictConfig, only to hand it to `config`; nothing in the library imports it."),
    ("bench", ("lra_bench.bench",),
     "The efficiency benchmark (LRA Table 2): `table2.py` runs every (length, mode) cell of a "
     "`config.bench.BenchPlan`, each in a fresh process (`isolated.py`) running `cell.py`, which times the "
     "trainer's own step (`train/step.py`) and measures its peak memory; the variants of one sweep are timed in "
     "turns, one served cell process each (`interleaved.py`). `peers.py` pairs our layers with the PyPI packages' "
     "at matched settings (`tools/bench_peers.py`). No config library: plans and plain dicts."),
    ("config", ("lra_bench.config",),
     "The only room below the entry points that reads Hydra's configs: `plan.py` turns a run config into the typed "
     "`Plan` (task, model, trainer and logger settings, device, paths, hash) that everything below receives; "
     "`bench.py` the same for a benchmark config; `attention.py` resolves an attention config's class and returns "
     "the partial the encoder completes; `sections.py` holds the config hash, the config groups and `_target_` "
     "resolution; `overrides.py` the 'did you mean' of misspelt command-line overrides (of every choice a "
     "sweep makes); `yaml_syntax.py` names a config file that is not valid YAML, with its line."),
    ("models", ("lra_bench.models",),
     "The encoder and classifiers (`encoder.py`), the state-space block of `model=ssm` (`ssm.py`), Mega's own "
     "block and classifier of `model=mega` (`mega.py`)."),
    ("train", ("lra_bench.train",),
     "The training loop (`loop.py`), the one optimizer step shared with the benchmark (`step.py`), the AdamW "
     "parameter groups from the mixers' declared settings (`param_groups.py`), LRA's schedules, the typed trainer "
     "settings, resumable, checksummed checkpoints that carry their run's identity, and the mixer contract checked "
     "at run time (`contract.py`)."),
    ("attention", ("lra_bench.attention",),
     "The zoo: `base.py` holds `TokenMixer` (the contract checks, output dropout and registry) and "
     "`Attention(TokenMixer)` (q/k/v and output projections around `attend`); `_sparse.py` gives the sparse "
     "variants their two kernels (blocked reference, FlexAttention block mask from `_flex.py`); one file per "
     "variant, each registered by its `name`."),
    ("data", ("lra_bench.data",),
     "Tasks: the task contract (`task.py`) and one folder per LRA task (`listops/`, `pathfinder/`, `text/`, "
     "`image/`, `retrieval/`: its task class, generator, file readers), and the pieces they share: the "
     "build-once Arrow cache (`cache.py`), batches, byte tokens, pixel pooling, Hub access."),
    ("reports", ("lra_bench.reports", "lra_bench.stats"),
     "Table 1, Table 2, the bubble chart, accuracy plots and validation curves, and the planners (`planning.py`: a "
     "run's wall time; `power_plan.py`: seeds and test examples for a target detectable gap), read from the "
     "results store; `paper.py` holds the LRA paper's numbers; `stats/` the statistics behind every accuracy "
     "(intervals over seeds and test examples, the paired test with Holm's correction, equivalence and "
     "non-inferiority, the confidence set for the best, power, rank reliability) and `reports/significance.py` "
     "and `verdicts.py` apply them to the records."),
    ("infra", ("lra_bench.infra",),
     "Services both training and benchmarking use, importing neither: peak memory and allocator settings, OOM "
     "classification (`memory.py`), step timing with warm-up, repeats and medians (`timing.py`), the machine and "
     "the cores other work used while something was timed (`machine.py`), progress bars, loggers (the optional "
     "wandb mirror), the per-run lock, DDP process groups, child processes that die with their parent "
     "(`children.py`)."),
    ("store", ("lra_bench.store",),
     "Keeping results: `records.py` (the run record, its checksum and the one reading rule for the runner, the "
     "benchmark and every report), `predictions.py` (the per-example test predictions a record keeps), `files.py` "
     "(hashing and atomic writes), `migrate.py` (records carried across a change of the config layout)."),
    ("foundation", ("lra_bench",),
     "`errors.py` (every error the harness raises; `ConfigError` for every bad knob; the exit codes) and "
     "`checks.py` (plain-dict validation against signatures, the ranges annotations declare (`Range`), choices "
     "from `Literal`s, 'did you mean'): no config library."),
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
    return [ROOT / "run.py", *sorted((ROOT / "scripts").glob("*.py")), *sorted((ROOT / "tools").glob("*.py")),
            *sorted((ROOT / "lra_bench").rglob("*.py"))]


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
             "Generated by `python tools/architecture.py` from the code's imports; do not edit by hand "
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
            print(f"{OUT} is out of date: run python tools/architecture.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
