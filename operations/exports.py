"""Streamed exports (CSV and JSON) of the filtered runs list and of an operation's results.

Rows come from a server-side cursor (``iterator(chunk_size=...)``) and leave as they are
read, so memory stays flat however many rows there are.

Every CSV cell goes through ``spreadsheet_cell``: a text cell that a spreadsheet would read
as a formula (a run's principal, a result's detail: text someone typed) is written as text.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from django.db.models import QuerySet
from django.http import StreamingHttpResponse

from kernel import clock

CHUNK = 2000
FORMATS = ("csv", "json")

RUN_COLUMNS = (
    "id",
    "scenario",
    "namespace",
    "state",
    "disposition",
    "terminal_reason",
    "revision",
    "principal_ref",
    "created_at",
)
ITEM_COLUMNS = ("position", "run_id", "target", "result", "detail", "processed_at")
# A cell starting with one of these is a formula to Excel, LibreOffice or Google Sheets
# (OWASP, "CSV Injection": = + - @, tab, carriage return); a line feed is treated the same.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "\n")


def run_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "id": str(row["id"]), "created_at": clock.iso(row["created_at"])}


def run_rows(qs: QuerySet[Any]) -> Iterator[dict[str, Any]]:
    """Every run of ``qs`` (newest first) as an export row, read in chunks."""
    for row in qs.order_by("-created_at", "-id").values(*RUN_COLUMNS).iterator(chunk_size=CHUNK):
        yield run_row(row)


class _Echo:
    """A file-like object whose write returns what it was given (csv.writer into a stream)."""

    def write(self, value: str) -> str:
        return value


def spreadsheet_cell(value: Any) -> Any:
    """``value`` as a CSV cell that a spreadsheet shows and never evaluates.

    Return a string that starts like a formula (``FORMULA_STARTS``) with a single quote in
    front, which spreadsheets read as "this cell is text" (OWASP's advice); return every
    other value unchanged, so numbers stay numbers (a negative int is not text).
    """
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_lines(columns: Sequence[str], rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """The CSV export: a header line, then one line per row, every cell neutralised."""
    writer = csv.DictWriter(_Echo(), fieldnames=list(columns))  # type: ignore[arg-type]
    yield writer.writeheader()  # type: ignore[func-returns-value]
    for row in rows:
        yield writer.writerow({k: spreadsheet_cell(v) for k, v in row.items()})  # type: ignore[misc]


def json_lines(header: dict[str, Any], key: str, rows: Iterable[dict[str, Any]]) -> Iterator[str]:
    """One JSON document, written piece by piece: ``{...header, key: [row, row, ...]}``."""
    head = json.dumps(header, sort_keys=True)
    yield head[:-1] + (", " if header else "") + json.dumps(key) + ": ["
    first = True
    for row in rows:
        yield ("" if first else ",\n") + json.dumps(row, sort_keys=True)
        first = False
    yield "]}\n"


def streamed(
    *,
    fmt: str,
    filename: str,
    columns: Sequence[str],
    rows: Iterable[dict[str, Any]],
    header: dict[str, Any],
    key: str,
) -> StreamingHttpResponse:
    if fmt == "csv":
        body = csv_lines(columns, rows)
        content_type = "text/csv; charset=utf-8"
    else:
        body = json_lines(header, key, rows)
        content_type = "application/json"
    response = StreamingHttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}.{fmt}"'
    return response
