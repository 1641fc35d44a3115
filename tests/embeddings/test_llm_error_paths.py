"""How the chat provider turns every bad answer into a typed error (scripted OpenAI-compatible server on
127.0.0.1). The real chat server is exercised in tests/integration/test_answer.py."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from embeddings import (
    Completion,
    InvalidResponse,
    LLMSettings,
    OpenAIChat,
    ProviderConfigError,
    ProviderResponseError,
    ProviderUnavailable,
    create_llm,
)

from .._scripted import ScriptedServer, chat_body, chat_chunks

KEY = "sk-chat-secret-key-456"
MESSAGES = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "Why?"}]


@pytest.fixture
async def chat(scripted_server: ScriptedServer) -> AsyncIterator[OpenAIChat]:
    llm = OpenAIChat(model="m", base_url=scripted_server.url, api_key=KEY, timeout_s=1.0)
    yield llm
    await llm.aclose()


async def _drain(llm: OpenAIChat) -> list[str | Completion]:
    return [item async for item in llm.stream(MESSAGES)]  # type: ignore[arg-type]


async def test_a_completion_carries_text_model_finish_and_usage(
    chat: OpenAIChat, scripted_server: ScriptedServer
) -> None:
    scripted_server.script(200, chat_body("It rains [#a].", model="served-name"))
    done = await chat.complete(MESSAGES)  # type: ignore[arg-type]
    assert done.text == "It rains [#a]."
    assert (done.model, done.finish_reason) == ("served-name", "stop")
    assert (done.usage.prompt_tokens, done.usage.completion_tokens, done.usage.total_tokens) == (11, 7, 18)
    sent = scripted_server.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"]["temperature"] == 0.0
    assert sent["body"]["max_tokens"] == 512
    assert sent["body"]["messages"] == MESSAGES


async def test_a_stream_yields_deltas_then_one_completion(chat: OpenAIChat, scripted_server: ScriptedServer) -> None:
    scripted_server.script_stream(chat_chunks(["It ", "rains ", "[#a]."]))
    items = await _drain(chat)
    assert items[:-1] == ["It ", "rains ", "[#a]."]
    assert isinstance(items[-1], Completion)
    assert items[-1].text == "It rains [#a]."
    assert scripted_server.requests[0]["body"]["stream"] is True


async def test_429_is_one_request_with_retry_after(chat: OpenAIChat, scripted_server: ScriptedServer) -> None:
    scripted_server.script(429, {"error": {"message": "slow down"}}, {"retry-after": "3"})
    with pytest.raises(ProviderResponseError) as info:
        await chat.complete(MESSAGES)  # type: ignore[arg-type]
    assert (info.value.status, info.value.retry_after, info.value.transient) == (429, 3.0, True)
    assert len(scripted_server.requests) == 1  # the SDK's own retries are off


@pytest.mark.parametrize(
    ("status", "body", "error", "match"),
    [
        (500, {"error": {"message": "boom"}}, ProviderResponseError, "HTTP 500"),
        (400, {"error": {"message": "context too long"}}, ProviderResponseError, "HTTP 400"),
        (200, b"<html><body>502 proxy error</body></html>", InvalidResponse, "malformed|no choices"),
        (200, {"choices": []}, InvalidResponse, "no choices"),
        (200, chat_body(None), InvalidResponse, "no text"),
    ],
    ids=["500", "400", "html", "empty-choices", "no-content"],
)
async def test_bad_answers_are_typed_errors_without_secrets(
    chat: OpenAIChat, scripted_server: ScriptedServer, status: int, body: object, error: type[Exception], match: str
) -> None:
    scripted_server.script(status, body)
    with pytest.raises(error, match=match) as info:
        await chat.complete(MESSAGES)  # type: ignore[arg-type]
    assert KEY not in str(info.value)
    assert KEY not in repr(chat)
    assert (status >= 500) == getattr(info.value, "transient", False)


async def test_a_stream_cut_mid_answer_is_unavailable_not_an_answer(
    chat: OpenAIChat, scripted_server: ScriptedServer
) -> None:
    events = chat_chunks(["It ", "rains ", "a lot."])
    scripted_server.script_stream(events, cut=400)
    seen: list[str | Completion] = []

    async def consume() -> None:
        async for item in chat.stream(MESSAGES):  # type: ignore[arg-type]
            seen.append(item)

    with pytest.raises(ProviderUnavailable):
        await consume()
    assert not any(isinstance(i, Completion) for i in seen)


async def test_a_stream_that_ends_without_a_finish_is_a_bad_response(
    chat: OpenAIChat, scripted_server: ScriptedServer
) -> None:
    scripted_server.script_stream(chat_chunks(["It ", "rains"], finish=None))
    with pytest.raises(InvalidResponse, match="without a finish"):
        await _drain(chat)


async def test_an_error_status_on_a_stream_is_typed(chat: OpenAIChat, scripted_server: ScriptedServer) -> None:
    scripted_server.script(503, {"error": {"message": "loading model"}}, {"retry-after": "1"})
    with pytest.raises(ProviderResponseError) as info:
        await _drain(chat)
    assert (info.value.status, info.value.retry_after) == (503, 1.0)


async def test_refused_and_timeout_are_unavailable() -> None:
    refused = OpenAIChat(model="m", base_url="http://127.0.0.1:9/v1", timeout_s=1)
    with pytest.raises(ProviderUnavailable, match="refused the connection") as info:
        await refused.complete(MESSAGES)  # type: ignore[arg-type]
    assert info.value.kind == "refused"
    await refused.aclose()


async def test_a_slow_server_times_out(scripted_server: ScriptedServer) -> None:
    def slow(_: dict[str, object]) -> tuple[int, dict[str, str], bytes]:
        time.sleep(1.0)
        return 200, {"content-type": "application/json"}, b"{}"

    scripted_server.default = slow
    llm = OpenAIChat(model="m", base_url=scripted_server.url, timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(ProviderUnavailable, match="timed out"):
        await llm.complete(MESSAGES)  # type: ignore[arg-type]
    assert time.monotonic() - started < 0.9
    await llm.aclose()


def test_settings_build_the_provider_and_refuse_incomplete_ones() -> None:
    assert create_llm(LLMSettings()) is None  # off by default
    with pytest.raises(ProviderConfigError, match="LLM_MODEL"):
        create_llm(LLMSettings(provider="openai"))
    with pytest.raises(ProviderConfigError, match="API_KEY"):
        OpenAIChat(model="gpt-4o-mini")  # the OpenAI API itself needs a key
    with pytest.raises(ProviderConfigError, match="context_tokens"):
        OpenAIChat(model="m", base_url="http://127.0.0.1:1/v1", context_tokens=100, max_tokens=200)
    llm = create_llm(LLMSettings(provider="openai", model="m", base_url="http://127.0.0.1:1/v1", api_key=KEY))
    assert isinstance(llm, OpenAIChat)
    assert KEY not in repr(llm)
    assert llm.model_id == "openai-chat:m"
