"""The command line as a newcomer uses it, through the real `hybrid-search` entry point against a real
Elasticsearch: what the table shows, folders of real files, progress in a log, a server lost mid-ingest, the
counts `health` gives, and the messages a mistake gets."""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import pydoc
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
from elasticsearch import AsyncElasticsearch

from storage import InvalidQuery, SearchClient, SearchSettings
from tests._faultproxy import FaultProxy

from .test_cli import _run

EXE = str(Path(sys.executable).parent / "hybrid-search")
#: Long documents read in passages with the hashing embedder: a 40-token window, passages of 24.
PASSAGES = {
    "EMBEDDINGS_WINDOW_TOKENS": "40",
    "EMBEDDINGS_DIMENSIONS": "256",
    "ES_PASSAGE_TOKENS": "24",
    "ES_PASSAGE_OVERLAP": "6",
}
FILLER = "The weather service expects rain over the northern hills with mild winds in the afternoon. "
TAIL = "Zorblax Corporation raised its quarterly revenue on strong quantum widget sales."


def _corpus(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _tiny_pdf(text: str) -> bytes:
    """A one-page PDF whose page says ``text`` (Helvetica, one text object): what a scanner-free PDF holds."""
    stream = f"BT /F1 12 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def test_the_search_table_shows_the_passage_that_matched_and_hides_unrelated_semantic_hits(
    settings: SearchSettings, tmp_path: Path
) -> None:
    records: list[dict[str, object]] = [
        {"_id": "long", "title": "Annual report", "text": FILLER * 30 + TAIL},
        {"_id": "short", "title": "Widget news", "text": "Widget makers expect steady sales."},
        *({"_id": f"weather-{i}", "title": "Forecast", "text": FILLER * (i + 1)} for i in range(4)),
    ]
    ingest = _run(settings, "ingest", str(_corpus(tmp_path / "c.jsonl", records)), env=PASSAGES)
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr

    table = _run(settings, "search", "Zorblax quantum widget revenue", env=PASSAGES)
    assert table.returncode == 0, table.stderr
    assert "Zorblax Corporation raised" in table.stdout  # the passage, 2,700 characters into the text
    start = len(FILLER * 30) - 200
    assert "[characters " in table.stdout
    where = table.stdout.split("[characters ", 1)[1].split("]", 1)[0]
    assert int(where.split("-")[0]) >= start

    # Nothing matches these words; the nearest neighbours are not shown as results (the agent tool's floor).
    unrelated = _run(settings, "search", "Ελληνικά κείμενο", "--min-similarity", "0.99", env=PASSAGES)
    assert unrelated.returncode == 0, unrelated.stderr
    assert "no matches" in unrelated.stdout
    assert "semantic-only hit" in unrelated.stdout
    assert "not shown" in unrelated.stdout
    shown = _run(settings, "search", "Ελληνικά κείμενο", "--min-similarity", "0", env=PASSAGES)
    assert "no matches" not in shown.stdout

    long_query = _run(settings, "search", "widget " * 3000, env=PASSAGES)
    assert long_query.returncode == 0, long_query.stderr
    assert "note: the query was longer than 1,000 characters" in long_query.stdout

    # More results than the fusion window: the window widens for that call, on every surface.
    many = json.loads(_run(settings, "search", "weather", "--limit", "60", "--json", env=PASSAGES).stdout)
    assert many["fusion"]["window"] == 60
    assert many["fusion_sources"]["window"] == "limit"

    # health counts documents, not the Lucene documents the passages add.
    health = json.loads(_run(settings, "health", "--json", env=PASSAGES).stdout)
    assert health["index"]["documents"] == len(records)


