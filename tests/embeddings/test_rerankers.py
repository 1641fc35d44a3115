"""Rerankers over real HTTP (a rerank server on 127.0.0.1 speaking the Cohere and TEI JSON) and a
cross-encoder run in-process from a model directory the test builds (random weights: the code path, not
quality)."""

from __future__ import annotations

import math
import socket
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from embeddings import (
    CrossEncoderReranker,
    HttpReranker,
    InvalidResponse,
    ProviderConfigError,
    ProviderResponseError,
    ProviderUnavailable,
    Reranker,
    RerankerSettings,
    create_reranker,
    validate_scores,
)

from .._rerank_server import RerankServer, bm25_scores
from .._scripted import _free_port
from .._tiny_cross_encoder import build

QUERY = "apple revenue guidance"
DOCS = [
    "Spring weather: rain and mild temperatures.",
    "Apple cut its revenue guidance for the quarter.",
    "Microsoft cloud revenue grew.",
]


@pytest.mark.parametrize("api", ["cohere-v2", "cohere-v1", "tei"])
async def test_http_reranker_returns_one_score_per_document_in_input_order(
    rerank_server: RerankServer, api: str
) -> None:
    reranker = HttpReranker(rerank_server.url, api=api, model="rerank-test", api_key="k-123")  # type: ignore[arg-type]
    try:
        assert isinstance(reranker, Reranker)
        scores = await reranker.rerank(QUERY, DOCS)
        with pytest.raises(TypeError, match="documents must be a sequence of strings, not one string"):
            await reranker.rerank(QUERY, DOCS[0])
    finally:
        await reranker.aclose()
    assert scores == pytest.approx(bm25_scores(QUERY, DOCS))
    assert max(range(3), key=lambda i: scores[i]) == 1
    (request,) = rerank_server.requests
    assert request["path"] == {"cohere-v2": "/v2/rerank", "cohere-v1": "/v1/rerank", "tei": "/rerank"}[api]
    assert request["auth"] == "Bearer k-123"
    if api == "tei":
        assert request["body"] == {"query": QUERY, "texts": DOCS, "truncate": True}
    else:
        assert request["body"] == {"model": "rerank-test", "query": QUERY, "documents": DOCS, "top_n": 3}


async def test_documents_are_sent_in_chunks_and_cut_to_the_server_limit(rerank_server: RerankServer) -> None:
    docs = [f"apple note {i} " + "revenue " * i for i in range(7)]
    reranker = HttpReranker(rerank_server.url, api="tei", max_documents_per_request=3, max_document_chars=30)
    try:
        scores = await reranker.rerank("revenue", docs)
    finally:
        await reranker.aclose()
    assert len(rerank_server.requests) == 3
    assert [len(r["body"]["texts"]) for r in sorted(rerank_server.requests, key=lambda r: r["body"]["texts"][0])] == [
        3,
        3,
        1,
    ]
    assert all(len(t) <= 30 for r in rerank_server.requests for t in r["body"]["texts"])
    # Each chunk is scored by the server on its own; the scores come back in input order.
    cut = [d[:30] for d in docs]
    expected = bm25_scores("revenue", cut[:3]) + bm25_scores("revenue", cut[3:6]) + bm25_scores("revenue", cut[6:])
    assert scores == pytest.approx(expected)


def _nan(answer: Any) -> Any:
    answer["results"][0]["relevance_score"] = math.nan
    return answer


def _missing(answer: Any) -> Any:
    answer["results"] = answer["results"][:-1]
    return answer


def _out_of_range(answer: Any) -> Any:
    answer["results"][0]["index"] = 99
    return answer


@pytest.mark.parametrize(
    ("script", "error", "match"),
    [
        (lambda s: s.fail(429, {"message": "slow down"}, {"retry-after": "7"}), ProviderResponseError, "429"),
        (lambda s: s.fail(500, {"message": "boom"}), ProviderResponseError, "500"),
        (lambda s: s.fail(200, b"<html>login</html>", {"content-type": "text/html"}), InvalidResponse, "not JSON"),
        (lambda s: s.fail(200, {"unexpected": True}), InvalidResponse, "no list of results"),
        (lambda s: s.garble(_missing), InvalidResponse, "scores 2 of 3"),
        (lambda s: s.garble(_nan), InvalidResponse, "NaN"),
        (lambda s: s.garble(_out_of_range), InvalidResponse, "index 99"),
    ],
    ids=["429", "500", "html", "wrong-shape", "wrong-count", "nan", "index-out-of-range"],
)
async def test_http_reranker_error_answers_are_typed(
    rerank_server: RerankServer, script: Any, error: type[Exception], match: str
) -> None:
    script(rerank_server)
    reranker = HttpReranker(rerank_server.url, api="cohere-v2", model="m")
    try:
        with pytest.raises(error, match=match) as info:
            await reranker.rerank(QUERY, DOCS)
    finally:
        await reranker.aclose()
    if isinstance(info.value, ProviderResponseError) and info.value.status == 429:
        assert info.value.retry_after == 7
        assert info.value.transient


