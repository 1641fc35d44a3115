"""The answer's prompt: what the chat model is told, around the context and the question. Pure."""

from __future__ import annotations

import re
from dataclasses import dataclass

from embeddings import ChatMessage

from .._errors import ConfigurationError

__all__ = ["DEFAULT_NO_ANSWER", "DEFAULT_SYSTEM_PROMPT", "DEFAULT_USER_PROMPT", "AnswerPrompt"]

DEFAULT_NO_ANSWER = "The entries do not contain the answer."

#: A one-shot example: small models cite far more reliably with one (4 of 5 answers vs 2-3 of 5 measured
#: with a 1.5B model, see docs/benchmarks.md).
DEFAULT_SYSTEM_PROMPT = """You answer questions using only the entries the user gives you.
Each entry starts with a header line: ENTRY #<id> | date | source | title.
Rules:
- Use only facts stated in the entries, never outside knowledge.
- After every sentence, cite the entry it comes from as [#<id>], with the id from that entry's header.
- If the entries do not contain the answer, reply exactly: {no_answer}
- Be brief: at most four sentences.

Example.
Entries:
ENTRY #a17 | 2021-03-02 | journal | Caffeine and sleep
Caffeine taken six hours before bedtime reduced total sleep time by more than one hour.

Question: Does coffee in the afternoon affect sleep?
Answer: Yes. Caffeine taken six hours before bedtime reduced sleep by more than an hour [#a17]."""

DEFAULT_USER_PROMPT = "Entries:\n{context}\n\nQuestion: {question}\nAnswer:"

_PLACEHOLDER = re.compile(r"\{(context|question|no_answer)\}")


@dataclass(frozen=True, slots=True)
class AnswerPrompt:
    """The chat messages: a system prompt and a user prompt with ``{context}`` and ``{question}`` (and
    ``{no_answer}``, the sentence the model is told to say when the entries do not hold the answer; an
    answer that contains it is ``status="not_in_entries"``)."""

    system: str = DEFAULT_SYSTEM_PROMPT
    user: str = DEFAULT_USER_PROMPT
    no_answer: str = DEFAULT_NO_ANSWER

    def __post_init__(self) -> None:
        both = self.system + self.user
        for name in ("{context}", "{question}"):
            if name not in both:
                raise ConfigurationError(f"the answer prompt needs a {name} placeholder (system or user)")

    def _fill(self, template: str, values: dict[str, str]) -> str:
        # One pass: a question or a context that contains "{context}" is not expanded again.
        return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)

    def messages(self, question: str, context: str) -> list[ChatMessage]:
        values = {"context": context, "question": question, "no_answer": self.no_answer}
        return [
            {"role": "system", "content": self._fill(self.system, values)},
            {"role": "user", "content": self._fill(self.user, values)},
        ]

    def overhead_chars(self, question: str) -> int:
        """Characters of the prompt around the context."""
        return sum(len(m["content"]) for m in self.messages(question, ""))