async def test_a_limit_beyond_the_window_widens_it_and_a_wrong_type_is_a_typed_error(client: SearchClient) -> None:
    await client.ensure_index()
    await client.index_documents(
        [{"id": f"n{i}", "text": f"quarterly revenue note {i}"} for i in range(70)], refresh=True
    )
    res = await client.search("revenue", limit=60, mode="bm25")
    assert len(res.hits) == 60
    assert res.fusion_sources["window"] == "limit"
    for bad in ({"limit": "3"}, {"limit": True}, {"offset": 1.5}):
        with pytest.raises(InvalidQuery, match="whole number"):
            await client.search("revenue", **bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidQuery, match=r"beyond the fusion window \(50\)"):  # a window the call chose is kept
        await client.search("revenue", limit=60, window=50)
    with pytest.raises(InvalidQuery, match=r"10001 is more than one search fuses \(10000\): walk the results"):
        await client.search("revenue", limit=10, offset=9991)  # (no window= could hold it: none is suggested)


async def _written(es: AsyncElasticsearch, index: str) -> int:
    """Documents ``index`` holds, searchable (0 before it exists or while its shard starts)."""
    resp = await es.options(ignore_status=(404, 503), retry_on_status=()).count(index=index)
    return int(resp.body.get("count", 0)) if resp.meta.status == 200 else 0


def test_a_folder_of_files_is_read_by_kind_with_titles_sources_and_types(
    settings: SearchSettings, tmp_path: Path
) -> None:
    docs = tmp_path / "handbook"
    (docs / "guides").mkdir(parents=True)
    (docs / "intro.md").write_text("Some preface line\n\n# Getting started\n\nInstall the turbine controller first.")
    (docs / "guides" / "page.html").write_text(
        "<html><head><title>Maintenance &amp; care</title><script>var secret = 'not text';</script></head>"
        "<body><h1>Care</h1><p>Grease the turbine bearings <b>monthly</b>.</p></body></html>"
    )
    (docs / "guides" / "filing.pdf").write_bytes(_tiny_pdf("Quarterly filing about turbine maintenance"))
    (docs / "tool.py").write_text("print('not a document')\n")
    (docs / ".hidden.md").write_text("# editor backup")
    res = _run(settings, "ingest", str(docs))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "indexed 3 of 3 documents" in res.stdout
    assert "skipped 1 files of kinds ingest does not read: .py (1)" in res.stderr

    found = json.loads(_run(settings, "search", "turbine", "--json", "--mode", "bm25").stdout)
    by_id = {h["id"]: h["source"] for h in found["hits"]}
    assert set(by_id) == {"intro.md", "guides/page.html", "guides/filing.pdf"}
    assert by_id["intro.md"]["title"] == "Getting started"
    assert by_id["intro.md"]["doc_type"] == "markdown"
    assert by_id["intro.md"]["source"] == "handbook"
    assert by_id["guides/page.html"]["title"] == "Maintenance & care"
    assert by_id["guides/page.html"]["doc_type"] == "html"
    assert by_id["guides/page.html"]["source"] == "guides"
    assert "secret" not in by_id["guides/page.html"]["text"]
    assert "<b>" not in by_id["guides/page.html"]["text"]
    assert by_id["guides/filing.pdf"]["doc_type"] == "pdf"
    assert "Quarterly filing" in by_id["guides/filing.pdf"]["text"]
    facet = json.loads(_run(settings, "search", "turbine", "--json", "--facet", "source").stdout)
    assert {b["value"]: b["count"] for b in facet["facets"]["counts"]["source"]["buckets"]} == {
        "guides": 2,
        "handbook": 1,
    }

    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = _run(settings, "ingest", str(empty))
    assert nothing.returncode == 1
    assert "nothing to index" in nothing.stderr
    code = tmp_path / "code"
    code.mkdir()
    (code / "a.py").write_text("x = 1\n")
    only_code = _run(settings, "ingest", str(code))
    assert only_code.returncode == 1
    assert "skipped 1 files" in only_code.stderr
    assert "nothing to index" in only_code.stderr
    one_py = _run(settings, "ingest", str(code / "a.py"))
    assert one_py.returncode == 2
    assert "ingest reads a .jsonl file" in one_py.stderr
    assert "not JSON" not in one_py.stdout + one_py.stderr


