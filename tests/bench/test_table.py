"""One markdown-table helper: the exact lines summary.md and the study sections rely on."""

import pytest

from bench.report.table import markdown_table


def test_table_lines_and_alignment_rule() -> None:
    """Header, a rule with one alignment cell per column, then the rows, cells as given."""
    lines = markdown_table(["server", "conc.", "x"], [["granian", "10", "a b"]], "lrc")
    assert lines == ["| server | conc. | x |", "|---|---:|:---:|", "| granian | 10 | a b |"]
    assert markdown_table(["a"], [], ["r"]) == ["| a |", "|---:|"]


def test_a_row_or_alignment_of_the_wrong_width_is_refused() -> None:
    """A table whose rows do not match its header is a bug in the caller, not a table."""
    with pytest.raises(ValueError, match="2 columns but a row of 1"):
        markdown_table(["a", "b"], [["x"]], "ll")
    with pytest.raises(ValueError, match="2 columns but 3 alignments"):
        markdown_table(["a", "b"], [], "lll")
