"""Markdown tables as the tests compare them: stripped cells, so that a column widened by a new row (a task whose
records landed) is no difference."""

from __future__ import annotations


def markdown_rows(text: str) -> list[list[str]]:
    """The rows of the Markdown tables in ``text`` as stripped cells, the separator lines left out."""
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|") and not line.startswith("|:")]
