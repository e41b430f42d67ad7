"""Tables for pages: rows of values rendered as a Markdown table that MyST-NB shows."""

from __future__ import annotations

from typing import Any, Sequence


def format_cell(value: Any) -> str:
    """Numbers read well in a table: small ones in scientific notation with four
    significant digits (1.001e-05 is not 1e-05); text is escaped for Markdown."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value).replace("\\", "\\\\").replace("|", "\\|").replace("_", "\\_").replace("*", "\\*")


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """The rows as GitHub-flavoured Markdown; every row must have one cell per header."""
    for number, row in enumerate(rows, start=1):
        if len(row) != len(headers):
            raise ValueError(f"row {number} has {len(row)} cells for {len(headers)} headers")
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(format_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def show_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> Any:
    """A displayable Markdown table for a notebook cell (plain text elsewhere)."""
    from IPython.display import Markdown

    return Markdown(markdown_table(headers, rows))
