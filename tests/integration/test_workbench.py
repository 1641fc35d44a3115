"""The workbench (issue 52) against a real Elasticsearch: its JSON API (what the page reads), its token, its
read-only default — and the page itself in a real browser (Debian's headless Chromium, driven by Selenium):
the three columns equal search(), a changed fusion equals search() with that fusion, judgments made by click and
by keyboard are exported as the qrels they are, tune runs on them, two runs compare query by query, apply is
refused without the write flag, and markup in a query or a document is shown, never run."""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from embeddings import HashingEmbedder
from storage import Document, SearchClient, SearchSettings
from storage.workbench import Workbench, create_app

from . import test_framework_retrievers as retrievers

CORPUS = [
    *retrievers.CORPUS,
    Document(
        id="xss-1",
        title='<img src=x onerror="document.body.dataset.pwned=1">revenue',
        text="<script>document.body.dataset.pwned=1</script> revenue guidance notes",
    ),
]
QUERY = retrievers.QUERY
SCREENSHOTS = Path(
    os.environ.get("WORKBENCH_SCREENSHOTS", Path(__file__).resolve().parents[2] / ".cache" / "workbench")
)


def _client(settings: SearchSettings) -> SearchClient:
    return SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64))


def _load(settings: SearchSettings) -> None:
    async def load() -> None:
        async with _client(settings) as c:
            await c.ensure_index()
            assert (await c.index_documents(CORPUS, refresh=True)).ok

    asyncio.run(load())


async def _search(settings: SearchSettings, **kwargs: Any) -> list[str]:
    async with _client(settings) as c:
        return (await c.search(QUERY, **kwargs)).ids


@pytest.fixture
def app(settings: SearchSettings) -> Iterator[tuple[TestClient, str]]:
    _load(settings)
    token = secrets.token_urlsafe(16)
    wb = Workbench(lambda: _client(settings), token=token, judge="tester")
    with TestClient(create_app(wb)) as tc:
        yield tc, token


def test_the_api_answers_only_with_the_token_and_compares_three_columns(
    app: tuple[TestClient, str], settings: SearchSettings
) -> None:
    tc, token = app
    assert tc.get("/").status_code == 403
    assert tc.post("/api/compare", json={"query": QUERY}).status_code == 403
    assert tc.get("/api/info", headers={"x-workbench-token": "wrong"}).status_code == 403
    page = tc.get(f"/?token={token}")  # the first visit: the token becomes a cookie
    assert page.status_code == 200
    assert "hybrid-search workbench" in page.text
    info = tc.get("/api/info").json()  # (the cookie)
    assert info["allow_writes"] is False
    # What this index's documents hold values in (the page offered the demo's ticker, source and doc_type
    # whatever the index held): ticker only here.
    assert info["fields"] == {"ticker": "keyword"}
    assert info["fusion_sources"]["method"] in ("default", "settings", "index")
    data = tc.post("/api/compare", json={"query": QUERY, "limit": 5}).json()
    assert data["bm25"]["ids"] == asyncio.run(_search(settings, mode="bm25", limit=5))
    assert data["knn"]["ids"] == asyncio.run(_search(settings, mode="knn", limit=5))
    assert data["fused"]["ids"] == asyncio.run(_search(settings, limit=5))
    assert data["fused"]["hits"][0]["ranks"]
    # Another fusion, re-fused from the candidates (no search): what search() gives with that fusion.
    fusion = {"method": "rrf", "k": 60, "weights": {"bm25": 1.0, "knn": 0.25}}
    fused = tc.post(
        "/api/fuse", json={"candidates": data["candidates"], "fusion": fusion, "window": data["window"], "limit": 5}
    ).json()
    assert fused["ids"] == asyncio.run(_search(settings, limit=5, rrf_k=60, weights={"bm25": 1.0, "knn": 0.25}))
    bad = tc.post("/api/compare", json={"query": "  "})
    assert bad.status_code == 400
    assert bad.json()["error"] == "the query is empty"