def test_ingest_writes_progress_lines_a_log_keeps(settings: SearchSettings, tmp_path: Path) -> None:
    records = [{"_id": f"p{i}", "title": "Report", "text": FILLER * 8} for i in range(40)]
    corpus = _corpus(tmp_path / "c.jsonl", records)
    res = _run(settings, "ingest", str(corpus), "--progress-every", "0", env={**PASSAGES, "ES_EMBED_BATCH_SIZE": "8"})
    assert res.returncode == 0, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.startswith("indexing: ")]
    assert len(lines) >= 5  # a line per embedding call and per write: the log moves as the work does
    assert "of 40 documents" in lines[-1]
    assert "vectors embedded" in lines[-1]
    assert "documents/s" in lines[0]


async def test_a_server_lost_mid_ingest_says_what_was_written_and_that_running_again_is_safe(
    settings: SearchSettings, tmp_path: Path, es: AsyncElasticsearch
) -> None:
    upstream = urlparse(settings.url or "")
    proxy = await FaultProxy(upstream.hostname or "127.0.0.1", upstream.port or 9200).start()
    records = [{"_id": f"m{i}", "title": "Memo", "text": f"turbine memo number {i}"} for i in range(80)]
    corpus = _corpus(tmp_path / "c.jsonl", records)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "ES_URL": proxy.url,
        "ES_INDEX": settings.index,
        "EMBEDDINGS_PROVIDER": "hashing",
        "EMBEDDINGS_DIMENSIONS": "64",
        "ES_EMBED_BATCH_SIZE": "2",
        "ES_RETRY_ATTEMPTS": "1",
        "ES_BREAKER_FAIL_MAX": "2",
    }
    try:
        await proxy.set_mode("latency", latency_s=0.3)  # every answer slowed: the ingest takes seconds
        proc = await asyncio.create_subprocess_exec(
            EXE, "ingest", str(corpus), env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        # Until a batch is written and searchable (however long the command takes to start on busy cores; the
        # load refreshes after its first bulk request), then the server is gone.
        for _ in range(6000):  # (at most 120 s)
            if await _written(es, settings.index) or proc.returncode is not None:
                break
            await asyncio.sleep(0.02)
        seen = proxy.requests
        await proxy.set_mode("refuse")
        out_b, err_b = await asyncio.wait_for(proc.communicate(), 120)
    finally:
        await proxy.stop()
    output = out_b.decode() + err_b.decode()
    assert proc.returncode in (1, 2), f"{seen} requests before the cut: {output}"
    assert "Running the same command again is safe" in output
    await es.indices.refresh(index=settings.index)
    held = (await es.count(index=settings.index)).body["count"]
    assert 0 < held < len(records), output
    if proc.returncode == 2:
        confirmed = int(output.split("stopped: ", 1)[1].split()[0])
        assert 0 <= confirmed <= held, output  # a batch in flight may have been written without its answer
    again = _run(settings, "ingest", str(corpus))
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"{held} were in the index with the same content already" in again.stdout


def test_mistakes_get_whole_messages_and_help_shows_what_calls_take(settings: SearchSettings) -> None:
    assert _run(settings, "init").returncode == 0
    bad_date = _run(settings, "search", "revenue", "--since", "2024-13-45")
    assert bad_date.returncode == 2
    message = bad_date.stderr.strip().splitlines()[0]
    assert "2024-13-45" in message
    last_word = message.rstrip(")…").split()[-1]
    assert last_word.isalpha() or message.endswith("…") or message.endswith(")"), message
    for command in ("search", "ingest", "health"):
        helped = _run(settings, command, "--help")
        assert helped.returncode == 0
        assert "<bool>" not in helped.stdout, helped.stdout
    signature = inspect.signature(SearchClient.search)
    assert list(signature.parameters)[:2] == ["self", "query"]
    assert "limit" in signature.parameters
    assert "limit" in inspect.signature(SearchClient.answer).parameters
    text = pydoc.render_doc(SearchClient, renderer=pydoc.plaintext)
    assert "search(self, query" in text
    assert "search_page(self, query" in text
