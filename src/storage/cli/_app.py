"""The ``hybrid-search`` application: the typer app, its consoles, the shared options and how a command runs
(typed errors become one line and exit code 2)."""

from __future__ import annotations

import asyncio
import re
import traceback
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Annotated, Any, cast, get_args

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .._errors import ConfigurationError, IndexNotFound, SearchError
from .._settings import SearchSettings
from .._types.models import SearchMode

if TYPE_CHECKING:
    from .._client import SearchClient

__all__ = [
    "app",
    "err",
    "open_client",
    "out",
    "parse_filters",
    "progress_bar",
    "run",
    "search_mode",
    "settings",
    "state",
]

app = typer.Typer(
    name="hybrid-search",
    help="Hybrid (BM25 + kNN) search over Elasticsearch, fused in the client.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain help (click's layout): typer's rich panels label every flag, --help included, with "<bool>".
    rich_markup_mode=None,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)
state: dict[str, Any] = {"verbose": False, "url": None, "index": None}


@app.callback()
def _options(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show error details.")] = False,
    url: Annotated[str | None, typer.Option(help="Elasticsearch URL(s); overrides ES_URL.")] = None,
    index: Annotated[str | None, typer.Option(help="Alias to use; overrides ES_INDEX.")] = None,
) -> None:
    state.update(verbose=verbose, url=url, index=index)


def settings(**extra: Any) -> SearchSettings:
    overrides = {k: v for k, v in (("url", state["url"]), ("index", state["index"])) if v}
    return SearchSettings(**{**overrides, **extra})


def run(coro: Coroutine[Any, Any, int | None], *, stopped: Callable[[], str | None] | None = None) -> None:
    """Run a command: typed errors become one line and exit code 2. ``stopped``: what to add when a typed
    error ends the command midway (what was done, whether running it again is safe; None: it had not
    started)."""
    try:
        code = asyncio.run(coro)
    except SearchError as exc:
        if state["verbose"]:
            traceback.print_exc()
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, IndexNotFound):  # the command line's own advice, not the library's
            index = exc.index or state["index"] or settings().index
            flag = f" --index {index}" if state["index"] else ""
            first = (
                f"index {index!r} does not exist: create it with `hybrid-search{flag} init`, or fill it with "
                f"`hybrid-search{flag} ingest FILE`"
            )
        err.print(f"error ({type(exc).__name__}): {first}", markup=False)
        if stopped is not None and (said := stopped()) is not None:
            err.print(f"stopped: {said}", markup=False)
        raise typer.Exit(2) from None
    except (ValueError, OSError) as exc:  # bad settings (pydantic), unreadable files
        if state["verbose"]:
            traceback.print_exc()
        err.print(f"error: {str(exc).splitlines()[0]}", markup=False)
        raise typer.Exit(2) from None
    raise typer.Exit(code or 0)


def progress_bar() -> Progress:
    """A progress bar on stderr (what it counts, a bar, done / total, the time so far), gone when done."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    )


def open_client() -> SearchClient:
    from .._client import SearchClient

    return SearchClient.from_settings(settings())


def search_mode(value: str) -> SearchMode:
    """``--mode``: hybrid, bm25 or knn."""
    if value not in get_args(SearchMode):
        raise ConfigurationError(f"--mode must be one of {', '.join(get_args(SearchMode))}, got {value!r}")
    return cast(SearchMode, value)


_FILTER = re.compile(r"^(?P<key>[A-Za-z0-9_.\-]+)\s*(?P<op>>=|<=|!=|=|>|<)\s*(?P<value>.*)$")
_RANGE_OPS = {">=": "gte", "<=": "lte", ">": "gt", "<": "lt"}


def parse_filters(pairs: list[str], *, since: str | None = None, until: str | None = None) -> dict[str, Any]:
    """``--filter`` values as the filter model: ``key=value`` (repeat a key for either of several values),
    ``key>=value`` / ``>`` / ``<=`` / ``<`` (a range, e.g. ``published_at>=2024-01-01``), ``key!=`` (the field
    is absent); ``since`` / ``until``: ``published_at`` from / to (inclusive)."""
    filters: dict[str, Any] = {}
    for pair in pairs:
        m = _FILTER.match(pair.strip())
        if m is None:
            raise ConfigurationError(
                f"--filter takes key=value or a range such as published_at>=2024-01-01, got {pair!r}"
            )
        key, op, value = m.group("key"), m.group("op"), m.group("value").strip()
        if op in _RANGE_OPS:
            bounds = filters.setdefault(key, {})
            if not isinstance(bounds, dict):
                raise ConfigurationError(f"--filter {key}: a value and a range cannot be combined")
            bounds[_RANGE_OPS[op]] = value
        elif op == "!=":
            if value:
                raise ConfigurationError(f"--filter {key}!= takes no value (it means: {key} is absent)")
            filters[key] = {"exists": False}
        elif key in filters:  # the same key twice: either value
            prev = filters[key]
            filters[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            filters[key] = value
    for bound, value in (("gte", since), ("lte", until)):
        if value:
            dates = filters.setdefault("published_at", {})
            if not isinstance(dates, dict):
                raise ConfigurationError("--since/--until cannot be combined with published_at=VALUE")
            dates[bound] = value
    return filters
