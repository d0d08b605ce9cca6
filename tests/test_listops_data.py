"""ListOps tokenisation, the official files, the Arrow cache, and bad data."""

from __future__ import annotations

import numpy as np
import pytest

from lra_bench.data.listops import files as listops
from lra_bench.data.listops.evaluate import evaluate
from lra_bench.data.listops.task import ListOpsTask
from lra_bench.errors import DataError
from tests.conftest import shared_data


def test_tokenisation_exactly_as_lra():
    src = "( ( ( [MAX 2 ) ( ( ( [MIN 4 ) 0 ) ] ) ) ] )"
    assert listops.tokenize(src) == ["[MAX", "2", "[MIN", "4", "0", "X", "X"]
    ids = listops.encode(src, max_len=100)
    assert ids.tolist() == [listops.VOCAB[t] for t in ["[MAX", "2", "[MIN", "4", "0", "X", "X"]]
    assert listops.PAD_ID == 0 and 0 not in listops.VOCAB.values()
    assert listops.encode(src, max_len=3).tolist() == ids[:3].tolist()  # truncation
    assert listops.encode("[FIRST 1 ]", 10)[0] == listops.UNK_ID  # out of vocabulary, as TokenTextEncoder
    assert len(listops.SYMBOLS) == 15  # LRA's token set: [MIN [MAX [MED [SM X 0..9


def test_evaluator_agrees_with_every_official_label():
    root = shared_data("listops")
    n = 0
    for split in listops.SPLITS:
        for src, label in listops.read_tsv(listops.split_path(root, split)):
            assert evaluate(src) == label
            n += 1
    assert n == 2400


def test_official_files_load_pad_and_cache(tmp_path):
    root = shared_data("listops")
    task = ListOpsTask(data_dir=str(root), max_len=2000)
    first = task.load(tmp_path)
    assert not first.reused
    assert {s: len(y) for s, y in first.labels.items()} == {"train": 2000, "val": 200, "test": 200}
    x = first.inputs["train"]
    assert x.shape == (2000, 2000) and x.dtype == np.uint8
    rows = listops.read_tsv(listops.split_path(root, "train"))
    expected = listops.encode(rows[0][0], 2000)
    assert x[0, : len(expected)].tolist() == expected.tolist() and not x[0, len(expected) :].any()
    second = task.load(tmp_path)
    assert second.reused and second.meta["fingerprint"] == first.meta["fingerprint"]
    np.testing.assert_array_equal(second.inputs["test"], first.inputs["test"])


def test_generated_data_is_cached_and_not_regenerated(tmp_path, monkeypatch):
    gen = {"num_train": 64, "num_val": 16, "num_test": 16, "min_length": 5, "max_length": 40}
    task = ListOpsTask(max_len=40, generator=gen)
    first = task.load(tmp_path)
    assert first.meta["source"] == "generate"
    import lra_bench.data.listops.task as mod

    def boom(spec):
        raise AssertionError("regenerated although cached")

    monkeypatch.setattr(mod, "generate", boom)
    second = ListOpsTask(max_len=40, generator=gen).load(tmp_path)
    assert second.reused and second.meta["fingerprint"] == first.meta["fingerprint"]
    # the generated TSVs are in the official format and their labels are right
    tsv = listops.split_path(first.meta["tsv_dir"], "val")
    assert all(evaluate(s) == y for s, y in listops.read_tsv(tsv))


def test_interrupted_cache_build_leaves_nothing_and_rebuilds(tmp_path, monkeypatch):
    gen = {"num_train": 32, "num_val": 8, "num_test": 8, "min_length": 5, "max_length": 30}
    import datasets

    def crash(self, *a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(datasets.Dataset, "save_to_disk", crash)
    with pytest.raises(KeyboardInterrupt):
        ListOpsTask(max_len=30, generator=gen).load(tmp_path)
    monkeypatch.undo()
    arrow = tmp_path / "listops" / "arrow"
    assert not arrow.exists() or not any(arrow.iterdir())
    assert not ListOpsTask(max_len=30, generator=gen).load(tmp_path).reused


@pytest.mark.parametrize(
    "content, match",
    [
        ("Source\tTarget\n( [MAX 1 2 ] )\t7\n[MIN 3 ]\n", r"basic_train.tsv:3: expected 2 tab-separated fields"),
        ("Source\tTarget\n( [MAX 1 2 ] )\tseven\n", r"basic_train.tsv:2: Target must be an integer"),
        ("Source\tTarget\n\t3\n", r"basic_train.tsv:2: empty Source"),
        ("Src\tLabel\n( [MAX 1 2 ] )\t2\n", r"basic_train.tsv:1: expected the header"),
        ("Source\tTarget\n", r"no data rows"),
    ],
)
def test_malformed_tsv_names_file_and_line(tmp_path, content, match):
    path = tmp_path / "basic_train.tsv"
    path.write_text(content)
    with pytest.raises(DataError, match=match):
        listops.read_tsv(path)


def test_invalid_utf8_is_a_clear_error(tmp_path):
    path = tmp_path / "basic_train.tsv"
    path.write_bytes(b"Source\tTarget\n( [MAX 1 \xff ] )\t2\n")
    with pytest.raises(DataError, match="not valid UTF-8"):
        listops.read_tsv(path)


def test_missing_data_dir_says_how_to_fix(tmp_path):
    with pytest.raises(DataError, match="does not exist.*lra_release.*leave task.data_dir unset"):
        ListOpsTask(data_dir=str(tmp_path / "nope")).check_source()
    (tmp_path / "basic_train.tsv").write_text("Source\tTarget\n")
    with pytest.raises(DataError, match="lacks basic_val.tsv, basic_test.tsv"):
        ListOpsTask(data_dir=str(tmp_path)).check_source()


@pytest.mark.slow
def test_prepare_command_is_idempotent_and_reports_balance(tmp_path):
    import subprocess
    import sys

    from tests.conftest import ROOT

    cmd = [sys.executable, "scripts/prepare_data.py", "task=listops", "profile=smoke",
           f"paths.cache_dir={tmp_path}"]
    first = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    assert "prepared" in first.stdout and "train:     512 examples" in first.stdout and "majority" in first.stdout
    second = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "cache reused" in second.stdout
    assert first.stdout.splitlines()[1] == second.stdout.splitlines()[1]  # same fingerprint
    bad = subprocess.run([*cmd, "task.data_dir=/nope"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "lra_release.gz" in bad.stderr


@pytest.mark.slow
def test_prepare_command_help_and_bad_overrides_are_clear():
    import subprocess
    import sys

    from tests.conftest import ROOT

    def prepare(*args):
        return subprocess.run([sys.executable, "scripts/prepare_data.py", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=120)

    shown = prepare("--help")
    assert shown.returncode == 0 and "python scripts/prepare_data.py task=listops profile=paper" in shown.stdout
    typo = prepare("task=listop")
    assert typo.returncode == 2 and "did you mean task=listops?" in typo.stderr and "Traceback" not in typo.stderr
    flag = prepare("--bogus")
    assert flag.returncode == 2 and "overrides are key=value" in flag.stderr and "Traceback" not in flag.stderr
