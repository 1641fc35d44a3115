"""Chat models behind a small protocol: the ``LLM`` that answers questions from retrieved entries.

Knows nothing of Elasticsearch or of retrieval: it takes chat messages and returns text. One provider:
:class:`OpenAIChat`, the OpenAI chat-completions API through the official ``openai`` client, which any
OpenAI-compatible server speaks (vLLM, Ollama, LM Studio, llama.cpp's server, gateways) via ``base_url``.

Every failure is one of the provider errors (``embeddings._errors``): no answer → ``ProviderUnavailable``
(its ``kind``: refused, timeout, disconnected — the server crashed mid-request — or unreachable), an error
status → ``ProviderResponseError`` (``.status``, ``.retry_after``), an answer that is not a usable completion
(HTML, no choices, no text, a stream that ends without a finish) → ``InvalidResponse``. The client never
retries by itself (``max_retries=0``): retrying is the caller's resilience policy, so one failure is one
request. The key is a ``SecretStr`` and never appears in ``repr``, errors or logs.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

import openai
from pydantic import SecretStr

from ._errors import (
    ContextTooLong,
    InvalidResponse,
    ProviderConfigError,
    ProviderResponseError,
    retry_after,
    unavailable,
)

__all__ = ["LLM", "ChatMessage", "Completion", "OpenAIChat", "Usage"]

#: A local CPU model needs seconds to a minute for a RAG answer; hosted ones answer in a few seconds.
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_MAX_TOKENS = 512


class ChatMessage(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the server reported them (None when it did not)."""

    prompt_tokens: int | None = None
    completion_tokens: int | None = None

    @property
    def total_tokens(self) -> int | None:
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Completion:
    """One finished answer: its text, the model that wrote it (as the server names it), why it stopped
    (``stop``, ``length``...) and the token usage."""

    text: str
    model: str
    finish_reason: str | None
    usage: Usage


@runtime_checkable
class LLM(Protocol):
    """What ``storage`` needs from a chat model."""

    @property
    def model_id(self) -> str:
        """Identifies the model and backend (logged with every answer)."""
        ...

    async def complete(self, messages: Sequence[ChatMessage]) -> Completion:
        """The whole answer at once."""
        ...

    def stream(self, messages: Sequence[ChatMessage]) -> AsyncIterator[str | Completion]:
        """Text deltas as they come, then exactly one :class:`Completion` (the whole text, usage)."""
        ...

    async def aclose(self) -> None: ...


def _usage(raw: Any) -> Usage:
    if raw is None:
        return Usage()
    prompt, completion = getattr(raw, "prompt_tokens", None), getattr(raw, "completion_tokens", None)
    return Usage(
        prompt_tokens=prompt if isinstance(prompt, int) else None,
        completion_tokens=completion if isinstance(completion, int) else None,
    )


def _is_transport_error(exc: Exception) -> bool:
    """An HTTP transport's own error (httpx, or httpx2 under ``openai`` 3.x) escaping the SDK mid-stream."""
    return type(exc).__module__.split(".")[0] in ("httpx", "httpx2", "httpcore", "h11")


#: How OpenAI-compatible servers say a prompt is over the window (OpenAI, vLLM, llama.cpp, Ollama, gateways).
_CONTEXT_MARKS = (
    "context length",
    "context_length",
    "context size",
    "context window",
    "maximum context",
    "too many tokens",
    "prompt is too long",
)


def _provider_error(exc: Exception, where: str | None) -> Exception:
    """The ``openai`` (or transport) error as one of ours (the caller raises it ``from`` the original):
    ``where`` is the server's address, for the message."""
    if isinstance(exc, openai.APIConnectionError) or _is_transport_error(exc):  # (APITimeoutError included)
        return unavailable("chat model", exc, where)
    if isinstance(exc, openai.APIStatusError):
        said = str(getattr(exc, "message", "") or "").lower()
        if exc.status_code in (400, 413) and any(mark in said for mark in _CONTEXT_MARKS):
            return ContextTooLong(
                f"chat model answered HTTP {exc.status_code}: the prompt does not fit its context window",
                status=exc.status_code,
            )
        return ProviderResponseError(
            f"chat model answered HTTP {exc.status_code}",
            status=exc.status_code,
            retry_after=retry_after(exc.response.headers),
        )
    return InvalidResponse(f"malformed chat completion: {type(exc).__name__}")


