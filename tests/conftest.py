"""Shared fixtures: Compose-API configs pointing at tmp folders, and the optional real-data folder; how the suite
spreads over cores (``pytest -n auto --dist loadgroup``, pytest-xdist: the README's test command)."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shlex
import subprocess
import sys
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig, OmegaConf

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = ROOT / "configs"
SHARED_DATA = ROOT.parent / "shared" / "data"
README_SWEEP_GROUP = "readme_sweep"  # the xdist group of every test that reads the readme_sweep fixture
MAX_WORKERS = 8  # each worker holds torch (about 0.5 GB) and starts run.py processes of its own

if os.environ.get("PYTEST_XDIST_WORKER"):  # one worker per core: its torch, and the processes it starts, take one
    # thread each. Two threads per worker on a shared core spin against each other and slow the whole suite down.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    import torch

    torch.set_num_threads(1)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per core this process may use, at most MAX_WORKERS. Measured on the 2-core CI machine:
    2 workers ran the suite in 995 s (1,708 CPU-seconds); 3 workers, on nearly the same tests, took 1,037 s (1,842
    CPU-seconds: the extra worker's processes compete for the cores more than they fill the waits)."""
    return max(1, min(len(os.sched_getaffinity(0)), MAX_WORKERS))


@pytest.hookimpl(trylast=True)  # after pytest-xdist's own hook, whose renaming name_group checks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under xdist, the longest work starts first, so no worker is left with it alone at the end: the modules that
    run as one group (``xdist_group``: a cluster, a shared reference run), then the ``slow`` tests, then the rest.
    The order within each class is unchanged; a serial run keeps the files' order. A test that reads the shared
    README sweep outside its group is refused (a second worker would run the sweep again). Under ``--dist
    loadgroup`` every grouped item's nodeid carries its group (``name_group``)."""
    def group(item: pytest.Item) -> str | None:  # the group xdist's loadgroup gives the item (its closest mark)
        mark = item.get_closest_marker("xdist_group")
        return None if mark is None else mark.args[0] if mark.args else mark.kwargs.get("name")

    strays = [item.nodeid for item in items
              if "readme_sweep" in getattr(item, "fixturenames", ()) and group(item) != README_SWEEP_GROUP]
    if strays:
        raise pytest.UsageError(f"{', '.join(strays)} read(s) the readme_sweep fixture: mark it "
                                f"@pytest.mark.xdist_group({README_SWEEP_GROUP!r}) (tests/conftest.py)")
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return

    def rank(item: pytest.Item) -> int:
        return 0 if item.get_closest_marker("xdist_group") else 1 if item.get_closest_marker("slow") else 2

    items.sort(key=rank)  # stable
    if getattr(config.option, "loadgroup", False):
        for item in items:
            name_group(item)


def xdist_suffix(item: pytest.Item) -> str:
    """The ``@group`` suffix pytest-xdist's loadgroup gives an item's nodeid ("" without an ``xdist_group`` mark):
    every group mark's name, sorted and joined by "_", as xdist/remote.py writes it."""
    names = {str(m.args[0] if m.args else m.kwargs.get("name", "default")) for m in item.iter_markers("xdist_group")}
    return f"@{'_'.join(sorted(names))}" if names else ""


def name_group(item: pytest.Item) -> None:
    """Put the ``@group`` suffix on ``item``'s nodeid where pytest-xdist's own renaming was lost. xdist 3.8 writes it
    to ``item._nodeid``; pytest 9.2 derives ``nodeid`` from ``item._id`` (a NodeId), so that write does nothing and
    ``--dist loadgroup`` spread each group over the workers (two SLURM clusters on one port, the README sweep run
    twice). The controller reads the group from the nodeid's last "@"."""
    suffix = xdist_suffix(item)
    if not suffix or item.nodeid.endswith(suffix):
        return
    from _pytest.nodeid import NodeId  # pytest >= 9.2 only: older versions keep xdist's suffix (returned above)

    item._id = NodeId.parse(item.nodeid + suffix)


