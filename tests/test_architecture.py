"""The layers of docs/architecture.md hold: the document matches the code, imports only go down the layers, and
nothing but the entry points imports the runner."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from tests.conftest import ROOT

spec = importlib.util.spec_from_file_location("architecture", ROOT / "scripts" / "architecture.py")
architecture = importlib.util.module_from_spec(spec)
spec.loader.exec_module(architecture)


def test_docs_architecture_is_generated_from_the_current_code():
    proc = subprocess.run([sys.executable, "scripts/architecture.py", "--check"], cwd=ROOT, capture_output=True,
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
        if "lra_bench.runner" in architecture.imports_of(path):
            assert architecture.layer_of(module) == "entry points", module
