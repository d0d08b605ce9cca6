"""Every duration in README.md and docs/ is either measured (followed by ``<!-- measured: NAME -->``, and equal to
what ``tools/durations.py`` computes for NAME from the committed records and benchmark cells) or listed below as
something that is not a measurement of this harness: a setting, a limit, a plan for the GPU machine, a tool's own
one-off measurement with its source, or a fault as it was observed. A new duration in the docs fails here until it
is one or the other."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lra_bench.reports.durations import Figure, figures_of, human, measured_figures

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

NUMBER = r"\d[\d,]*(?:\.\d+)?"
DURATION = re.compile(rf"(?<![\w.^])(?:{NUMBER}\s?[–-]\s?)?{NUMBER}\s?(?:s|sec|seconds|min|minutes|h|hours|days)\b")
MARK = re.compile(r"<!-- measured: ([\w.]+) -->")

# (file, a snippet of the line that holds the duration, why it is not a measured figure)
NOT_MEASURED = [
    ("README.md", "a run over about 15 minutes says", "setting: the progress bar's advice threshold"),
    ("docs/gpu_playbook.md", "about 15 minutes of device time", "limit: the GPU machine's lending rules"),
    ("docs/gpu_playbook.md", "at most 10 minutes per command", "limit: the GPU machine's lending rules"),
    ("docs/gpu_playbook.md", "(540 s of limits)", "limit: the visit script's per-stage timeouts"),
    ("docs/gpu_playbook.md", "Table 2 cells (540 s)", "limit: the visit script's per-stage timeouts"),
    ("docs/gpu_playbook.md", "a paper ListOps run (540 s)", "limit: the visit script's per-stage timeouts"),
    ("docs/gpu_playbook.md", "(est. 1-3 min", "plan: an estimate for planning a visit, named 'est.'"),
    ("docs/gpu_playbook.md", "(est. 2 min each)", "plan: an estimate for planning a visit, named 'est.'"),
    ("docs/gpu_playbook.md", "(est. 15-45 s per cell", "plan: an estimate for planning a visit, named 'est.'"),
    ("docs/gpu_playbook.md", "runs that finish inside 10 minutes", "limit: the GPU machine's per-command limit"),
    ("docs/gpu_playbook.md", "est. 6-8 min", "plan: an estimate for planning a visit, named 'est.'"),
    ("docs/gpu_playbook.md", "first 90 s of the `check` stage",
     "limit: visit 1's CHECK_S (results/gpu/protocols/visits)"),
    ("docs/gpu_playbook.md", "took 450 s for 22 of the 36", "measured: results/gpu/protocols/visits/visit1-summary.txt "
     "(tests/test_curated_results.py checks it)"),
    ("docs/gpu_playbook.md", "time 73 s, 6 pretrained or 6,000-step runs at a time 79 s",
     "measured: results/gpu/protocols/visits/visit2-, visit3-summary.txt (tests/test_curated_results.py checks them)"),
    ("docs/gpu_playbook.md", "est. 7 min", "plan: an estimate for planning a visit, named 'est.'"),
    ("docs/gpu_playbook.md", "needs est. 526-730 s of runs", "plan: 240,000 steps at the measured 329-456 steps/s, "
     "named 'est.'"),
    ("docs/gpu_playbook.md", "session's 900 s of device time", "limit: the GPU machine's lending rules"),
    ("docs/gpu_playbook.md", "minus about 60 s", "plan: an allowance for a machine's start and the packing"),
    ("docs/gpu_playbook.md", "waits up to 40 s after its limit", "setting: tools/gpu_visit.sh's wait_for_runs"),
    ("docs/sweeps.md", "a rank still in it after 60 s", "setting: lra_bench.infra.distributed.TEARDOWN_S"),
    ("docs/gpu_playbook.md", "for 30 s after a command", "limit: the device tool's warm window (its README)"),
    ("docs/benchmark.md", "took 90.5 min, 0.84", "measured: results/rerun_41/timing.json, the sweep's own wall time "
     "(test_curated_results checks it)"),
    ("docs/pathfinder_fidelity.md", "13.0 → 14.6 s CPU; curv_baseline 3.9 → 3.5 s",
     "tool: a one-off generator timing, the before/after of a change, named as such"),
    ("docs/pathfinder_fidelity.md", "2.2 → 2.4 s, so the profile's 20,000 images take about 24 s",
     "tool: a one-off generator timing, the before/after of a change, named as such"),
    ("docs/tasks.md", "took 49.7 s with the former serial generator and 21.7 s / 14.1 s",
     "tool: a one-off generator timing ('one measurement'), named as such"),
    ("docs/records.md", "(1, 5, 15 min)", "setting: the load averages' windows, a field's description"),
    ("docs/benchmark.md", "93.2 s per step against 203 MiB and 15.1 s with",
     "tool: tools/bench_flash.py at N=4096, a one-off measurement named as such"),
    ("docs/benchmark.md", "reformer at 1K (ours 2.16-2.59 s", "cell: results/speed_cpu/peers/peers.json (its README)"),
    ("docs/benchmark.md", "1.90-2.11 s), so only that gap", "cell: results/speed_cpu/peers/peers.json (its README)"),
    ("docs/benchmark.md", "(model mode; 2.15 s at 1K, 28.5 s at 16K)",
     "cell: results/speed_cpu/s4d_scaling (its README has the command)"),
    ("docs/benchmark.md", "0.58 / 1.15 / 3.28 s (S4D) and 0.86 / 2.30 / 6.51 s",
     "cell: results/speed_cpu/ssm_bench (its README has the command)"),
    ("docs/benchmark.md", "(each side took 2-6 minutes at a CPU", "tool: tools/train_vs_bench.py's run, as observed"),
    ("docs/benchmark.md", "took 15.8, 11.9, 6.7, then 4.2, 4.0, 3.8, 4.8 s per step, against the cell's 4.6-4.8 s",
     "tool: one instrumented run.py (the step timer printing each step), a one-off named as such; the cell's from "
     "results/speed_cpu/train_vs_bench_warm"),
    ("docs/benchmark.md", "(its cell is 88.9 s per step here", "cell: results/speed_cpu/train_vs_bench_idle"),
    ("docs/benchmark.md", "cell 78.4 s, run.py 74.9 s per step",
     "cell: results/speed_cpu/train_vs_bench_softmax/train_vs_bench.json"),
    ("docs/benchmark.md", "(steps of 3.3-3.8 s, 2.6-3.0 s and 3.2-3.9 s per side)",
     "cell and record: the rows of results/speed_cpu/train_vs_bench_rounds5/train_vs_bench.json"),
    ("docs/benchmark.md", "2.159 s against 13.800 s per step",
     "tool: results/speed_cpu/s4d_kernel_ab/width256.md (tools/s4d_kernel_ab.py, the medians of its 16K row)"),
    ("docs/benchmark.md", "40.3 and 40.7 s, run.py 39.9 and 38.9 s per step",
     "cell and record: the rows of results/speed_cpu/train_vs_bench_softmax_rounds2/train_vs_bench.json"),
    ("docs/benchmark.md", "a ListOps run took a median 1.7 minutes",
     "measured: the median wall_time_s of the redo's records (results/cpu/runs); "
     "tests/test_curated_results.py recomputes it"),
    ("docs/benchmark.md", "a text run took a median 4.0 minutes",
     "measured: the median wall_time_s of the redo's records (results/cpu/runs); "
     "tests/test_curated_results.py recomputes it"),
    ("docs/benchmark.md", "an image run took a median 4.0 minutes",
     "measured: the median wall_time_s of the redo's records (results/cpu/runs); "
     "tests/test_curated_results.py recomputes it"),
    ("docs/benchmark.md", "a Pathfinder run took a median 1.4 minutes",
     "measured: the median wall_time_s of the redo's records (results/cpu/runs); "
     "tests/test_curated_results.py recomputes it"),
    ("docs/benchmark.md", "(softmax at 4K 4.89 s)",
     "cell: the table before the re-timing, git show 9860203:results/cpu/bench (CURATED names it)"),
    ("docs/benchmark.md", "Intel host: s4d 2.19 s, lru",
     "cell: the cpu_ssm table before the re-timing, git show 9860203:results/cpu_ssm/bench (CURATED names it)"),
    ("docs/benchmark.md", "2.13 s, softmax 15.0 s at 4K) is in the history",
     "cell: the cpu_ssm table before the re-timing, git show 9860203:results/cpu_ssm/bench (CURATED names it)"),
    ("docs/benchmark.md", "about 8x (2.45 s against 19.9 s at 4K)",
     "cell: results/speed_cpu/peers_mega_mamba/peers.json (its README has the command)"),
    ("docs/benchmark.md", "about 2x (3.66 s against 8.11 s at 4K)",
     "cell: results/speed_cpu/peers_mega_mamba/peers.json (its README has the command)"),
    ("docs/benchmark.md", "(Mamba: 0.36 s at 1K, 3.21 s at 8K)",
     "cell: results/speed_cpu/scaling_38/mamba (its README has the command)"),
    ("docs/benchmark.md", "(Mega-chunk: 0.13 s and 0.96 s)",
     "cell: results/speed_cpu/scaling_38/mega_chunk (its README has the command)"),
    ("docs/benchmark.md", "softmax's cell took 114.8 s per step",
     "cell: results/speed_cpu/train_vs_bench/train_vs_bench.json"),
    ("docs/reliability.md", "still running 32 minutes later", "fault: what was observed before the fix"),
    ("docs/reliability.md", "waited 30 s on a zombie", "fault: what was observed before the fix"),
    ("docs/sweeps.md", "(720 = 12 h", "setting: the launcher's timeout_min"),
    ("docs/sweeps.md", "(120 s before the limit", "setting: the launcher's signal_delay_s"),
    ("docs/sweeps.md", "(or within 10 minutes of it)", "limit: submitit's rule, quoted"),
    ("docs/sweeps.md", "runs again within ~15 s", "setting: the local cluster's credential lifetime"),
    ("docs/benchmark.md", "| mega | 0.07 | package timed out (600 s)",
     "limit: tools/bench_peers.py's per-cell timeout"),
    ("docs/benchmark.md", "first idle run (ours 3.53 s, the package's 1.76 s)",
     "cell: results/speed_cpu/peers_idle/peers.json (its README)"),
    ("docs/benchmark.md", "took 10.1, 5.7, then 3.2 s after the allocator switch, and 11.0, 3.8, then 3.1 s",
     "tool: a one-off probe of S4D's step after the switch and after a trim, named as such"),
    ("docs/benchmark.md", "(S4D at 1K: 0.205 s before, 0.164 s after; at 16K 5.19 s before, 3.27 s after)",
     "cell: results/speed_cpu/s4d_scaling_idle_rewarm1 and s4d_scaling_idle (their README rows)"),
    ("docs/benchmark.md", "(0.164 s at 1K, 3.27 s at 16K); the mixer alone",
     "cell: results/speed_cpu/s4d_scaling_idle (its README has the command)"),
    ("docs/benchmark.md", "for width 256 (5.19 s at 16K): the re-warm artefact",
     "cell: results/speed_cpu/s4d_scaling_idle_rewarm1 (its README has the command)"),
    ("docs/benchmark.md", "(1.65 vs 0.86 s, 5.47 vs 2.96 s), so the operator shares",
     "tool: tools/profile_scaling.py's table, results/speed_cpu/s4d_scaling_idle/profile_w256.md"),
    ("docs/benchmark.md", "The timed step took 42.2 s; it is the first",
     "cell: results/speed_cpu/pathx_checkpointing (its README has the command)"),
]


# blocks between <!-- NAME:begin --> and <!-- NAME:end --> that a script prints from the records, held to it by a test
GENERATED_BLOCKS = {
    "variance-budget": "tests/test_planning.py::test_the_variance_budget_in_the_docs_is_the_plan_scripts",
    "quick-design": "tests/test_planning.py::test_the_quick_design_table_in_the_docs_is_the_plan_scripts",
    "plateau": "tests/test_curated_results.py::test_the_redos_quoted_costs_and_plateau_are_its_committed_records",
    "variance-budget-after": "tests/test_planning.py::"
                             "test_the_variance_budget_after_in_the_docs_is_the_plan_scripts_on_the_redo",
}


def lines_outside_generated_blocks(text: str) -> list[tuple[int, str]]:
    out, inside = [], None
    for n, line in enumerate(text.splitlines(), 1):
        if m := re.search(r"<!-- ([\w-]+):(begin|end) -->", line):
            assert m.group(1) in GENERATED_BLOCKS, f"line {n}: block {m.group(1)!r} is not in GENERATED_BLOCKS"
            inside = m.group(1) if m.group(2) == "begin" else None
            continue
        if inside is None:
            out.append((n, line))
    return out


def durations_in(line: str) -> list[re.Match]:
    return [m for m in DURATION.finditer(MARK.sub(lambda m: " " * len(m.group(0)), line))]


def test_every_marked_duration_is_what_the_records_give():
    figures = measured_figures(ROOT)
    checked = 0
    for path in DOCS:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            for mark in MARK.finditer(line):
                name = mark.group(1)
                where = f"{path.relative_to(ROOT)}:{n}"
                assert name in figures, f"{where}: no figure {name!r} (python tools/durations.py lists them)"
                before = line[: mark.start()]
                assert before.endswith(figures[name].text), (
                    f"{where}: {name} is {figures[name].text!r} from the records, the text says "
                    f"{before[-20:]!r}")
                checked += 1
    assert checked >= 15  # README, configuration, benchmark: the profiles' run times, the sweep, Table 2's steps


def test_every_duration_in_the_docs_is_measured_or_listed_as_not_a_measurement():
    unlisted = []
    used = set()
    for path in DOCS:
        rel = str(path.relative_to(ROOT))
        for n, line in lines_outside_generated_blocks(path.read_text()):
            for m in durations_in(line):
                if line[m.end():].startswith("<!-- measured:"):
                    continue
                hits = [entry for entry in NOT_MEASURED if entry[0] == rel and entry[1] in line
                        and m.group(0) in entry[1]]
                if hits:
                    used.update(hits)
                    continue
                unlisted.append(f"{rel}:{n}: {m.group(0)!r} in {line.strip()[:100]!r}")
    assert not unlisted, ("durations that are neither measured (add <!-- measured: NAME --> with a figure of "
                          "python tools/durations.py) nor listed in NOT_MEASURED with why:\n" + "\n".join(unlisted))
    stale = [entry for entry in NOT_MEASURED if entry not in used]
    assert not stale, f"NOT_MEASURED entries whose line is gone: {stale}"


def test_a_changed_record_changes_the_figure_and_fails_the_docs():
    def record(task, attention, wall, host="vm"):
        return {"status": "ok", "task": task, "attention": attention, "wall_time_s": wall, "host": host}

    rows = [record("listops", "softmax", 30.0), record("listops", "softmax", 50.0), record("pathfinder", "lru", 200.0),
            record("image", "lru", 400.0), {"status": "failed", "task": "image", "attention": "lru",
                                             "wall_time_s": 9999.0}]
    figs = figures_of("quick", rows)
    assert figs["quick.listops.softmax.median"] == Figure(40.0, "40 s", "median wall time of one run", 2, ("vm",))
    assert figs["quick.run.max"].text == "7 min"  # the failed run is not a duration of a run
    assert figs["sweep_cpu.offline"].seconds == pytest.approx((30 + 50 + 200) / 2)
    assert figs["sweep_cpu.all"].seconds == pytest.approx((30 + 50 + 200 + 400) / 2)
    before = figures_of("quick_before", rows)  # the sweep's records before quick was re-sized: their own names
    assert before["sweep_cpu_before.all"] == figs["sweep_cpu.all"] and "sweep_cpu.all" not in before
    assert "sweep_cpu_before.all" not in figs
    assert before["quick_before.run.max"] == figs["quick.run.max"] and "sweep_cpu.all" not in figures_of("cpu", rows)
    line = "took 40 s<!-- measured: quick.listops.softmax.median -->"
    rows[0]["wall_time_s"] = 130.0  # one run slower: the median moves and the docs' text no longer matches
    moved = figures_of("quick", rows)["quick.listops.softmax.median"].text
    assert moved == "2 min" and not line[: line.index("<!--")].endswith(moved)


@pytest.mark.parametrize("seconds, text", [(14.1, "14 s"), (89.4, "89 s"), (90, "2 min"), (4002, "67 min"),
                                           (5399, "90 min"), (5400, "1.5 h"), (10874, "3.0 h")])
def test_human_rounding(seconds, text):
    assert human(seconds) == text


def test_unmarked_durations_are_found():
    found = [m.group(0) for m in durations_in("took 14–332 s, 6.0 h in all, 9 min 35 s, N^2.03 and 10 minutes")]
    assert found == ["14–332 s", "6.0 h", "9 min", "35 s", "10 minutes"]
    assert durations_in("3.83 s<!-- measured: bench.cpu.softmax.model.N4096 -->")[0].group(0) == "3.83 s"


def test_a_resumed_runs_cost_is_its_phases_over_every_process_not_its_last_wall():
    """A resumed run's wall_time_s counts only its last process (flash text seeds 0-1 of the redo: 0.24 min against
    3.1 for a run that never stopped); its cost is its phases summed (the loops' seconds carry over the checkpoint),
    pretraining included unless a cached encoder was reused; a run that never resumed is its wall_time_s; a resumed
    record without phases cannot say (None), and the duration figures leave it out."""
    from lra_bench.store.records import run_wall_seconds

    phases = {"data_s": 2.0, "pretrain_s": None, "pretrain_reused": None, "train_loop_s": 170.0, "test_eval_s": 10.0}
    fresh = {"status": "ok", "wall_time_s": 190.0, "restarts": 0, "phases": phases}
    assert run_wall_seconds(fresh) == 190.0
    assert run_wall_seconds({**fresh, "restarts": 1, "wall_time_s": 14.0}) == 182.0  # 2 + 170 + 10
    assert run_wall_seconds({**fresh, "restarts": 1, "wall_time_s": 200.0}) == 200.0  # never below the last process
    pre = {**phases, "pretrain_s": 100.0, "pretrain_reused": False}
    resumed_in_pretraining = {**fresh, "wall_time_s": 30.0, "pretraining": {"restarts": 2}, "phases": pre}
    assert run_wall_seconds(resumed_in_pretraining) == 282.0
    assert run_wall_seconds({**resumed_in_pretraining, "phases": {**pre, "pretrain_reused": True}}) == 182.0
    assert run_wall_seconds({"wall_time_s": 14.0, "restarts": 1}) is None
    assert run_wall_seconds({"restarts": 0}) is None
    records = [{**fresh, "task": "text", "attention": "flash", "host": "h"},
               {**fresh, "task": "text", "attention": "flash", "host": "h", "restarts": 1, "wall_time_s": 14.0},
               {"status": "ok", "task": "text", "attention": "flash", "host": "h", "restarts": 1, "wall_time_s": 9.0}]
    figures = figures_of("quick", records)
    assert figures["quick.run.median"].seconds == 186.0 and figures["quick.run.min"].seconds == 182.0
    assert figures["quick.run.median"].runs == 2
