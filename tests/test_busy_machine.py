"""Speeds that know the machine (issue 41): every benchmark cell and run record keeps the load and the cores other
work used while it was timed; a cell timed on busy cores is marked in Table 2 and left out of the bubble chart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from lra_bench.bench.interleaved import bursts
from lra_bench.bench.table2 import run_benchmarks
from lra_bench.config.bench import bench_plan
from lra_bench.infra.machine import BUSY_MARGIN, CoreUse, usable_cores
from lra_bench.reports.bubble import bubble_data
from lra_bench.reports.efficiency import load_cells, table2
from tests.conftest import compose_run

SPIN = """
import os, sys
for _ in range(int(sys.argv[1]) - 1):
    if os.fork() == 0:
        break
print("spinning", flush=True)
while True:
    pass
"""


def test_the_verdict_compares_other_work_with_the_spare_cores():
    use = CoreUse(threads=1, cores=2, wall_s=10.0, busy_s=10.0 + 10.0 * (1 + BUSY_MARGIN) + 1.0, own_s=10.0)
    assert use.summary()["busy"] is True and use.summary()["other_cores"] == pytest.approx(1 + BUSY_MARGIN + 0.1)
    use = CoreUse(threads=1, cores=2, wall_s=10.0, busy_s=19.0, own_s=10.0)  # 0.9 cores beside a 1-thread cell
    assert use.summary()["busy"] is False
    use = CoreUse(threads=2, cores=2, wall_s=10.0, busy_s=25.0, own_s=20.0)  # 0.5 cores: none were spare
    assert use.summary()["busy"] is True
    assert CoreUse(threads=1, busy_s=None).summary()["busy"] is None  # no /proc/stat: unknown, never "idle"


def test_short_bursts_on_an_idle_machine_are_not_busy():
    """/proc/stat counts whole ticks: a core woken for a 5 ms burst can be charged a 10 ms tick. 400 such bursts on
    2 cores read as ~0.6 other cores on an idle machine; the bound (intervals x cores x tick / wall) absorbs it, and
    the same excess over one long interval still counts."""
    tick = 1 / os.sysconf("SC_CLK_TCK")
    short = CoreUse(threads=2, cores=2, wall_s=2.0, busy_s=4.0 * 0.65 + 1.2, own_s=4.0 * 0.65, intervals=400)
    assert short.other_cores == pytest.approx(0.6) and short.tick_cores == pytest.approx(400 * 2 * tick / 2.0)
    assert short.summary()["busy"] is False and short.summary()["tick_cores"] == pytest.approx(400 * 2 * tick / 2.0)
    long = CoreUse(threads=2, cores=2, wall_s=2.0, busy_s=4.0 * 0.65 + 1.2, own_s=4.0 * 0.65, intervals=1)
    assert long.summary()["busy"] is True
    use = CoreUse(threads=2)  # measured: a second of 5 ms bursts here reads idle (this suite runs tests in parallel,
    for _ in range(100):  # so only the tick bound is asserted, not the verdict)
        with use.measuring():
            time.sleep(0.005)
    assert use.intervals == 100 and use.tick_cores == pytest.approx(100 * use.cores * tick / use.wall_s)


def test_repeats_split_into_rounds():
    assert bursts(5, 3) == [2, 2, 1] and bursts(2, 3) == [1, 1] and bursts(4, 1) == [4]


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/stat"), reason="needs /proc/stat (Linux)")
def test_a_benchmark_on_busy_cores_marks_its_cells_and_the_chart_leaves_them_out(tmp_path):
    """Two spinning processes per usable core beside a two-variant benchmark (timed in turns): both cells are marked
    busy, Table 2 says so and counts them, the bubble chart plots neither and says why."""
    spinners = 2 * usable_cores()
    child = subprocess.Popen([sys.executable, "-c", SPIN, str(spinners)], stdout=subprocess.PIPE,
                             process_group=0)  # its own group, killed as one, but in this session: a
    # new session is its own autogroup, which the kernel gives one fair share of the CPU (about a core), not 4 threads'
    try:
        seen = ""
        while seen.count("spinning") < spinners:  # every spinner has started (their lines may interleave)
            chunk = os.read(child.stdout.fileno(), 1024).decode()
            assert chunk, "the spinning child ended"
            seen += chunk
        plans = [bench_plan(compose_run([f"attention={name}", "task=listops", "profile=smoke", "bench.seq_lens=[128]",
                                         "bench.modes=[model]", "bench.warmup=1", "bench.repeats=60"], tmp_path,
                                        config_name="benchmark")) for name in ("softmax", "linear")]
        cells = run_benchmarks(plans)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
    assert [c["status"] for c in cells] == ["ok", "ok"], cells
    for cell in cells:
        machine = cell["machine"]
        assert machine["busy"] is True, json.dumps(machine)
        assert machine["other_cores"] > machine["usable_cores"] - machine["threads"] + BUSY_MARGIN
        assert len(machine["loadavg_before"]) == len(machine["loadavg_after"]) == 3
        assert cell["rounds"] == 3 and cell["interleaved_with"] == [{"softmax": "linear", "linear": "softmax"}[
            cell["attention"]]]
    df = load_cells(tmp_path / "bench")
    _, md = table2(df, "model")
    assert "(busy)" in md and "2 of 2 cells timed while other work used the cores" in md
    points, omitted, meta = bubble_data(pd.Series({"softmax": 40.0, "linear": 41.0}), df)
    assert points.empty and meta["busy_left_out"] == 2
    assert all("other work used" in why for why in omitted.values())
    assert f"{usable_cores()} usable cores" in meta["machine"]  # the chart states the machine