def test_judgments_export_as_qrels_tune_runs_and_apply_needs_the_write_flag(app: tuple[TestClient, str]) -> None:
    tc, token = app
    headers = {"x-workbench-token": token}
    for doc, grade in (("aapl-1", 2), ("msft-1", 1), ("wx-1", 0)):
        assert tc.post(
            "/api/judgments", json={"query": QUERY, "doc_id": doc, "grade": grade}, headers=headers
        ).is_success
    assert (
        tc.post("/api/judgments", json={"query": QUERY, "doc_id": "x", "grade": 3}, headers=headers).status_code == 400
    )
    qrels = tc.get("/api/qrels.tsv", headers=headers).text.splitlines()
    assert qrels[0] == "query-id\tcorpus-id\tscore"
    qid = qrels[1].split("\t")[0]
    assert sorted(qrels[1:]) == sorted([f"{qid}\taapl-1\t2", f"{qid}\tmsft-1\t1", f"{qid}\twx-1\t0"])
    assert f'"_id": "{qid}", "text": "{QUERY}"' in tc.get("/api/queries.jsonl", headers=headers).text
    judged = tc.get("/api/judged", headers=headers).json()["queries"]
    assert judged[0]["query"] == QUERY
    assert "aapl-1" not in judged[0]["unjudged_in_top10"]
    assert "aapl-2" in judged[0]["unjudged_in_top10"]
    measured = tc.post("/api/measure", json={}, headers=headers).json()
    assert {r["mode"] for r in measured["rows"]} == {"bm25", "knn", "hybrid"}
    report = tc.post("/api/tune", json={"min_queries": 1}, headers=headers).json()
    assert report["queries"] == 1
    assert report["decision"] in ("keep", "change")
    refused = tc.post("/api/apply", json={"setting": report["best"]["setting"], "confirm": True}, headers=headers)
    assert refused.status_code == 403
    assert "read-only" in refused.json()["error"]


QUERIES_JSONL = (
    '{"_id": "7", "text": "revenue guidance"}\n{"_id": "12", "text": "spring weather"}\n'
    '{"_id": "30", "text": "annual report margins"}\n'
)
#: Graded 0-4 (a collection's own scale), ids as the collection has them.
QRELS = {"7": {"aapl-1": 4, "msft-1": 3, "aapl-2": 1}, "12": {"wx-1": 2}, "30": {"aapl-2": 3, "msft-1": 0}}


def _qrels_text(*, trec: bool) -> str:
    rows = [(q, d, g) for q, docs in QRELS.items() for d, g in docs.items()]
    if trec:
        return "".join(f"{q} 0 {d} {g}\n" for q, d, g in rows)
    return "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{g}\n" for q, d, g in rows)


@pytest.mark.parametrize("trec", [False, True], ids=["beir", "trec"])
def test_an_import_keeps_ids_and_grades_and_measures_as_the_library_does(
    app: tuple[TestClient, str], settings: SearchSettings, trec: bool
) -> None:
    """Grades 3 and 4 were stored as 2 and ids replaced by digests, so the page's nDCG@10 differed from
    evaluate() on the same qrels (issue 63); TREC's four columns were refused."""
    tc, token = app
    headers = {"x-workbench-token": token}
    answer = tc.post("/api/qrels", json={"queries": QUERIES_JSONL, "qrels": _qrels_text(trec=trec)}, headers=headers)
    assert answer.json() == {"imported": 6, "queries": 3}
    exported = tc.get("/api/qrels.tsv", headers=headers).text.splitlines()[1:]
    assert sorted(exported) == sorted(f"{q}\t{d}\t{g}" for q, docs in QRELS.items() for d, g in docs.items())
    assert '"_id": "12", "text": "spring weather"' in tc.get("/api/queries.jsonl", headers=headers).text
    page = {
        (r["mode"], r["fusion"]): r["ndcg_at_10"]
        for r in tc.post("/api/measure", json={}, headers=headers).json()["rows"]
    }

    async def library() -> dict[tuple[str, str | None], float]:
        from storage.evaluation import Judgments, evaluate

        queries = {"7": "revenue guidance", "12": "spring weather", "30": "annual report margins"}
        async with _client(settings) as c:
            in_force, _ = await c.indices.fusion_in_force()
            rows = await evaluate(c, Judgments("same qrels", queries, QRELS), fusions=[in_force])
        return {(r.mode, r.fusion): round(r.ndcg_at_10, 4) for r in rows}

    for key, ndcg in asyncio.run(library()).items():
        assert page[key] == ndcg, key
    # The compare view gets each hit's grade, imported ones included (they were invisible there).
    compared = tc.post("/api/compare", json={"query": "revenue guidance", "limit": 5}, headers=headers).json()
    assert compared["judged"] == QRELS["7"]
    # A click on an imported query keeps its id and replaces the imported grade.
    tc.post("/api/judgments", json={"query": "spring weather", "doc_id": "wx-1", "grade": 0}, headers=headers)
    rows = tc.get("/api/qrels.tsv", headers=headers).text.splitlines()[1:]
    assert "12\twx-1\t0" in rows
    assert len(rows) == 6
    # Judgments can be deleted (nothing could be): one document's, then a whole query's (it leaves the measured
    # set); the judged list names imported queries by their own ids.
    assert {q["query_id"] for q in tc.get("/api/judged", headers=headers).json()["queries"]} == {"7", "12", "30"}
    forget = tc.post("/api/judgments/forget", json={"query": "revenue guidance", "doc_id": "msft-1"}, headers=headers)
    assert forget.json() == {"forgotten": 1}
    assert tc.post("/api/judgments/forget", json={"query": "spring weather"}, headers=headers).json() == {
        "forgotten": 1
    }
    left = sorted(tc.get("/api/qrels.tsv", headers=headers).text.splitlines()[1:])
    assert left == sorted(["7\taapl-1\t4", "7\taapl-2\t1", "30\taapl-2\t3", "30\tmsft-1\t0"])
    assert tc.post("/api/measure", json={}, headers=headers).json()["queries"] == 2


