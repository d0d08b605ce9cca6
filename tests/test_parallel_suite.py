"""How the suite spreads over cores (tests/conftest.py, pytest-xdist): CI runs the README's test command, the modules
that share a cluster or a reference run stay on one worker, the longest work starts first, one thread per worker."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests import conftest
from tests.conftest import ROOT


def test_ci_runs_the_readme_test_commands_both_tiers():
    readme = re.search(r"## Tests\n+```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S).group(1)
    tiers = [re.sub(r"\s+#.*$", "", line).strip() for line in readme.splitlines()[:2]]
    assert all("-n auto --dist loadgroup" in command for command in tiers), tiers
    assert [command.rsplit(" -m ", 1)[1] for command in tiers] == ['"not slow"', "slow"], tiers  # together: every test
    ci = [line for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("python -m pytest")]
    assert ci == tiers, f".ci/run must call the README's test commands {tiers!r}, it calls {ci}"


@pytest.mark.parametrize(("module", "group"), [("test_slurm", "slurm"), ("test_faults", "test_faults"),
                                               ("test_second_hour", conftest.README_SWEEP_GROUP)])
def test_modules_sharing_a_cluster_or_a_reference_run_stay_on_one_worker(module, group):
    marks = importlib.import_module(f"tests.{module}").pytestmark
    marks = marks if isinstance(marks, list) else [marks]
    assert any(m.name == "xdist_group" and m.args == (group,) for m in marks), f"{module}: {marks}"


@pytest.mark.xdist_group("parallel_suite")
def test_under_loadgroup_a_grouped_test_carries_its_group_to_the_scheduler(request):
    """The README's command (``-n auto --dist loadgroup``) keeps a group on one worker only if the worker reports
    the item as ``nodeid@group``: pytest 9.2 lost xdist 3.8's renaming (conftest.name_group restores it)."""
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not under pytest-xdist --dist loadgroup (the README's command runs it that way)")
    assert request.node.nodeid.endswith("@parallel_suite"), request.node.nodeid


def test_a_grouped_item_is_renamed_once_and_an_ungrouped_one_not_at_all():
    from _pytest.nodeid import NodeId

    class Item:  # what name_group reads and writes of a pytest 9.2 item: nodeid derived from _id
        def __init__(self, nodeid: str, *groups: str) -> None:
            self._id, self.marks = NodeId.parse(nodeid), [pytest.mark.xdist_group(g).mark for g in groups]

        nodeid = property(lambda self: str(self._id))

        def iter_markers(self, name: str):
            return iter(self.marks if name == "xdist_group" else [])

    item = Item

    grouped = item("tests/test_x.py::test_a[1]", "slurm")
    conftest.name_group(grouped)
    conftest.name_group(grouped)
    assert grouped.nodeid == "tests/test_x.py::test_a[1]@slurm"
    two = item("tests/test_x.py::test_b", "b", "a")
    conftest.name_group(two)
    assert two.nodeid == "tests/test_x.py::test_b@a_b"  # xdist's own spelling: names sorted, joined by "_"
    plain = item("tests/test_x.py::test_c")
    conftest.name_group(plain)
    assert plain.nodeid == "tests/test_x.py::test_c"


def test_a_reader_of_the_shared_readme_sweep_outside_its_group_is_refused(monkeypatch):
    """conftest.readme_sweep runs once per worker: a test that reads it outside its xdist group would make a
    second worker run the sweep again, so collection refuses it, naming the test and the mark to add."""
    def item(nodeid: str, *marks: pytest.MarkDecorator) -> SimpleNamespace:
        closest = {m.mark.name: m.mark for m in marks}
        return SimpleNamespace(nodeid=nodeid, fixturenames=["tmp_path", "readme_sweep"], get_closest_marker=closest.get)

    grouped = item("t::in", pytest.mark.xdist_group(conftest.README_SWEEP_GROUP))
    by_name = item("t::kw", pytest.mark.xdist_group(name=conftest.README_SWEEP_GROUP))
    stray = item("t::out", pytest.mark.xdist_group("another"))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)  # the check alone, not the ordering
    conftest.pytest_collection_modifyitems(None, [grouped, by_name, fake_item("other")])
    with pytest.raises(pytest.UsageError, match=r"t::out .*xdist_group\("):
        conftest.pytest_collection_modifyitems(None, [grouped, stray])


def fake_item(name: str, *marks: str) -> SimpleNamespace:
    return SimpleNamespace(name=name, get_closest_marker=lambda mark: mark if mark in marks else None)


def test_under_xdist_groups_then_slow_tests_start_first_in_their_order(monkeypatch):
    items = [fake_item("a"), fake_item("b", "slow"), fake_item("c", "xdist_group", "slow"), fake_item("d"),
             fake_item("e", "xdist_group"), fake_item("f", "slow")]
    serial = list(items)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    config = SimpleNamespace(option=SimpleNamespace())  # no --dist loadgroup: nodeids untouched
    conftest.pytest_collection_modifyitems(config, serial)
    assert [i.name for i in serial] == list("abcdef"), "a serial run keeps the files' order"
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    conftest.pytest_collection_modifyitems(config, items)
    assert [i.name for i in items] == list("cebfad")


def test_auto_starts_one_worker_per_usable_core_at_most_eight():
    assert conftest.pytest_xdist_auto_num_workers(None) == min(len(os.sched_getaffinity(0)), 8)


def test_a_worker_and_the_processes_it_starts_use_one_thread():
    probe = ("import os, torch, tests.conftest; "
             "print(torch.get_num_threads(), os.environ['OMP_NUM_THREADS'], os.environ['MKL_NUM_THREADS'])")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")}
    worker = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**env, "PYTEST_XDIST_WORKER": "gw1"},
                            capture_output=True, text=True, timeout=120)
    assert worker.returncode == 0, worker.stderr[-2000:]
    assert worker.stdout.split() == ["1", "1", "1"]
