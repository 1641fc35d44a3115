"""Answers with citations against the real Elasticsearch, from a scripted OpenAI-compatible server on 127.0.0.1
that plays every case and failure (the real local chat server proves the feature end to end in
test_answer_real_chat_server.py)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import aclosing
from pathlib import Path

import pytest
from elasticsearch import AsyncElasticsearch

from embeddings import HashingEmbedder, OpenAIChat
from storage import Answer, ConfigurationError, DependencyError, Document, InvalidQuery, SearchClient, SearchSettings
from storage.types import AnswerDelta, AnswerDone, ResiliencePolicy

from .._scripted import ScriptedServer, chat_body, chat_chunks

KEY = "sk-llm-never-logged-789"

DOCS = [
    Document(
        id="aapl-guidance",
        title="Apple trims revenue guidance",
        text="Apple lowered its revenue outlook for the quarter because iPhone demand in China was weak.",
        ticker="AAPL",
        source="reuters",
    ),
    Document(
        id="msft-cloud",
        title="Microsoft cloud sales accelerate",
        text="Azure revenue grew thirty percent as enterprises moved workloads to the cloud.",
        ticker="MSFT",
        source="bloomberg",
    ),
    Document(
        id="tsla-deliveries",
        title="Tesla deliveries miss estimates",
        text="The carmaker delivered fewer vehicles than analysts expected and warned of slower growth.",
        ticker="TSLA",
    ),
    *[Document(id=f"filler-{i}", text=f"quarterly revenue note number {i} " * 20, ticker="ZZZ") for i in range(8)],
]


async def _indexed(client: SearchClient) -> SearchClient:
    await client.ensure_index()
    assert (await client.index_documents(DOCS, refresh=True)).ok
    return client


def _scripted_client(settings: SearchSettings, server: ScriptedServer, **policy: float) -> SearchClient:
    llm = OpenAIChat(model="m", base_url=server.url, api_key=KEY, timeout_s=2.0)
    fast = ResiliencePolicy(
        attempts=3, backoff_initial_s=0.01, backoff_max_s=0.05, deadline_s=10, attempt_timeout_s=5, **policy
    )
    return SearchClient(
        AsyncElasticsearch(settings.url),
        HashingEmbedder(dimensions=64),
        settings,
        owns_clients=True,
        llm=llm,
        policies={"llm": fast},
    )


@pytest.fixture
async def scripted(settings: SearchSettings, scripted_server: ScriptedServer) -> AsyncIterator[SearchClient]:
    async with _scripted_client(settings, scripted_server) as c:
        yield await _indexed(c)


async def test_a_streamed_answer_comes_in_deltas_then_one_whole_answer(
    scripted: SearchClient, scripted_server: ScriptedServer
) -> None:
    question = "How fast did Azure revenue grow?"
    parts = ["Azure ", "revenue ", "grew ", "thirty ", "percent ", "[#msft-cloud]."]
    scripted_server.script_stream(chat_chunks(parts))
    events = [e async for e in scripted.answer_stream(question, limit=3)]
    deltas = [e.text for e in events if isinstance(e, AnswerDelta)]
    assert deltas == parts
    assert isinstance(events[-1], AnswerDone)
    assert sum(isinstance(e, AnswerDone) for e in events) == 1
    done = events[-1].answer
    assert done.answer == "".join(deltas).strip()
    assert done.citations == ["msft-cloud"]
    assert done.timings.first_token_ms is not None
    assert done.timings.llm_ms is not None
    assert done.timings.first_token_ms <= done.timings.llm_ms
    assert done.finish_reason == "stop"
    assert scripted_server.requests[0]["body"]["stream"] is True


def test_the_cli_streams_an_answer_and_lists_its_sources_or_says_it_cites_none(
    settings: SearchSettings, scripted_server: ScriptedServer
) -> None:
    def reply(payload: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
        text = "Weak iPhone demand [#aapl-guidance]." if "Apple" in json.dumps(payload) else "Not in the entries."
        if payload.get("stream"):
            events = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in chat_chunks([text]))
            return 200, {"content-type": "text/event-stream"}, events.encode()
        return 200, {"content-type": "application/json"}, json.dumps(chat_body(text, model="served-name")).encode()

    scripted_server.default = reply
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "ES_URL": settings.url or "",
        "ES_INDEX": settings.index,
        "EMBEDDINGS_PROVIDER": "hashing",
        "EMBEDDINGS_DIMENSIONS": "64",
        "LLM_PROVIDER": "openai",
        "LLM_BASE_URL": scripted_server.url,
        "LLM_MODEL": "scripted",
        "LLM_MAX_TOKENS": "64",
    }
    exe = str(Path(sys.executable).parent / "hybrid-search")
    corpus = Path(os.environ.get("TMPDIR", "/tmp")) / f"{settings.index}.jsonl"
    corpus.write_text("\n".join(d.model_dump_json() for d in DOCS) + "\n")
    try:
        ingest = subprocess.run([exe, "ingest", str(corpus)], env=env, capture_output=True, text=True, timeout=120)
        assert ingest.returncode == 0, ingest.stderr
        done = subprocess.run(
            [exe, "ask", "Why did Apple lower its revenue outlook?", "--limit", "3"],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert done.returncode == 0, done.stderr
        assert "\nsources:" in done.stdout  # the one it cited, never a list it did not cite
        assert "[#aapl-guidance]" in done.stdout
        assert "scripted" in done.stdout
        as_json = subprocess.run(
            [exe, "ask", "What happened to Tesla deliveries?", "--json", "--limit", "3"],
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert as_json.returncode == 0, as_json.stderr
        parsed = Answer.model_validate_json(as_json.stdout)
        assert parsed.entries[0].id == "tsla-deliveries"
    finally:
        corpus.unlink(missing_ok=True)


# -- the pipeline's rules, over the scripted server ----------------------------------------------------


async def test_invented_citations_are_reported_and_never_sources(
    scripted: SearchClient, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(200, chat_body("Weak iPhone demand [#aapl-guidance], says [#nature-2021]."))
    answer = await scripted.answer("Why did Apple lower its revenue outlook?", limit=3)
    assert answer.citations[0] == "aapl-guidance"
    assert answer.invented_citations == ["nature-2021"]
    assert "nature-2021" not in [s.id for s in answer.sources]
    assert "#nature-2021, not in the context: dropped" in answer.reasoning
    sent = scripted_server.requests[0]["body"]["messages"]
    assert "ENTRY #aapl-guidance" in sent[1]["content"]
    assert "Why did Apple lower its revenue outlook?" in sent[1]["content"]


async def test_an_answer_without_citations_cites_every_entry(
    scripted: SearchClient, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(200, chat_body("Because demand was weak."))
    answer = await scripted.answer("Why did Apple lower its revenue outlook?", limit=3)
    assert answer.citations_fallback
    assert answer.citations == [e.id for e in answer.entries]
    scripted_server.script(200, chat_body("The entries do not contain the answer."))
    unknown = await scripted.answer("Who won the 1998 world cup?", limit=3)
    assert unknown.status == "not_in_entries"
    assert unknown.citations == []


async def test_nothing_found_means_no_chat_call(scripted: SearchClient, scripted_server: ScriptedServer) -> None:
    answer = await scripted.answer("revenue", filters={"ticker": "NOPE"})
    assert answer.status == "nothing_found"
    assert answer.answer
    assert "nothing" in answer.answer.lower()
    assert answer.timings.llm_ms is None
    assert scripted_server.requests == []
    events = [e async for e in scripted.answer_stream("revenue", filters={"ticker": "NOPE"})]
    assert len(events) == 1
    assert isinstance(events[0], AnswerDone)
    assert scripted_server.requests == []


async def test_the_context_budget_and_the_filters_hold(scripted: SearchClient, scripted_server: ScriptedServer) -> None:
    scripted_server.script(200, chat_body("Notes [#filler-1]."))
    answer = await scripted.answer("quarterly revenue note", filters={"ticker": "ZZZ"}, limit=8, max_context_chars=900)
    assert answer.context_chars <= 900
    assert answer.context_truncated
    assert all(e.id.startswith("filler-") for e in answer.entries)
    assert len(scripted_server.requests[0]["body"]["messages"][1]["content"]) < 900 + 200


async def test_a_missing_chat_model_is_a_configuration_error_before_any_search(settings: SearchSettings) -> None:
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64)) as client:
        with pytest.raises(ConfigurationError, match="LLM_PROVIDER"):
            await client.answer("anything")


async def test_429_with_retry_after_is_retried_then_answered(
    scripted: SearchClient, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(429, {"error": {"message": "slow down"}}, {"retry-after": "0.5"})
    scripted_server.script(200, chat_body("Weak demand [#aapl-guidance]."))
    started = time.monotonic()
    answer = await scripted.answer("Why did Apple lower its revenue outlook?", limit=3)
    assert time.monotonic() - started >= 0.5  # Retry-After honoured
    assert answer.status == "answered"
    assert answer.citations == ["aapl-guidance"]
    assert len(scripted_server.requests) == 2


@pytest.mark.parametrize(
    ("answers", "reason"),
    [
        ([(500, {"error": {"message": "boom"}})] * 3, "llm_error"),
        ([(200, b"<html><body>Bad gateway</body></html>")], "llm_bad_response"),
        ([(200, {"choices": []})], "llm_bad_response"),
        ([(200, chat_body("   "))], "llm_bad_response"),
        ([(429, {"error": {"message": "quota"}})] * 3, "llm_rate_limited"),
    ],
    ids=["500", "html", "empty-choices", "blank-text", "429-exhausted"],
)
async def test_a_failing_model_degrades_to_the_entries_without_an_answer(
    scripted: SearchClient,
    scripted_server: ScriptedServer,
    answers: list[tuple[int, object]],
    reason: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for status, body in answers:
        scripted_server.script(status, body)
    with caplog.at_level(logging.INFO, logger="storage"):
        answer = await scripted.answer("Why did Apple lower its revenue outlook?", limit=3)
    assert answer.status == "llm_failed"
    assert answer.answer is None
    assert answer.degraded
    assert answer.degradation.reason == reason
    assert answer.entries[0].id == "aapl-guidance"
    assert answer.citations == []
    assert KEY not in (answer.error or "")
    assert KEY not in caplog.text
    assert "the entries are returned without an answer" in answer.reasoning


async def test_strict_raises_the_typed_error(scripted: SearchClient, scripted_server: ScriptedServer) -> None:
    scripted_server.script(400, {"error": {"message": "context too long"}})
    with pytest.raises(DependencyError) as info:
        await scripted.answer("Why did Apple lower its revenue outlook?", strict=True)
    assert info.value.dependency == "llm"
    assert info.value.status == 400
    assert len(scripted_server.requests) == 1  # a 400 is not retried


async def test_a_slow_model_times_out_within_the_deadline(
    scripted: SearchClient, scripted_server: ScriptedServer
) -> None:
    def slow(_: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
        time.sleep(3)
        return 200, {"content-type": "application/json"}, json.dumps(chat_body("late")).encode()

    scripted_server.default = slow
    started = time.monotonic()
    answer = await scripted.answer("Why did Apple lower its revenue outlook?", timeout_s=1.0)
    assert time.monotonic() - started < 2.0
    assert answer.degradation.reason == "llm_timeout"
    assert answer.entries


async def test_a_refused_model_is_unavailable_and_the_breaker_opens(settings: SearchSettings) -> None:
    llm = OpenAIChat(model="m", base_url="http://127.0.0.1:9/v1", timeout_s=1)
    policy = ResiliencePolicy(attempts=1, fail_max=2, reset_timeout_s=60)
    es = AsyncElasticsearch(settings.url)
    async with SearchClient(
        es, HashingEmbedder(dimensions=64), settings, owns_clients=True, llm=llm, policies={"llm": policy}
    ) as client:
        await _indexed(client)
        first = await client.answer("Apple revenue outlook")
        assert first.degradation.reason == "llm_unavailable"
        await client.answer("Apple revenue outlook")
        third = await client.answer("Apple revenue outlook")
        assert third.degradation.reason == "llm_circuit_open"
        assert client.breakers["llm"].state == "open"
        assert client.breakers["elasticsearch"].state == "closed"  # one breaker never blocks another


async def test_a_stream_cut_mid_answer_ends_with_a_degraded_final_event(
    scripted: SearchClient, scripted_server: ScriptedServer
) -> None:
    scripted_server.script_stream(chat_chunks(["Weak ", "iPhone ", "demand ", "[#aapl-guidance]."]), cut=500)
    async with aclosing(scripted.answer_stream("Why did Apple lower its revenue outlook?", limit=3)) as stream:
        events = [e async for e in stream]
    assert isinstance(events[-1], AnswerDone)
    final = events[-1].answer
    assert final.answer is None
    assert final.degradation.reason in ("llm_disconnected", "llm_bad_response")  # (the server died mid-answer)
    assert final.entries


async def test_a_streamed_answer_checks_citations_like_a_whole_one(
    scripted: SearchClient, scripted_server: ScriptedServer
) -> None:
    scripted_server.script_stream(chat_chunks(["Weak demand ", "[#aapl-guidance] ", "[#made-up]."]))
    events = [e async for e in scripted.answer_stream("Why did Apple lower its revenue outlook?", limit=3)]
    final = events[-1]
    assert isinstance(final, AnswerDone)
    assert final.answer.citations == ["aapl-guidance"]
    assert final.answer.invented_citations == ["made-up"]
    assert final.answer.answer == "Weak demand [#aapl-guidance] [#made-up]."


async def test_an_answer_sees_only_its_tenants_documents(
    settings: SearchSettings, scripted_server: ScriptedServer
) -> None:
    tenanted = settings.model_copy(update={"multi_tenant": True})
    async with _scripted_client(tenanted, scripted_server) as client:
        await client.ensure_index()
        assert (await client.index_documents(DOCS[:1], tenant_id="acme", refresh=True)).ok
        other = Document(id="globex-guidance", title="Apple guidance notes", text="Apple lowered its revenue outlook.")
        assert (await client.index_documents([other], tenant_id="globex", refresh=True)).ok
        scripted_server.default = lambda _: (
            200,
            {"content-type": "application/json"},
            json.dumps(chat_body("x")).encode(),
        )
        answer = await client.answer("Why did Apple lower its revenue outlook?", tenant_id="acme")
        assert [e.id for e in answer.entries] == ["aapl-guidance"]
        assert "globex" not in scripted_server.requests[0]["body"]["messages"][1]["content"]
        with pytest.raises(InvalidQuery, match="tenant"):
            await client.answer("Why did Apple lower its revenue outlook?")  # a multi-tenant client needs one
        assert len(scripted_server.requests) == 1