async def test_http_reranker_timeout_and_refused_connection_are_unavailable(rerank_server: RerankServer) -> None:
    rerank_server.delay_s = 2.0
    slow = HttpReranker(rerank_server.url, api="tei", timeout_s=0.3)
    started = time.perf_counter()
    try:
        with pytest.raises(ProviderUnavailable, match="timed out"):
            await slow.rerank(QUERY, DOCS)
    finally:
        await slow.aclose()
    assert time.perf_counter() - started < 1.5
    port = _free_port()
    with socket.socket() as s:  # nothing listens on this port
        s.bind(("127.0.0.1", port))
        refused = HttpReranker(f"http://127.0.0.1:{port}", api="tei")
        try:
            with pytest.raises(ProviderUnavailable, match="refused the connection") as info:
                await refused.rerank(QUERY, DOCS)
            assert info.value.kind == "refused"
        finally:
            await refused.aclose()


def test_validate_scores_rejects_what_a_caller_cannot_use() -> None:
    assert validate_scores([(1, 0.5), (0, 2)], count=2) == [2.0, 0.5]
    for pairs, match in [
        ([(0, 1.0), (0, 2.0)], "twice"),
        ([(True, 1.0), (1, 1.0)], "non-integer"),
        ([(0, "high"), (1, 1.0)], "non-numeric"),
        ([(0, float("inf")), (1, 1.0)], "NaN or infinite"),
        ([(0, 1.0)], "scores 1 of 2"),
    ]:
        with pytest.raises(InvalidResponse, match=match):
            validate_scores(pairs, count=2)


def test_http_reranker_settings_are_checked_at_construction() -> None:
    with pytest.raises(ProviderConfigError, match="needs a model"):
        HttpReranker("http://127.0.0.1:1", api="cohere-v2")
    with pytest.raises(ProviderConfigError, match="http"):
        HttpReranker("127.0.0.1:1", api="tei")
    with pytest.raises(ProviderConfigError, match="RERANKER_URL"):
        create_reranker(RerankerSettings(provider="http"))
    with pytest.raises(ProviderConfigError, match="RERANKER_MODEL_DIR"):
        create_reranker(RerankerSettings(provider="cross-encoder"))
    assert create_reranker(RerankerSettings()) is None
    key = "very-secret-key"
    reranker = create_reranker(RerankerSettings(provider="http", url="http://127.0.0.1:1", api="tei", api_key=key))
    assert isinstance(reranker, HttpReranker)
    assert key not in repr(reranker)


@pytest.mark.parametrize("two_class", [False, True], ids=["logit", "two-class"])
async def test_cross_encoder_from_a_model_directory_scores_pairs(tmp_path: Path, two_class: bool) -> None:
    model_dir = build(tmp_path / "tiny", two_class=two_class)
    reranker = CrossEncoderReranker(model_dir, batch_size=2)
    try:
        scores = await reranker.rerank(QUERY, DOCS)
        again = await reranker.rerank(QUERY, list(reversed(DOCS)))
        assert await reranker.rerank(QUERY, []) == []
    finally:
        await reranker.aclose()
    assert len(scores) == 3
    assert all(math.isfinite(s) for s in scores)
    assert len(set(scores)) == 3  # the pairs differ, so do their scores
    assert again == pytest.approx(list(reversed(scores)), abs=1e-6)  # a pair's score does not depend on batching
    assert reranker.model_id == "cross-encoder:tiny"
    # The query is part of the input: another query scores the same documents differently.
    other = CrossEncoderReranker(model_dir)
    try:
        assert not np.allclose(await other.rerank("weather rain", DOCS), scores)
    finally:
        await other.aclose()


async def test_cross_encoder_with_a_bad_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ProviderConfigError, match="does not exist"):
        await CrossEncoderReranker(tmp_path / "nope").load()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ProviderConfigError, match=r"tokenizer\.json"):
        await CrossEncoderReranker(tmp_path / "empty").load()
    build(tmp_path / "broken")
    (tmp_path / "broken" / "model.onnx").write_bytes(b"not a model")
    with pytest.raises(ProviderConfigError, match="cannot load"):
        await CrossEncoderReranker(tmp_path / "broken").load()
