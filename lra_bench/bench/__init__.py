"""Efficiency measurement (LRA Table 2 protocol).

``timing`` (warm-up/repeats/medians, the trainer's step timer) and ``memory`` (peak memory, OOM) are leaves that the
trainer uses too; ``isolated`` runs a measurement in a fresh process; ``cell`` is one (length, mode) measurement of
the trainer's own step (``train.step``); ``table2`` runs every cell of a benchmark config and stores one file per cell.
The Table 2 report that reads those files is ``reports/efficiency.py``.
"""
