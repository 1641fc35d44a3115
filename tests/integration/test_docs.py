"""Every ``python`` block of the README and of the docs site runs, as written, against the real Elasticsearch."""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from elasticsearch import AsyncElasticsearch

from .._scripted import chat_body, chat_chunks

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
EXAMPLES = [
    (f"{page.relative_to(ROOT)}#{n}", code)
    for page in PAGES
    for n, code in enumerate(re.findall(r"```python\n(.*?)```", page.read_text(), flags=re.DOTALL))
]


@pytest.fixture
async def users_index(es: AsyncElasticsearch, index_name: str) -> str:
    """An index a user holds data in (what ES_INDEX names): the examples must leave it alone."""
    await es.indices.create(index=index_name, mappings={"properties": {"text": {"type": "text"}}})
    await es.index(index=index_name, id="mine", document={"text": "the examples must never touch it"}, refresh=True)
    for leftover in (await es.options(ignore_status=404).indices.get(index="readme-*")).body or {}:
        await es.options(ignore_status=404).indices.delete(index=leftover)  # (left by an example that failed)
    return index_name


@pytest.mark.parametrize("code", [code for _, code in EXAMPLES], ids=[where for where, _ in EXAMPLES])
async def test_every_python_example_of_the_docs_runs_on_an_index_of_its_own_and_leaves_others_alone(
    code: str,
    es_url: str,
    es: AsyncElasticsearch,
    users_index: str,
    rerank_url: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    script = tmp_path / "example.py"
    script.write_text(code)
    assert 'SearchSettings(index="readme-' in code
    # RERANKER_URL: the rerank example talks to the tests' rerank server (real HTTP, TEI JSON).
    env = {**os.environ, "ES_URL": es_url, "ES_INDEX": users_index, "RERANKER_URL": rerank_url}
    if "LLM_" in code:  # the answers example: an OpenAI-compatible server (scripted: the real one is proven in
        # tests/integration/test_answer.py), answering whole or streamed, citing the first entry it was given
        chat = request.getfixturevalue("scripted_server")
        chat.default = cites_the_first_entry
        env.update(LLM_BASE_URL=chat.url, LLM_MODEL="scripted")
    env["PYTHONWARNINGS"] = "error"
    run = functools.partial(subprocess.run, capture_output=True, text=True, timeout=300, env=env)
    done = await asyncio.to_thread(run, [sys.executable, str(script)])
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    assert (await es.count(index=users_index))["count"] == 1  # the user's document survived
    left = (await es.options(ignore_status=404).indices.get(index="readme-*")).body
    assert not left  # and its own index is gone


def cites_the_first_entry(payload: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    """A chat completion citing the first ``ENTRY #id`` of the prompt (streamed when asked)."""
    prompt = " ".join(str(m.get("content", "")) for m in payload.get("messages", []))
    found = re.search(r"ENTRY #(\S+)", prompt)
    text = f"It says so [#{found.group(1)}]." if found else "Nothing in the entries."
    if payload.get("stream"):
        parts = re.findall(r"\S+\s*", text)
        raw = "".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in chat_chunks(parts))
        return 200, {"content-type": "text/event-stream"}, raw.encode()
    return 200, {"content-type": "application/json"}, json.dumps(chat_body(text)).encode()


def test_the_readme_and_the_tutorial_have_python_examples() -> None:
    where = {w.split("#")[0] for w, _ in EXAMPLES}
    assert {"README.md", "docs/tutorial.md"} <= where
