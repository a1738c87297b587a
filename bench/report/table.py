"""Markdown tables: the one way summary.md and the study sections write a table.

Input: a header, rows of cells already formatted as text, and one alignment letter per column.
Output: the table's lines, `| a | b |` with a `|---|---:|` rule; cells are written as given
(no padding, no escaping: a caller whose cells may hold `|` escapes them).
"""

from __future__ import annotations

from collections.abc import Sequence

# alignment letter -> the rule cell markdown reads it from
RULES = {"l": "---", "r": "---:", "c": ":---:"}


def markdown_row(cells: Sequence[str]) -> str:
    """One table line: `| a | b |`."""
    return "| " + " | ".join(cells) + " |"


def markdown_table(
    header: Sequence[str], rows: Sequence[Sequence[str]], align: Sequence[str]
) -> list[str]:
    """The lines of a table; `align` is one of l (left), r (right), c (centre) per column,
    e.g. "llr" or ["l", "l", "r"]."""
    if len(align) != len(header):
        raise ValueError(f"{len(header)} columns but {len(align)} alignments")
    for row in rows:
        if len(row) != len(header):
            raise ValueError(f"{len(header)} columns but a row of {len(row)}: {row!r}")
    rule = "|" + "".join(RULES[letter] + "|" for letter in align)
    return [markdown_row(header), rule, *(markdown_row(row) for row in rows)]