def test_runs_keep_each_querys_score_as_the_library_measures_it_and_compare_query_by_query(
    app: tuple[TestClient, str], settings: SearchSettings
) -> None:
    """Experiments (issue 63): run A with the fusion in force, run B with BM25 alone, run C with another fusion;
    each run's mean is what evaluate() gives on the same judgments; B against A query by query."""
    tc, token = app
    headers = {"x-workbench-token": token}
    assert tc.post("/api/runs/create", json={"name": "a"}, headers=headers).status_code == 400  # nothing judged
    tc.post("/api/qrels", json={"queries": QUERIES_JSONL, "qrels": _qrels_text(trec=False)}, headers=headers)
    a = tc.post("/api/runs/create", json={"name": "a"}, headers=headers).json()
    b = tc.post("/api/runs/create", json={"name": "b", "mode": "bm25"}, headers=headers).json()
    other = {"method": "rrf", "k": 5, "weights": {"bm25": 1.0, "knn": 0.25}, "window": 20}
    c = tc.post("/api/runs/create", json={"name": "c", "setting": other}, headers=headers).json()
    assert (a["in_force"], b["mode"], c["in_force"]) == (True, "bm25", False)
    assert a["queries"] == b["queries"] == c["queries"] == 3

    async def library() -> dict[str, float]:
        from storage.evaluation import Judgments, evaluate
        from storage.fusion import FusionSetting

        queries = {"7": "revenue guidance", "12": "spring weather", "30": "annual report margins"}
        async with _client(settings) as client:
            in_force, _ = await client.indices.fusion_in_force()
            rows = await evaluate(
                client, Judgments("same qrels", queries, QRELS), fusions=[in_force, FusionSetting.from_meta(other)]
            )
        by = {(r.mode, r.parameters.get("k")): round(r.ndcg_at_10, 4) for r in rows}
        return {"a": by[("hybrid", in_force.k)], "b": by[("bm25", None)], "c": by[("hybrid", 5)]}

    assert {r["name"]: r["mean_ndcg"] for r in (a, b, c)} == asyncio.run(library())
    # A name is one run; the list is newest first.
    again = tc.post("/api/runs/create", json={"name": "a"}, headers=headers)
    assert again.status_code == 400
    assert "exists" in again.json()["error"]
    assert [r["name"] for r in tc.get("/api/runs", headers=headers).json()["runs"]] == ["c", "b", "a"]
    compared = tc.post("/api/runs/compare", json={"a": "a", "b": "b"}, headers=headers).json()
    assert compared["queries"] == 3
    assert compared["wins"] + compared["losses"] + compared["ties"] == 3
    assert [r["delta"] for r in compared["rows"]] == sorted((r["delta"] for r in compared["rows"]), reverse=True)
    for row in compared["rows"]:
        assert row["delta"] == round(row["b"] - row["a"], 4)
    assert {row["query"] for row in compared["rows"]} == {"revenue guidance", "spring weather", "annual report margins"}
    # A judgment made after a run does not rewrite it; deleting a run removes it.
    tc.post("/api/judgments", json={"query": "new question", "doc_id": "aapl-1", "grade": 1}, headers=headers)
    assert tc.post("/api/runs/compare", json={"a": "a", "b": "b"}, headers=headers).json()["queries"] == 3
    assert tc.post("/api/runs/forget", json={"name": "c"}, headers=headers).json() == {"deleted": "c"}
    assert tc.post("/api/runs/compare", json={"a": "a", "b": "c"}, headers=headers).status_code == 400


