"""The layers of docs/architecture.md hold: the document matches the code, imports only go down the layers, and
nothing but the entry points imports the runner."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("architecture", ROOT / "tools" / "architecture.py")
architecture = importlib.util.module_from_spec(spec)
spec.loader.exec_module(architecture)


def test_docs_architecture_is_generated_from_the_current_code():
    proc = subprocess.run([sys.executable, "tools/architecture.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


def test_every_module_has_a_layer_and_imports_only_go_down():
    for path in architecture.sources():
        assert architecture.layer_of(architecture.module_name(path)) is not None, path
    edges, _ = architecture.graph()
    upward = {edge: why for edge, why in edges.items() if architecture.order(edge[0]) > architecture.order(edge[1])}
    assert not upward, upward


def test_only_entry_points_import_the_runner():
    for path in architecture.sources():
        module = architecture.module_name(path)
        if "lra_bench.run.runner" in architecture.imports_of(path):
            assert architecture.layer_of(module) == "entry points", module


def direct_imports(path) -> set[str]:
    """The top-level packages ``path`` imports (at module level or inside a function)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


HYDRA_ROOMS = ("lra_bench.run", "lra_bench.config")  # the rooms that may read a DictConfig (and the entry points)


def test_no_module_below_run_but_build_imports_hydra_or_omegaconf():
    offenders = []
    for path in sorted((ROOT / "lra_bench").rglob("*.py")):
        module = architecture.module_name(path)
        if module.startswith(HYDRA_ROOMS):
            continue
        if direct_imports(path) & {"hydra", "omegaconf"}:
            offenders.append(module)
    assert not offenders, f"only lra_bench.config (and run, the entry points) may import Hydra/OmegaConf: {offenders}"


def test_the_rooms_below_build_load_without_hydra_or_omegaconf():
    """Not even through another module: train, models, attention, data, reports, infra and store work with plain
    settings, so importing all of them leaves the config libraries unloaded."""
    lower = [architecture.module_name(p) for p in sorted((ROOT / "lra_bench").rglob("*.py"))
             if not architecture.module_name(p).startswith((*HYDRA_ROOMS, "lra_bench.bench"))]
    code = ("import importlib, sys\n"
            f"for m in {lower!r}: importlib.import_module(m)\n"
            "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('hydra', 'omegaconf'))\n"
            "print(len(" + repr(lower) + "), loaded)\n"
            "sys.exit(1 if loaded else 0)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-2000:]
    assert len(lower) > 60  # the walk found the rooms (a wrong root would pass with nothing imported)


def test_scripts_holds_only_commands_the_docs_tell_a_user_to_run():
    import re

    docs = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    named = set(re.findall(r"scripts/(\w+\.(?:py|sh))", docs))
    commands = {p.name for p in (ROOT / "scripts").iterdir() if p.suffix in (".py", ".sh") and p.name != "_repo.py"}
    assert commands - named == set(), f"scripts/ holds commands no doc tells a user to run: {commands - named}"
    assert named - commands == set(), f"the docs name scripts that do not exist: {named - commands}"
    tools = {p.name for p in (ROOT / "tools").iterdir() if p.suffix in (".py", ".sh") and not p.name.startswith("_")}
    listed = set(re.findall(r"^\| `(\w+\.(?:py|sh))` \|", (ROOT / "tools" / "README.md").read_text(), re.M))
    assert tools == listed, f"tools/README.md must give one line per tool: {tools ^ listed}"
