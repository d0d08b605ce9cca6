"""Markdown tables as the tests compare them: stripped cells, so that a column widened by a new row (a task whose
records landed) is no difference."""

from __future__ import annotations


def markdown_rows(text: str) -> list[list[str]]:
    """The rows of the Markdown tables in ``text`` as stripped cells, the separator lines left out."""
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in text.splitlines()
            if line.startswith("|") and not line.startswith("|:")]


def assert_block_quotes(docs: str, block: str, printed: str, command: str, tasks: list[str]) -> None:
    """The docs' ``<!-- block:begin/end -->`` table is the one ``printed`` (a tool's Markdown) holds, cell by cell,
    for the rows it quotes, which are ``tasks`` in order; a difference names the command that prints it."""
    quoted = markdown_rows(docs[docs.index(f"<!-- {block}:begin -->"):docs.index(f"<!-- {block}:end -->")])
    table = markdown_rows(printed)
    assert quoted[0] == table[0], f"docs' {block} table: its columns changed, copy `{command}`'s table again"
    rows = {row[0]: row for row in table[1:]}
    for row in quoted[1:]:  # padding aside: a task whose records land widens every line
        assert row == rows.get(row[0]), (f"docs' {block} row for {row[0]}: `{command}` now prints {rows.get(row[0])};"
                                         " update it")
    assert [row[0] for row in quoted[1:]] == tasks