class OpenAIChat:
    """A chat model over the OpenAI chat-completions API (or any server that speaks it).

    ``temperature`` 0 by default: the same question over the same entries gives the same answer (as far
    as the server is deterministic). ``max_tokens`` bounds the answer; ``timeout_s`` each request (the
    SDK's default, 600 s, is far past any caller's patience). ``context_tokens``, when known, is the
    model's context window: the answer stage keeps the prompt inside it.
    """

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None = None,
        api_key: SecretStr | str | None = None,
        temperature: float = 0.0,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        context_tokens: int | None = None,
    ) -> None:
        if not model:
            raise ProviderConfigError("the chat model needs a model name (LLM_MODEL)")
        if max_tokens < 1 or timeout_s <= 0 or not 0 <= temperature <= 2:
            raise ProviderConfigError("max_tokens must be >= 1, timeout_s > 0 and temperature in [0, 2]")
        if context_tokens is not None and context_tokens <= max_tokens:
            raise ProviderConfigError(f"context_tokens ({context_tokens}) must be larger than max_tokens")
        key = api_key.get_secret_value() if isinstance(api_key, SecretStr) else api_key
        if not key:
            if base_url is None:
                raise ProviderConfigError("OPENAI_API_KEY (or LLM_API_KEY) is required for the OpenAI API")
            key = "unused"  # local OpenAI-compatible servers usually take any key
        self._model = model
        self._base_url = base_url
        self._where = base_url or "api.openai.com"
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.context_tokens = context_tokens
        self._client = openai.AsyncOpenAI(api_key=key, base_url=base_url, timeout=timeout_s, max_retries=0)

    @property
    def model_id(self) -> str:
        return f"openai-chat:{self._model}"

    def __repr__(self) -> str:  # no key, ever
        return f"OpenAIChat(model={self._model!r}, base_url={self._base_url!r})"

    def _request(self, messages: Sequence[ChatMessage]) -> dict[str, Any]:
        return {
            "model": self._model,
            "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }

    async def complete(self, messages: Sequence[ChatMessage]) -> Completion:
        try:
            response = await self._client.chat.completions.create(**self._request(messages))
        except Exception as exc:  # the SDK's errors, its transport's, or an undecodable body
            raise _provider_error(exc, self._where) from exc
        choices = getattr(response, "choices", None)
        if not isinstance(choices, list) or not choices:
            raise InvalidResponse("chat completion has no choices")
        message = getattr(choices[0], "message", None)
        text = getattr(message, "content", None)
        if not isinstance(text, str):
            raise InvalidResponse("chat completion has no text content")
        return Completion(
            text=text,
            model=str(getattr(response, "model", None) or self._model),
            finish_reason=getattr(choices[0], "finish_reason", None),
            usage=_usage(getattr(response, "usage", None)),
        )

    async def stream(self, messages: Sequence[ChatMessage]) -> AsyncIterator[str | Completion]:
        """Deltas, then one :class:`Completion`. A stream that stops before a ``finish_reason`` (the server
        or the connection died mid-answer) is an :class:`InvalidResponse` (or ``ProviderUnavailable``):
        the text so far is not an answer."""
        parts: list[str] = []
        model, finish, usage = self._model, None, Usage()
        try:
            chunks = await self._client.chat.completions.create(
                **self._request(messages), stream=True, stream_options={"include_usage": True}
            )
            async with contextlib.aclosing(chunks) as stream:
                async for chunk in stream:
                    model = str(getattr(chunk, "model", None) or model)
                    if getattr(chunk, "usage", None) is not None:
                        usage = _usage(chunk.usage)
                    for choice in getattr(chunk, "choices", None) or ():
                        delta = getattr(getattr(choice, "delta", None), "content", None)
                        if isinstance(delta, str) and delta:
                            parts.append(delta)
                            yield delta
                        if getattr(choice, "finish_reason", None):
                            finish = choice.finish_reason
        except Exception as exc:  # the SDK's errors, its transport's (a connection lost mid-stream), bad JSON
            raise _provider_error(exc, self._where) from exc
        if finish is None:
            raise InvalidResponse(f"chat stream ended without a finish reason after {len(parts)} deltas")
        yield Completion(text="".join(parts), model=model, finish_reason=finish, usage=usage)

    async def aclose(self) -> None:
        await self._client.close()
