"""The ListOps generator: official algorithm, exact format, determinism, filters, labels."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from lra_bench.data import listops
from lra_bench.data.listops_eval import evaluate
from lra_bench.data.listops_generate import OPERATORS, ListOpsSpec, generate, to_string, to_value

SMALL = ListOpsSpec(num_train=300, num_val=50, num_test=50, min_length=10, max_length=120, seed=3)
TOKEN = re.compile(r"^(\(|\)|\[MIN|\[MAX|\[MED|\[SM|\]|[0-9])$")


@pytest.fixture(scope="module")
def rows():
    return generate(SMALL)


def test_deterministic_given_seed(rows):
    assert generate(SMALL) == rows
    other = generate(ListOpsSpec(**{**SMALL.__dict__, "seed": 4}))
    assert other["train"] != rows["train"]


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
