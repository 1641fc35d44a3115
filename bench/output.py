"""What the benchmark scripts share at their end: each collection measured in turn (its row printed as JSON
as soon as it is done), then the table, and every row written to ``bench/results/<name>``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"

Row = dict[str, Any]


def each_set(names: Iterable[str], measure: Callable[[str], Row]) -> list[Row]:
    """``measure`` of every name, each row printed (one JSON line) as it comes."""
    rows = []
    for name in names:
        row = measure(name)
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def save(rows: list[Row], file_name: str, table: Callable[[list[Row]], str]) -> Path:
    """Print the rows' table and write them to ``bench/results/<file_name>``."""
    print(table(rows))
    out = RESULTS / file_name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2))
    return out
