"""A fixed seed on CPU gives the same record as before a refactoring: the deterministic fields of smoke runs,
compared with tests/fixtures/smoke_records.json (see its ``_about``; a deliberate change updates it and says why)."""

from __future__ import annotations

import json

import pytest
import torch

from lra_bench.run.runner import run
from tests.conftest import ROOT, compose_run

FIXTURE = json.loads((ROOT / "tests" / "fixtures" / "smoke_records.json").read_text())
NOTES = ("changed_by", "before")


@pytest.mark.slow
@pytest.mark.skipif(torch.cuda.is_available(), reason="the reference records are CPU runs (trainer.device=auto)")
def test_smoke_records_match_the_reference(tmp_path):
    for name, want in FIXTURE["runs"].items():
        record = run(compose_run(["profile=smoke", f"attention={name}"], tmp_path))
        got = {key: record[key] for key in want if key not in NOTES}
        assert got == {k: v for k, v in want.items() if k not in NOTES}, name
