"""The console script, end to end against the real Elasticsearch (each test runs `hybrid-search` itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from storage import SearchSettings

EXE = str(Path(sys.executable).parent / "hybrid-search")


def _run(settings: SearchSettings, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "ES_URL": settings.url or "",
        "ES_INDEX": settings.index,
        "EMBEDDINGS_PROVIDER": "hashing",
        "EMBEDDINGS_DIMENSIONS": "64",
        "COLUMNS": "200",
        # The checkout's model cache (dev.sh sets it): the demo's local model is not fetched into $HOME.
        **{k: v for k, v in os.environ.items() if k == "EMBEDDINGS_CACHE_DIR"},
    }
    return subprocess.run(
        [EXE, *args], env={**base, **(env or {})}, capture_output=True, text=True, timeout=120, check=False
    )


def _beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    corpus = [
        {"_id": "d1", "title": "Apple guidance", "text": "Apple cut its revenue guidance.", "ticker": "AAPL"},
        {"_id": "d2", "title": "Microsoft cloud", "text": "Azure revenue grew thirty percent.", "ticker": "MSFT"},
        {"_id": "d3", "title": "Weather", "text": "Rain and mild temperatures in April."},
    ]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(c) for c in corpus) + "\n")
    queries = [{"_id": "q1", "text": "apple revenue guidance"}, {"_id": "q2", "text": "azure cloud growth"}]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(q) for q in queries) + "\n")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n")
    return folder


def test_init_ingest_search_and_health_work_end_to_end(settings: SearchSettings, tmp_path: Path) -> None:
    init = _run(settings, "init")
    assert init.returncode == 0, init.stderr
    assert f"alias {settings.index} -> {settings.index}-000001 (0 documents)" in init.stdout

    corpus = _beir(tmp_path / "beir") / "corpus.jsonl"
    ingest = _run(settings, "ingest", str(corpus))
    assert ingest.returncode == 0, ingest.stderr
    assert "indexed 3 of 3 documents" in ingest.stdout
    assert "failed 0" in ingest.stdout

    table = _run(settings, "search", "revenue guidance", "--filter", "ticker=AAPL")
    assert table.returncode == 0, table.stderr
    assert "d1" in table.stdout
    assert "Apple guidance" in table.stdout
    assert "d2" not in table.stdout

    as_json = _run(settings, "search", "revenue", "--json", "--limit", "2", "--mode", "bm25")
    res = json.loads(as_json.stdout)
    assert res["mode"] == "bm25"
    assert {h["id"] for h in res["hits"]} == {"d1", "d2"}

    health = _run(settings, "health", "--json")
    assert health.returncode == 0, health.stderr
    report = json.loads(health.stdout)
    assert report["license"] == "basic"
    assert report["index"]["documents"] == 3
    assert report["breakers"]["elasticsearch"]["state"] == "closed"
    human = _run(settings, "health")
    assert "index: " in human.stdout
    assert "3 documents" in human.stdout


def test_ingest_reports_failures_and_exits_non_zero(settings: SearchSettings, tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"_id": "ok-1", "text": "fine"})
        + "\n{not json\n"
        + json.dumps(
            {"_id": "wide", "text": "x", "metadata": {f"key{i}": "v" for i in range(400)}}
        )  # (> the fields limit)
        + "\n"
        + json.dumps({"_id": "no-text"})
        + "\n"
    )
    res = _run(settings, "ingest", str(bad))
    assert res.returncode == 1
    assert "indexed 1 of 4 documents" in res.stdout
    assert "failed 3" in res.stdout
    assert "line 2: not JSON" in res.stdout
    assert "wide: mapping_error" in res.stdout
    assert "invalid: line 4: no-text: document: Value error, a document needs a title or a text" in res.stdout

    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# First note\nRevenue guidance for the quarter.")
    (folder / "b.txt").write_text("Second note about the cloud.")
    ok = _run(settings, "ingest", str(folder))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "indexed 2 of 2 documents" in ok.stdout


def test_eval_prints_ndcg_for_each_mode(settings: SearchSettings, tmp_path: Path) -> None:
    res = _run(settings, "--index", f"{settings.index}-eval", "eval", str(_beir(tmp_path / "tiny")), "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    modes = {(r["mode"], r["fusion"]) for r in out["results"]}
    assert modes == {("bm25", None), ("knn", None), ("hybrid", "rrf"), ("hybrid", "linear_minmax"), ("hybrid", "dbsf")}
    assert all(0.0 <= r["ndcg_at_10"] <= 1.0 for r in out["results"])
    bm25 = next(r for r in out["results"] if r["mode"] == "bm25")
    assert bm25["ndcg_at_10"] == pytest.approx(1.0)


def test_errors_are_one_line_and_a_non_zero_exit(settings: SearchSettings, tmp_path: Path) -> None:
    no_es = _run(settings, "search", "x", env={"ES_URL": ""})
    assert no_es.returncode == 2
    lines = no_es.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error (ElasticsearchNotConfigured)")
    assert "Traceback" not in no_es.stderr
    verbose = _run(settings, "--verbose", "search", "x", env={"ES_URL": ""})
    assert "Traceback" in verbose.stderr
    bad_filter = _run(settings, "search", "x", "--filter", "nope")
    assert bad_filter.returncode == 2
    assert "key=value" in bad_filter.stderr
    unknown_field = _run(settings, "search", "x", "--filter", "colour=red")
    assert unknown_field.returncode == 2
    assert "InvalidQuery" in unknown_field.stderr
    missing = _run(settings, "ingest", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 2
    kibana = _run(settings, "kibana-import", "--kibana-url", "http://127.0.0.1:9")
    assert kibana.returncode == 2
    assert "cannot reach Kibana" in kibana.stderr


def test_demo_indexes_its_corpus_searches_and_cleans_up(settings: SearchSettings) -> None:
    res = _run(settings, "demo", "cloud revenue", env={"EMBEDDINGS_PROVIDER": "local"})
    assert res.returncode == 0, res.stderr
    assert "indexed 6 documents" in res.stdout
    assert 'query "cloud revenue" (hybrid;' in res.stdout
    assert "demo-msft-cloud" in res.stdout
    assert "done in" in res.stdout


def test_an_interrupted_ingest_run_again_embeds_only_what_is_missing(settings: SearchSettings, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    records = [{"_id": f"n{i}", "title": f"Note {i}", "text": f"revenue note number {i}"} for i in range(30)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records[:12]))  # the part written before Ctrl-C
    first = _run(settings, "ingest", str(corpus))
    assert first.returncode == 0, first.stderr
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))  # the same command again, all of it
    again = _run(settings, "ingest", str(corpus))
    assert again.returncode == 0, again.stderr
    assert "indexed 30 of 30 documents" in again.stdout
    assert "12 were in the index with the same content already: not embedded again" in again.stdout


def test_ingest_reports_duplicate_ids_and_keeps_unknown_fields_in_metadata(
    settings: SearchSettings, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(
        json.dumps({"_id": "a", "text": "first copy", "category": "energy"})
        + "\n"
        + json.dumps({"_id": "b", "text": "other", "pages": 12})
        + "\n"
        + json.dumps({"_id": "a", "text": "second copy", "category": "utilities"})
        + "\n"
    )
    res = _run(settings, "ingest", str(corpus))
    assert res.returncode == 0, res.stderr
    assert "indexed 2 of 3 documents" in res.stdout
    assert "1 given twice" in res.stdout
    assert "the same id more than once (the last copy in the file was indexed): a" in res.stdout
    assert "fields kept in metadata (metadata.<name> filters): category, pages" in res.stdout
    found = json.loads(_run(settings, "search", "copy", "-f", "metadata.category=utilities", "--json").stdout)
    assert [h["id"] for h in found["hits"]] == ["a"]
    assert found["hits"][0]["source"]["text"] == "second copy"


def test_the_command_line_takes_ranges_and_says_what_it_uses(settings: SearchSettings, tmp_path: Path) -> None:
    corpus = tmp_path / "dated.jsonl"
    corpus.write_text(
        "".join(
            json.dumps({"_id": f"y{y}", "text": "annual revenue report", "published_at": f"{y}-06-01"}) + "\n"
            for y in (2022, 2023, 2024)
        )
    )
    assert _run(settings, "ingest", str(corpus)).returncode == 0
    for args in (["-f", "published_at>=2023-01-01"], ["--since", "2023-01-01"]):
        res = json.loads(_run(settings, "search", "revenue", "--json", *args).stdout)
        assert sorted(h["id"] for h in res["hits"]) == ["y2023", "y2024"], args
    window = json.loads(
        _run(settings, "search", "revenue", "--json", "-f", "published_at>2022-12-31", "--until", "2023-12-31").stdout
    )
    assert [h["id"] for h in window["hits"]] == ["y2023"]
    health = _run(settings, "health")
    assert "fusion: rrf k=10 window=50 bm25:knn=1:1 (method from default" in health.stdout
    narrow = _run(settings, "models", env={"COLUMNS": "80"})
    assert "bge-small-en-v1.5 (default)" in narrow.stdout
    assert "bge-small-en-v1.5-fp32" in narrow.stdout


def test_errors_name_the_fix_the_command_line_can_make(settings: SearchSettings, tmp_path: Path) -> None:
    nosuch = _run(settings, "--index", "nosuch-index-here", "search", "revenue")
    assert nosuch.returncode == 2
    assert "index 'nosuch-index-here' does not exist" in nosuch.stderr
    assert "hybrid-search --index nosuch-index-here init" in nosuch.stderr
    refused = _run(settings, "search", "revenue", env={"ES_URL": "http://127.0.0.1:9"})
    assert refused.returncode == 2
    assert "http://127.0.0.1:9" in refused.stderr
    assert "python -m storage.local_es start" in refused.stderr
    assert refused.stderr.count("cannot reach") == 1  # one cause, said once
    tls = _run(settings, "search", "revenue", env={"ES_URL": (settings.url or "").replace("http://", "https://")})
    assert tls.returncode == 2
    assert "use http://" in tls.stderr
    no_es = _run(settings, "search", "x", env={"ES_URL": ""})
    assert "hybrid-search compose" in no_es.stderr
    compose = _run(settings, "compose")
    assert compose.returncode == 0
    assert "docker.elastic.co/elasticsearch/elasticsearch" in compose.stdout
    corpus = _beir(tmp_path / "beir") / "corpus.jsonl"
    assert _run(settings, "ingest", str(corpus)).returncode == 0
    ask = _run(settings, "ask", "Why did Apple cut its guidance?", env={"LLM_PROVIDER": "none"})
    assert ask.returncode == 1
    assert "d1" in ask.stdout  # what the answer would have read
    assert "no chat model is configured" in ask.stderr
    assert "python -m embeddings.local_llm start" in ask.stderr


def test_eval_and_tune_report_the_same_figure_and_eval_indexes_once(settings: SearchSettings, tmp_path: Path) -> None:
    folder = _beir(tmp_path / "tiny")
    index = f"{settings.index}-agree"
    first = _run(settings, "--index", index, "eval", str(folder), "--json")
    assert first.returncode == 0, first.stderr
    assert "indexing 3 documents" in first.stderr
    again = _run(settings, "--index", index, "eval", str(folder), "--json")
    assert again.returncode == 0, again.stderr
    assert "as it is (3 documents" in again.stderr  # not indexed a second time
    hybrid = next(r for r in json.loads(again.stdout)["results"] if r["mode"] == "hybrid")
    tuned = json.loads(_run(settings, "--index", index, "tune", str(folder), "--json").stdout)
    assert tuned["current"]["ndcg"] == pytest.approx(hybrid["ndcg_at_10"], abs=1e-4)