def compose_run(overrides: list[str], tmp_path: Path, config_name: str = "run") -> DictConfig:
    """configs/<config_name>.yaml composed like run.py does, with results, bench and cache under tmp_path."""
    paths = [f"paths.results_dir={tmp_path / 'runs'}", f"paths.cache_dir={tmp_path / 'cache'}",
             f"paths.bench_dir={tmp_path / 'bench'}"]
    with initialize_config_dir(config_dir=str(CONFIGS), version_base="1.3"):
        cfg = compose(config_name=config_name, overrides=[*paths, *overrides])
    OmegaConf.resolve(cfg)
    return cfg


@pytest.fixture
def smoke_cfg(tmp_path: Path):
    def make(*overrides: str) -> DictConfig:
        return compose_run(["profile=smoke", *overrides], tmp_path)

    return make


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test when that folder is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs ../shared/data/{'/'.join(parts)} beside the repo (the project's shared data folder, "
                    f"see its README.md); not found at {path}")
    return path


def load_tool(monkeypatch: pytest.MonkeyPatch, name: str):
    """The module of ``tools/<name>.py``, imported as ``python tools/<name>.py`` runs it (its folder first on the
    path, for its ``import _repo``)."""
    path = ROOT / "tools" / f"{name}.py"
    monkeypatch.syspath_prepend(str(path.parent))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def readme_commands() -> list[str]:
    """Every command of the README's bash blocks (comments dropped, ``&&`` chains split), in order."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            commands += [part.strip() for part in line.split("&&") if part.strip()]
    return commands


def user_env(root: Path, **extra: str) -> dict[str, str]:
    """A user's shell for ``python run.py`` and the scripts: results, cache and benchmark cells under ``root``, one
    thread, no hub or progress settings inherited from the machine running the tests."""
    from lra_bench.infra.progress import PROGRESS_ENV, SWEEP_JOB_ENV

    dropped = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "HF_ENDPOINT", PROGRESS_ENV, SWEEP_JOB_ENV)
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    return {**env, "LRA_RESULTS_DIR": str(root / "runs"), "LRA_CACHE_DIR": str(root / "cache"),
            "LRA_BENCH_DIR": str(root / "bench"), "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", **extra}


@pytest.fixture(scope="session")
def readme_sweep(tmp_path_factory) -> SimpleNamespace:
    """The README's smoke sweep (``python run.py -m ...``, as typed), run once per worker for the tests that read it:
    the README walk-through (tests/test_newcomer.py) and a fresh user's chart without a benchmark
    (tests/test_second_hour.py). They share the xdist group README_SWEEP_GROUP, so the sweep runs once in the
    suite. ``root`` holds its runs/ and cache/ (read them, copy them; never add to them); ``proc`` is the finished
    process, its summary in ``proc.stderr``."""
    (command,) = [c for c in readme_commands() if c.startswith("python run.py -m ")]
    root = tmp_path_factory.mktemp("readme_sweep")
    args = shlex.split(command)[1:]
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=user_env(root), capture_output=True, text=True,
                          timeout=600)
    return SimpleNamespace(command=command, root=root, proc=proc)


@pytest.fixture
def report_script(capsys, monkeypatch):
    """``report(*ARGS, cwd=ROOT)``: scripts/report.py's ``main(ARGS)`` in this process, from ``cwd``; returns its exit
    code, stdout and stderr like a finished process. The same code as ``python scripts/report.py ARGS`` without a
    Python start-up (3-4 s of imports); tests/test_report.py::test_report_script_end_to_end runs the script itself.
    What main() sets for the whole process (logging, warning filters, figures) is undone after each call."""
    import matplotlib.pyplot as plt

    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    module = sys.modules.get("lra_report_script")
    if module is None:
        pythonpath = os.environ.get("PYTHONPATH")  # scripts/_repo.py prepends the checkout for the script's children
        spec = importlib.util.spec_from_file_location("lra_report_script", ROOT / "scripts" / "report.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules["lra_report_script"] = module
        if pythonpath is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = pythonpath

    def report(*args: object, cwd: Path = ROOT) -> SimpleNamespace:
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        capsys.readouterr()
        monkeypatch.chdir(cwd)
        try:
            with warnings.catch_warnings():
                code = module.main([str(a) for a in args])
        except SystemExit as e:  # argparse's errors
            code = e.code
        finally:
            root.handlers[:], root.level = handlers, level
            plt.close("all")
            monkeypatch.chdir(ROOT)
        out = capsys.readouterr()
        return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)

    return report
