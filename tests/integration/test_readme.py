"""Every ``python`` block in the README runs, as written, against the real Elasticsearch."""

from __future__ import annotations

import asyncio
import functools
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from elasticsearch import AsyncElasticsearch

README = Path(__file__).parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


@pytest.fixture
async def users_index(es: AsyncElasticsearch, index_name: str) -> str:
    """An index a user holds data in (what ES_INDEX names): the examples must leave it alone."""
    await es.indices.create(index=index_name, mappings={"properties": {"text": {"type": "text"}}})
    await es.index(index=index_name, id="mine", document={"text": "the examples must never touch it"}, refresh=True)
    for leftover in (await es.options(ignore_status=404).indices.get(index="readme-*")).body or {}:
        await es.options(ignore_status=404).indices.delete(index=leftover)  # (left by an example that failed)
    return index_name


@pytest.mark.smoke
@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
async def test_readme_python_example_runs_on_an_index_of_its_own_and_leaves_others_alone(
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
    if "LLM_" in code:  # the answers example: the real local chat server
        chat = request.getfixturevalue("chat_server")
        env.update(LLM_BASE_URL=chat.base_url, LLM_MODEL=chat.model)
    env["PYTHONWARNINGS"] = "error"
    run = functools.partial(subprocess.run, capture_output=True, text=True, timeout=300, env=env)
    done = await asyncio.to_thread(run, [sys.executable, str(script)])
    assert done.returncode == 0, done.stderr
    print(done.stdout)
    assert (await es.count(index=users_index))["count"] == 1  # the user's document survived
    left = (await es.options(ignore_status=404).indices.get(index="readme-*")).body
    assert not left  # and its own index is gone


def test_readme_has_python_examples() -> None:
    assert BLOCKS
