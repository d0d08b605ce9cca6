"""The tasks a report knows, in the paper's order, and their display names."""

from __future__ import annotations

from lra_bench.reports import paper

TASKS5 = paper.TASKS  # listops, text, retrieval, image, pathfinder
TASKS = (*TASKS5, "pathx")
TASK_LABELS = {"listops": "ListOps", "text": "Text", "retrieval": "Retrieval", "image": "Image",
               "pathfinder": "Pathfinder", "pathx": "Path-X"}
