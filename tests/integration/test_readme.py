"""Every ``python`` block in the README runs, as written, against the real Elasticsearch."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


@pytest.mark.smoke
@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_python_example_runs(
    code: str, es_url: str, index_name: str, rerank_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    script = tmp_path / "example.py"
    script.write_text(code)
    # RERANKER_URL: the rerank example talks to the tests' rerank server (real HTTP, TEI JSON).
    env = {**os.environ, "ES_URL": es_url, "ES_INDEX": index_name, "RERANKER_URL": rerank_url}
    if "LLM_" in code:  # the answers example: the real local chat server
        chat = request.getfixturevalue("chat_server")
        env.update(LLM_BASE_URL=chat.base_url, LLM_MODEL=chat.model)
    env["PYTHONWARNINGS"] = "error"
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    print(done.stdout)


def test_readme_has_python_examples() -> None:
    assert BLOCKS