def test_explain_gives_each_legs_rank_its_share_of_the_fused_score_and_the_bm25_explanation(
    app: tuple[TestClient, str], settings: SearchSettings
) -> None:
    tc, token = app
    headers = {"x-workbench-token": token}
    fused = tc.post("/api/compare", json={"query": QUERY, "limit": 5}, headers=headers).json()["fused"]
    for hit in fused["hits"]:
        why = tc.post("/api/explain", json={"query": QUERY, "doc_id": hit["id"]}, headers=headers).json()
        assert {leg: r["rank"] for leg, r in why["legs"].items()} == hit["ranks"]
        assert why["fused"] == pytest.approx(hit["score"], rel=1e-9)
        assert sum(s["share"] for s in why["rrf"].values()) == pytest.approx(1.0)
        if "bm25" in hit["ranks"]:
            assert why["bm25"]["value"] == pytest.approx(hit["leg_scores"]["bm25"], rel=1e-5)
        else:
            assert why["bm25"] is None
    assert tc.post("/api/explain", json={"query": QUERY}, headers=headers).status_code == 400
    # Malformed input is a 400 naming what is wrong, never a 500 or the server's 400 passed on as a 502.
    for body in ({"filters": 5}, {"fusion": 5}, {"doc_id": "x" * 5000}):
        bad = tc.post("/api/explain", json={"query": QUERY, "doc_id": "aapl-1", **body}, headers=headers)
        assert bad.status_code == 400, (body, bad.text)
    assert tc.post("/api/runs/forget", json={"name": "r" * 5000}, headers=headers).status_code == 400


@pytest.mark.parametrize(
    ("queries", "qrels", "message"),
    [
        ("", "7\taapl-1\t1\n", "the queries file is empty"),
        (QUERIES_JSONL, "7\taapl-1\t1\n99\taapl-2\t1\n", "qrels line 2: query id '99' is not in queries.jsonl"),
        (QUERIES_JSONL, "7\taapl-1\thigh\n", "qrels line 1: the grade 'high' is not a whole number"),
        (QUERIES_JSONL, "7\taapl-1\t1\t2\t3\n", "qrels line 1 has 5 columns"),
        ('{"_id": "7"}\n', "7\taapl-1\t1\n", 'queries.jsonl line 1 needs "_id" and a non-empty "text"'),
    ],
)
def test_a_bad_import_line_is_named_and_nothing_is_written(
    app: tuple[TestClient, str], queries: str, qrels: str, message: str
) -> None:
    """Every line is checked before anything is written (a failed import was half written), and the error says
    which line, which file and what was expected (it read "... is not ... of a known query" for all)."""
    tc, token = app
    headers = {"x-workbench-token": token}
    answer = tc.post("/api/qrels", json={"queries": queries, "qrels": qrels}, headers=headers)
    assert answer.status_code == 400
    assert message in answer.json()["error"]
    assert tc.get("/api/qrels.tsv", headers=headers).text.splitlines()[1:] == []  # (not even the good lines)


def test_a_search_elasticsearch_refuses_says_where_it_is_and_why_without_credentials(settings: SearchSettings) -> None:
    """It read "bm25 leg failed: elasticsearch circuit is open" and nothing of which server or why (issue 63)."""
    with socket.socket() as probe:  # a port nothing listens on: connections are refused
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gone = settings.model_copy(update={"url": f"http://someone:s3cret@127.0.0.1:{port}", "leg_timeout_s": 2.0})
    token = secrets.token_urlsafe(16)
    wb = Workbench(lambda: _client(gone), token=token, judge="tester")
    with TestClient(create_app(wb)) as tc:
        answer = tc.post("/api/compare", json={"query": QUERY}, headers={"x-workbench-token": token})
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert f"Elasticsearch at http://127.0.0.1:{port}" in error
    assert "last failure: DependencyUnavailable" in error
    assert "s3cret" not in error
    assert "someone" not in error


