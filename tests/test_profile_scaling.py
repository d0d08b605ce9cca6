"""tools/profile_scaling.py: the operators of the benchmark's step at several lengths, each with its exponent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

ROOT = Path(__file__).resolve().parents[1]


scaling_table = load_script("tools/profile_scaling.py", "lra_profile_scaling").scaling_table


def test_the_table_fits_each_operator_and_the_total_against_n():
    ns = [1024, 2048, 4096]
    per_n = [{"aten::bmm": 1.0 * (n / 1024) ** 2, "aten::add": 0.5 * n / 1024} for n in ns]  # N^2 and N^1
    md = scaling_table(ns, per_n, walls=[2.0, 6.0, 20.0], plain=[1.9, 5.0, 18.0], top=1)
    rows = {line.split(" | ")[0].lstrip("| "): line for line in md.splitlines()[2:]}
    assert list(rows) == ["`aten::bmm`", "the rest", "**total self CPU**", "wall per step, profiled",
                          "wall per step, not profiled (median)"]
    assert "| 2.00 [2.00, 2.00] |" in rows["`aten::bmm`"] and "| 1.00 [1.00, 1.00] |" in rows["the rest"]
    assert "| 88.9 % |" in rows["`aten::bmm`"]  # 16 of the 18 ms at the longest N
    assert rows["wall per step, profiled"].endswith("|  |")  # no share for the wall times


def test_an_operator_absent_at_some_lengths_gets_no_exponent_from_two_points():
    md = scaling_table([1, 2, 4], [{"a": 1.0}, {"a": 2.0, "b": 1.0}, {"a": 4.0, "b": 2.0}], walls=[1, 2, 4],
                       plain=[1, 2, 4], top=2)
    assert "- (2 lengths; needs >= 3)" in md.splitlines()[3]  # b: measured at two lengths only


@pytest.mark.slow
def test_the_tool_profiles_the_benchmarks_step_at_each_length(tmp_path):
    out = tmp_path / "profile.md"
    cmd = [sys.executable, str(ROOT / "tools" / "profile_scaling.py"), "attention=softmax", "task=listops",
           "model.dim=32", "model.depth=1", "model.num_heads=2", "model.mlp_dim=64", "--n", "32", "64", "128",
           "--batch", "2", "--warmup", "1", "--steps", "1", "--top", "4", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    md = out.read_text()
    assert md.startswith("# Operators against N: softmax, model mode")
    assert "Command: `python tools/profile_scaling" in md
    assert "| operator | ms at N=32 | ms at N=64 | ms at N=128 |" in md
    ops = [line for line in md.splitlines() if line.startswith("| `")]
    assert len(ops) == 4 and any("`aten::" in line for line in ops) and "**total self CPU**" in md
    assert "| the rest |" in md and "| wall per step, not profiled (median) |" in md
    few = subprocess.run([*cmd[:8], "--n", "32", "64"], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert few.returncode == 2 and "at least 3 distinct lengths" in few.stderr
