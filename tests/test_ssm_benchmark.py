"""Table 2 for the state-space model (issue 45): ``scripts/benchmark.py attention=s4d model=ssm`` (and lru)."""

from __future__ import annotations

import pandas as pd
import pytest

from lra_bench.bench.table2 import run_benchmarks
from lra_bench.config.bench import bench_plan
from lra_bench.reports.bubble import bubble_data
from lra_bench.reports.efficiency import load_cells, table2
from tests.conftest import compose_run


def test_model_ssm_takes_the_profiles_size_without_its_transformer_keys(tmp_path):
    bp = bench_plan(compose_run(["attention=s4d", "model=ssm"], tmp_path, config_name="benchmark"))  # profile=cpu
    assert bp.block == "ssm" and bp.dropped == ["mlp_dim", "num_heads", "pool", "positions"]
    model = bp.config["model"]
    assert (model["dim"], model["depth"]) == (64, 2) and not {"num_heads", "mlp_dim"} & set(model)
    transformer = bench_plan(compose_run(["attention=softmax"], tmp_path, config_name="benchmark"))
    assert transformer.block == "transformer" and transformer.dropped == []


@pytest.mark.slow
def test_s4d_and_lru_cells_in_the_ssm_block_beside_softmax(tmp_path):
    """Both modes ok; Table 2 gives the model=ssm block its own table with ratios to the Transformer's softmax; the
    chart plots s4d and lru from their model=ssm cells, labelled, beside softmax."""
    common = ["task=listops", "profile=smoke", "bench.seq_lens=[64]", "bench.warmup=1", "bench.repeats=2"]
    plans = [bench_plan(compose_run([f"attention={name}", "model=ssm", *common], tmp_path, config_name="benchmark"))
             for name in ("s4d", "lru")]
    plans.append(bench_plan(compose_run(["attention=softmax", *common], tmp_path, config_name="benchmark")))
    cells = run_benchmarks(plans)
    assert len(cells) == 6 and all(c["status"] == "ok" for c in cells), cells
    assert {c["block"] for c in cells if c["attention"] != "softmax"} == {"ssm"}
    df = load_cells(tmp_path / "bench")
    table, md = table2(df, "model")
    assert "the `model=ssm` block" in md
    ssm = table[table["block"] == "ssm"].set_index("attention")
    assert set(ssm.index) == {"s4d", "lru"} and all("(-)" not in v for v in ssm["steps/s N=64"])  # a ratio to softmax
    df["machine.busy"] = False  # this shared machine may be busy: that verdict is tests/test_busy_machine.py's
    points, omitted, meta = bubble_data(pd.Series({"s4d": 40.0, "lru": 41.0, "softmax": 39.0}), df)
    assert set(points["attention"]) == {"s4d", "lru", "softmax"} and meta["ssm_block"] == ["lru", "s4d"]