def test_a_tenant_bound_workbench_sees_one_tenant_and_writes_need_a_confirmation(settings: SearchSettings) -> None:
    tenanted = settings.model_copy(update={"multi_tenant": True})

    async def load() -> None:
        async with _client(tenanted) as c:
            await c.ensure_index()
            await c.index_documents(CORPUS[:2], tenant_id="acme", refresh=True)
            await c.index_documents(CORPUS[2:4], tenant_id="globex", refresh=True)

    asyncio.run(load())
    wb = Workbench(lambda: _client(tenanted), token="t0ken", tenant_id="acme", allow_writes=True)
    with TestClient(create_app(wb), headers={"x-workbench-token": "t0ken"}) as tc:
        data = tc.post("/api/compare", json={"query": QUERY, "tenant_id": "globex"}).json()
        assert set(data["fused"]["ids"]) <= {"aapl-1", "aapl-2"}  # its own tenant, whatever the page asks
        unconfirmed = tc.post("/api/apply", json={"setting": {"method": "rrf", "k": 20, "window": 50}})
        assert unconfirmed.status_code == 400
        stored = tc.post("/api/apply", json={"setting": {"method": "rrf", "k": 20, "window": 50}, "confirm": True})
        assert stored.is_success, stored.text
        assert tc.get("/api/info").json()["fusion"]["k"] == 20


def test_traffic_lists_recent_slow_and_degraded_searches_from_telemetry(settings: SearchSettings) -> None:
    _load(settings)
    stream = f"logs-hybridsearch.workbench{settings.index.replace('-', '')}-default"
    shipped = settings.model_copy(update={"telemetry": True, "telemetry_data_stream": stream})
    wb = Workbench(lambda: _client(shipped), token="t0ken")
    with TestClient(create_app(wb), headers={"x-workbench-token": "t0ken"}) as tc:
        assert tc.get("/api/traffic?kind=recent").json()["searches"] == []
        tc.post("/api/compare", json={"query": QUERY, "limit": 3})
        rows: list[dict[str, Any]] = []
        for _ in range(60):  # the sink ships every 2 s
            rows = tc.get("/api/traffic?kind=recent").json()["searches"]
            if len(rows) >= 3:
                break
            time.sleep(0.5)
        assert len(rows) >= 3  # the three columns' searches
        assert {r["mode"] for r in rows} == {"bm25", "knn", "hybrid"}
        assert all(r["query"] == QUERY for r in rows)  # this workbench ran it: re-runnable
        assert tc.get("/api/traffic?kind=slow").json()["searches"]
        assert tc.get("/api/traffic?kind=degraded").json()["searches"] == []
        assert tc.get("/api/traffic?kind=other").status_code == 400


# -- the page in a real browser ------------------------------------------------------------------------------


def _browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    assert chromium, "the browser test needs Debian's chromium (dev.sh installs it)"
    assert driver, "the browser test needs Debian's chromium-driver (dev.sh installs it)"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1600,1000",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(driver), options=options)


@pytest.fixture
def served(settings: SearchSettings) -> Iterator[str]:
    """``hybrid-search workbench`` itself, on a free port; its URL (with the token) as it printed it."""
    _load(settings)
    env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME")},
        "ES_URL": settings.url or "",
        "ES_INDEX": settings.index,
        "EMBEDDINGS_PROVIDER": "hashing",
        "EMBEDDINGS_DIMENSIONS": "64",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "storage.cli", "workbench", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"(http://127\.0\.0\.1:\d+/\?token=\S+)", line)
        assert m, line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        yield m.group(1)
    finally:
        proc.send_signal(2)  # Ctrl-C: a clean stop
        try:
            proc.communicate(timeout=20)  # (and its pipes closed)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise AssertionError("the workbench did not stop on Ctrl-C") from None


