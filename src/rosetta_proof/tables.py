"""Tables for pages: rows of values rendered as a Markdown table that MyST-NB shows."""

from __future__ import annotations

from typing import Any, Mapping, Sequence


class MarkdownText(str):
    """Text already written in Markdown (code spans, math): a table shows it as written."""


def format_cell(value: Any) -> str:
    """Numbers read well in a table: small ones in scientific notation with four
    significant digits (1.001e-05 is not 1e-05); text is escaped for Markdown, except
    :class:`MarkdownText` (only its ``|`` are, which would end the cell)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, MarkdownText):
        return value.replace("|", "\\|")
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


def symbolic_shape(shape: Sequence[int], symbols: Mapping[int, str]) -> str:
    """A shape in the names its sizes stand for: (15, 4) with {15: "3H", 4: "I"} reads
    "(3H, I)"; a size with no name stays a number."""
    return "(" + ", ".join(symbols.get(size, str(size)) for size in shape) + ")"


def stored_parameters(parameters: Mapping[str, Sequence[int]], symbols: Mapping[int, str]) -> MarkdownText:
    """A layer's parameters ({name: shape}, in the order it stores them) as one table
    cell: names in code, consecutive names of one shape sharing it ("`w0`..`w2` (H, I)"
    for more than three)."""
    groups: list[tuple[list[str], str]] = []
    for name, shape in parameters.items():
        text = symbolic_shape(shape, symbols)
        if groups and groups[-1][1] == text:
            groups[-1][0].append(name)
        else:
            groups.append(([name], text))
    cells = []
    for names, text in groups:
        listed = f"`{names[0]}`..`{names[-1]}`" if len(names) > 3 else ", ".join(f"`{n}`" for n in names)
        cells.append(f"{listed} {text}")
    return MarkdownText(", ".join(cells))
