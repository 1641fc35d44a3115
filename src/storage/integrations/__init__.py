"""Our hybrid search in the shape of the frameworks our users already use, each an optional extra and a thin
adapter over :meth:`SearchClient.search` (no search logic of its own):

- ``storage.integrations.langchain.HybridSearchRetriever`` — a LangChain ``BaseRetriever`` (extra
  ``langchain``);
- ``storage.integrations.llama_index.HybridSearchRetriever`` — a LlamaIndex ``BaseRetriever`` returning
  ``NodeWithScore`` (extra ``llama-index``);
- ``storage.integrations.haystack.HybridSearchRetriever`` — a Haystack ``@component`` with ``run`` and
  ``run_async`` (extra ``haystack``).

Each is built from a ``SearchClient`` (``HybridSearchRetriever(client=..., **options)``) or from the
environment (``HybridSearchRetriever.from_settings(**options)``), and its synchronous entry points work
inside and outside a running event loop (``_bridge``). One client may be shared by any number of retrievers,
called from sync code, any loop and any thread: it runs on one loop; :func:`close_client` closes a shared
client that synchronous calls gave a loop of its own. This package imports no framework: import the module of
the one you use.
"""

from ._bridge import close_client

__all__ = ["close_client"]