def test_the_page_in_a_real_browser_compares_refuses_judges_by_click_and_keyboard_exports_and_tunes(
    served: str, settings: SearchSettings
) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select, WebDriverWait

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    browser = _browser()
    wait = WebDriverWait(browser, 30)

    def ids(column: str) -> list[str]:
        return [e.get_attribute("data-id") or "" for e in browser.find_elements(By.CSS_SELECTOR, f"#{column} .hit")]

    def shot(name: str) -> None:
        browser.save_screenshot(str(SCREENSHOTS / f"{name}.png"))

    def exported_rows() -> list[str]:
        text = browser.execute_async_script(
            "const done = arguments[0]; fetch('/api/qrels.tsv').then(r => r.text()).then(done);"
        )
        return sorted(text.splitlines()[1:])

    def search_for(text: str) -> None:
        """The compare view: ``text`` typed over the query box's, searched, its fused results shown."""
        browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="compare"]').click()
        query = browser.find_element(By.ID, "query")
        query.clear()
        query.send_keys(text)
        browser.find_element(By.ID, "run").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "fused results"))

    try:
        base = served.split("/?token=")[0]
        browser.get(base + "/")
        assert "403" in browser.page_source  # no token, no page
        browser.get(served)
        wait.until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")
        shot("1-open")
        assert browser.find_element(By.ID, "filters").get_attribute("placeholder") == "ticker=…"
        groups = [o.text for o in browser.find_elements(By.CSS_SELECTOR, "#group-by option")]
        assert groups == ["—", "ticker"]
        # 1. A query: three columns, each what search() gives.
        browser.find_element(By.ID, "query").send_keys(QUERY)
        browser.find_element(By.ID, "limit").clear()
        browser.find_element(By.ID, "limit").send_keys("5")
        browser.find_element(By.ID, "run").click()
        wait.until(lambda b: len(ids("col-fused")) == 5)
        shot("2-compare")
        assert ids("col-bm25") == asyncio.run(_search(settings, mode="bm25", limit=5))
        assert ids("col-knn") == asyncio.run(_search(settings, mode="knn", limit=5))
        assert ids("col-fused") == asyncio.run(_search(settings, limit=5))
        # Six decimals, and an exact tie says what ordered it (four decimals hid both: issue 63).
        lines = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#col-fused .hit .ids")]
        scores = [re.search(r"fused (\d\.\d{6})", line) for line in lines]
        assert all(scores), lines
        for n in range(1, len(lines)):
            tied = scores[n].group(1) == scores[n - 1].group(1)  # type: ignore[union-attr]
            assert ("tie with the hit above" in lines[n]) == tied, lines
        # Markup in a document is text, never run.
        assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-pwned") is None
        assert "<img src=x" in browser.find_element(By.ID, "columns").text
        # 2. Another fusion: the fused column moves, as search() with that fusion would have it.
        Select(browser.find_element(By.ID, "method")).select_by_visible_text("rrf")
        for field, value in (("k", "60"), ("w-bm25", "1"), ("w-knn", "0.25")):
            box = browser.find_element(By.ID, field)
            box.clear()
            box.send_keys(value)
        browser.find_element(By.ID, "refuse").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "in-force"), "re-fused here"))
        shot("3-refused")
        assert ids("col-fused") == asyncio.run(_search(settings, limit=5, rrf_k=60, weights={"bm25": 1.0, "knn": 0.25}))
        # 3. Three judgments, from any column.
        judged = {}
        for column, grade in (("col-bm25", 2), ("col-knn", 1), ("col-fused", 0)):
            for hit in browser.find_elements(By.CSS_SELECTOR, f"#{column} .hit"):
                doc = hit.get_attribute("data-id") or ""
                if doc not in judged:
                    hit.find_element(By.CSS_SELECTOR, f'.grades button[data-grade="{grade}"]').click()
                    wait.until(ec.text_to_be_present_in_element((By.ID, "status"), f"judged {doc}: {grade}"))
                    judged[doc] = grade
                    break
        assert len(judged) == 3
        # The keyboard: j / k move through the fused column, a digit grades the current hit, "/" goes to the query.
        browser.find_element(By.ID, "status").click()  # (out of the fields: keys typed there are theirs)
        ActionChains(browser).send_keys("j").send_keys("j").send_keys("k").send_keys("j").perform()
        fused = ids("col-fused")
        current = browser.find_elements(By.CSS_SELECTOR, "#col-fused .hit.current")
        assert [c.get_attribute("data-id") for c in current] == [fused[1]]
        ActionChains(browser).send_keys("2").perform()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), f"judged {fused[1]}: 2"))
        judged[fused[1]] = 2
        assert current[0].find_element(By.CSS_SELECTOR, ".grades button.chosen").get_attribute("data-grade") == "2"
        ActionChains(browser).send_keys("/").perform()
        assert browser.switch_to.active_element.get_attribute("id") == "query"
        # Why a hit is where it is: each leg's rank and its RRF term, summing to the fused score shown, and
        # Elasticsearch's explanation of its BM25 score.
        first = browser.find_element(By.CSS_SELECTOR, "#col-fused .hit")
        shown = re.search(r"fused (\d\.\d{6})", first.find_element(By.CSS_SELECTOR, ".ids").text)
        first.find_element(By.CSS_SELECTOR, "button.why").click()
        wait.until(lambda b: "fused score" in first.find_element(By.CSS_SELECTOR, ".explain").text)
        explained = first.find_element(By.CSS_SELECTOR, ".explain").text
        assert shown is not None
        assert f"fused score {shown.group(1)}" in explained, explained
        assert "RRF term" in explained
        assert first.find_elements(By.CSS_SELECTOR, ".explain .explain-tree li") or "does not match" in explained
        shot("4b-explained")
        shot("4-judged")
        browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="judged"]').click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "judged-list"), QUERY))
        shot("5-judgments")
        rows = {tuple(line.split("\t")[1:]) for line in exported_rows()}
        assert rows == {(doc, str(grade)) for doc, grade in judged.items()}
        # A deleted judgment comes back with Undo, as it was (its query's id and its grade).
        before = exported_rows()
        browser.find_element(By.CSS_SELECTOR, "#judged-list p button.forget").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "judged-status"), "deleted 1 judgment"))
        assert len(exported_rows()) == len(before) - 1
        browser.find_element(By.ID, "undo").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "judged-status"), "restored 1 judgment"))
        assert exported_rows() == before
        # 4. Measure, tune on the small judged set, and apply refused without the write flag.
        browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="measure"]').click()
        box = browser.find_element(By.ID, "min-queries")
        box.clear()
        box.send_keys("1")
        browser.find_element(By.ID, "measure").click()
        wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#measure-table tbody tr")) >= 3)
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#ndcg-chart polyline"))
        # Axis titles, the best setting marked (and the one in force, or "(in force)" on the best).
        assert browser.find_element(By.ID, "chart-x-title").text.startswith("RRF k")
        assert browser.find_element(By.ID, "chart-y-title").text.startswith("nDCG@10")
        assert browser.find_elements(By.ID, "chart-best")
        chart_text = browser.find_element(By.ID, "ndcg-chart").text
        assert browser.find_elements(By.ID, "chart-in-force") or "(in force)" in chart_text
        browser.find_element(By.ID, "tune").click()
        wait.until(ec.presence_of_element_located((By.ID, "tune-decision")))
        shot("6-tuned")
        # One judged query: the decision is to keep the setting in force, and nothing is offered to apply (a
        # keep decision could be applied before: issue 63).
        assert "decision: keep" in browser.find_element(By.ID, "tune-decision").text
        assert not browser.find_element(By.ID, "apply-box").is_displayed()
        # Runs: A with the fusion in force, B with the compare view's fusion (k 60, kNN weight 0.25, set above),
        # then B against A query by query, in a table and a chart whose axes say what they show.
        for name, how in (("run-a", "in-force"), ("run-b", "form")):
            box = browser.find_element(By.ID, "run-name")
            box.clear()
            box.send_keys(name)
            Select(browser.find_element(By.ID, "run-with")).select_by_value(how)
            browser.find_element(By.ID, "run-create").click()
            wait.until(ec.text_to_be_present_in_element((By.ID, "run-status"), f"{name}: nDCG@10"))
        wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#runs-table tbody tr")) == 2)
        browser.find_element(By.ID, "runs-compare").click()
        wait.until(ec.presence_of_element_located((By.ID, "runs-summary")))
        summary = browser.find_element(By.ID, "runs-summary").text
        assert "k=60" in summary
        assert "bm25:knn=1:0.25" in summary
        assert "(in force)" in summary
        assert "over 1 queries" in summary
        assert len(browser.find_elements(By.CSS_SELECTOR, "#runs-delta-table tbody tr")) == 1
        assert browser.find_element(By.ID, "runs-chart-x-title").text.startswith("judged queries")
        assert browser.find_element(By.ID, "runs-chart-y-title").text == "nDCG@10, B − A"
        browser.execute_script("document.getElementById('runs-summary').scrollIntoView()")
        shot("6b-runs")
        # A change recommended to a read-only workbench (the tune answer scripted in the page: the server's
        # refusal is the API test's): no Apply offered, the page says how to allow it.
        browser.execute_script(
            "const real = window.fetch; window.fetch = (url, opts) => String(url).includes('/api/tune') ?"
            " Promise.resolve(new Response(JSON.stringify({decision: 'change', reason: 'significant',"
            " recommended: {method: 'rrf', k: 20}, best: {label: 'rrf k=20', ndcg: 0.5}, current: {ndcg: 0.4},"
            " cross_validated: {ndcg: 0.5, gain: 0.1, p_value: 0.01}, queries: 30, warnings: []}),"
            " {headers: {'content-type': 'application/json'}})) : real(url, opts);"
        )
        browser.find_element(By.ID, "tune").click()
        wait.until(ec.presence_of_element_located((By.ID, "apply-read-only")))
        assert not browser.find_element(By.ID, "apply-box").is_displayed()
        assert "--allow-writes" in browser.find_element(By.ID, "apply-read-only").text
        shot("7-apply-read-only")
        browser.refresh()
        wait.until(lambda b: b.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true")
        # A one-leg search: its weight alone (it read "bm25:knn=1:undefined"), its column not called fused.
        Select(browser.find_element(By.ID, "mode")).select_by_visible_text("bm25")
        browser.find_element(By.ID, "query").send_keys(QUERY)
        browser.find_element(By.ID, "run").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "bm25 results"))
        assert "undefined" not in browser.find_element(By.ID, "in-force").text
        assert browser.find_element(By.CSS_SELECTOR, "#col-fused h2").text == "bm25 alone (no fusion)"
        assert " · score " in browser.find_element(By.CSS_SELECTOR, "#col-fused .hit .ids").text
        Select(browser.find_element(By.ID, "mode")).select_by_visible_text("hybrid")
        # A judged collection imported through the page (its 0-4 grades and its ids kept): its grades are on
        # the results where they are shown.
        browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="judged"]').click()
        browser.find_element(By.CSS_SELECTOR, "#tab-judged details summary").click()
        browser.find_element(By.ID, "import-queries").send_keys(QUERIES_JSONL)
        browser.find_element(By.ID, "import-qrels").send_keys(_qrels_text(trec=True))  # (a typed tab moves focus)
        browser.find_element(By.ID, "import").click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "import-status"), "imported 6 judgments of 3 queries"))
        search_for("annual report margins")
        imported = browser.find_element(By.CSS_SELECTOR, '#col-fused .hit[data-id="aapl-2"]')
        assert imported.find_element(By.CSS_SELECTOR, ".judged-grade").text.strip() == "judged 3"
        shot("8-imported-grades")
        # A query with markup: shown as typed, not run.
        search_for('<img src=x onerror="document.body.dataset.pwned=1"> revenue')
        # ... judged under that query, and listed: still text.
        first = browser.find_element(By.CSS_SELECTOR, "#col-fused .hit")
        first.find_element(By.CSS_SELECTOR, '.grades button[data-grade="1"]').click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "status"), "judged"))
        browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="judged"]').click()
        wait.until(ec.text_to_be_present_in_element((By.ID, "judged-list"), "<img src=x"))
        # A filter with markup: refused or searched, never run.
        browser.find_element(By.CSS_SELECTOR, '.tab[data-tab="compare"]').click()
        box = browser.find_element(By.ID, "filters")
        box.clear()
        box.send_keys("ticker=<script>document.body.dataset.pwned=1</script>")
        browser.find_element(By.ID, "run").click()
        wait.until(lambda b: b.find_element(By.ID, "status").text not in ("", "searching…"))
        time.sleep(0.2)
        assert browser.find_element(By.TAG_NAME, "body").get_attribute("data-pwned") is None
    finally:
        browser.quit()
