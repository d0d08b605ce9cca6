"""The ListOps generator: official algorithm, exact format, determinism, filters, labels."""

from __future__ import annotations

import dataclasses
import re
from collections import Counter

import pytest

from lra_bench.data.listops import files as listops
from lra_bench.data.listops.evaluate import evaluate
from lra_bench.data.listops.generate import (
    GENERATOR_VERSION,
    OPERATORS,
    ListOpsSpec,
    chunk_size,
    generate,
    to_string,
    to_value,
)
from lra_bench.data.listops.task import ListOpsTask
from lra_bench.errors import ConfigError

# 400 rows = 8 chunks of 50: enough to spread over worker processes
SMALL = ListOpsSpec(num_train=300, num_val=50, num_test=50, min_length=10, max_length=120, seed=3, workers=1)
# a tiny expression space (lengths 4-5 only): duplicates are frequent, so chunks must top up
NARROW = ListOpsSpec(num_train=300, num_val=50, num_test=50, max_depth=3, min_length=3, max_length=6, seed=1,
                     workers=1)
TOKEN = re.compile(r"^(\(|\)|\[MIN|\[MAX|\[MED|\[SM|\]|[0-9])$")


@pytest.fixture(scope="module")
def rows():
    return generate(SMALL)


def test_deterministic_given_seed(rows):
    assert generate(SMALL) == rows
    other = generate(ListOpsSpec(**{**SMALL.__dict__, "seed": 4}))
    assert other["train"] != rows["train"]


def _tsv_bytes(rows, root):
    for split, data in rows.items():
        listops.write_tsv(data, listops.split_path(root, split))
    return {s: listops.split_path(root, s).read_bytes() for s in listops.SPLITS}


@pytest.mark.parametrize("spec", [SMALL, NARROW], ids=["small", "narrow-with-duplicates"])
def test_same_tsvs_for_1_and_8_workers(spec, tmp_path):
    assert chunk_size(spec.num_train + spec.num_val + spec.num_test) == 50  # several chunks per run
    serial = _tsv_bytes(generate(spec), tmp_path / "w1")
    parallel = generate(dataclasses.replace(spec, workers=8))
    assert _tsv_bytes(parallel, tmp_path / "w8") == serial
    sources = [src for split in parallel.values() for src, _ in split]
    assert len(sources) == 400 and len(set(sources)) == 400
    assert all(evaluate(src) == label for split in parallel.values() for src, label in split)


def test_cache_key_ignores_workers_and_names_the_generator_version(tmp_path):
    key = SMALL.data_key()
    assert "workers" not in key and key["generator_version"] == GENERATOR_VERSION
    assert dataclasses.replace(SMALL, workers=5).data_key() == key
    gen = dataclasses.asdict(SMALL)
    one = ListOpsTask(max_len=120, generator={**gen, "workers": 1}).tsv_dir(tmp_path)
    assert ListOpsTask(max_len=120, generator={**gen, "workers": 3}).tsv_dir(tmp_path) == one


def test_negative_workers_fail_clearly():
    with pytest.raises(ConfigError, match=r"task.generator.workers=-1 is out of range: allowed >= 0"):
        ListOpsTask(generator={"workers": -1})


def test_split_sizes_and_uniqueness(rows):
    assert [len(rows[s]) for s in ("train", "val", "test")] == [300, 50, 50]
    sources = [src for s in rows.values() for src, _ in s]
    assert len(set(sources)) == len(sources), "samples must be unique across all splits"


def test_exact_string_format_and_length_filter(rows):
    for src, _ in rows["train"]:
        tokens = src.split(" ")
        assert all(TOKEN.match(t) for t in tokens), src
        assert tokens.count("(") == tokens.count(")")
        length = len(listops.tokenize(src))  # 2 per operator + 1 per value, as the official filter
        assert SMALL.min_length < length < SMALL.max_length


def test_left_nested_binary_format_matches_release():
    # [MAX 2 9] is built as ((([MAX, 2), 9), ]) and printed as in the release files
    tree = ((("[MAX", 2), 9), "]")
    assert to_string(tree) == "( ( ( [MAX 2 ) 9 ) ] )"
    assert to_value(tree) == 9
    med = (((("[MED", 1), 4), 2), 7), "]"
    assert to_value(med) == 3  # int(median([1, 4, 2, 7])) = int(3.0)
    sm = ((("[SM", 8), 7), "]")
    assert to_value(sm) == 5


def test_labels_agree_with_independent_evaluator(rows):
    for split in rows.values():
        for src, label in split:
            assert evaluate(src) == label


def test_all_operators_and_a_spread_of_labels(rows):
    text = " ".join(src for src, _ in rows["train"])
    for op in OPERATORS:
        assert op in text
    assert len(Counter(y for _, y in rows["train"])) == 10


def test_round_trip_through_official_tsv_loader(rows, tmp_path):
    for split, data in rows.items():
        listops.write_tsv(data, listops.split_path(tmp_path, split))
        first = listops.split_path(tmp_path, split).read_text().splitlines()[0]
        assert first == "Source\tTarget"
        assert listops.read_tsv(listops.split_path(tmp_path, split)) == data


def test_impossible_length_range_fails_clearly():
    with pytest.raises(RuntimeError, match="widen the length range"):
        generate(ListOpsSpec(num_train=5, num_val=0, num_test=0, max_depth=1, min_length=3, max_length=10))
