"""Settings from the environment (prefix ``ES_``), read once by :meth:`SearchClient.from_settings`."""

from __future__ import annotations

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from ._fusion.methods import DEFAULT_RRF_K, FusionMethod
from ._fusion.setting import DEFAULT_WINDOW, FusionSetting
from ._transport.resilience import ResiliencePolicy
from ._types.requests import RoundTrip
from .passages import DEFAULT_OVERLAP, DEFAULT_TOKENS, PassageSetting

__all__ = ["RoundTrip", "SearchSettings"]

#: The settings fields behind each fusion parameter (``storage._fusion.setting``).
_FUSION_FIELDS = {
    "method": ("fusion",),
    "k": ("rrf_k",),
    "weights": ("bm25_weight", "knn_weight"),
    "window": ("window",),
}


class SearchSettings(BaseSettings):
    """Every field can be set as ``ES_<NAME>`` (e.g. ``ES_URL``, ``ES_INDEX``, ``ES_API_KEY``).

    Secrets are ``SecretStr``: they never appear in ``repr``, logs or errors.
    """

    model_config = SettingsConfigDict(env_prefix="ES_", extra="ignore", frozen=True)

    #: Comma-separated node URLs, e.g. ``http://127.0.0.1:9200``. None: see ElasticsearchNotConfigured.
    url: str | None = None
    #: The alias searched and written; the concrete index behind it is ``<index>-000001`` and so on.
    index: str = Field(default="documents", pattern=r"^[a-z0-9][a-z0-9_.\-]*$", max_length=200)
    username: str | None = None
    password: SecretStr | None = None
    api_key: SecretStr | None = None
    #: A CA certificate (PEM path) to verify the cluster with; the system store is used otherwise.
    ca_certs: str | None = None
    #: Pin the server certificate by its SHA-256 fingerprint instead of (or as well as) a CA.
    ssl_assert_fingerprint: str | None = None
    #: Verification on by default; turning it off is for throwaway local clusters only.
    verify_certs: bool = True
    #: Elastic Cloud: the deployment's Cloud ID (instead of ``url``).
    cloud_id: str | None = None
    #: Every search and write must name a tenant; the client filters both legs and checks the results.
    multi_tenant: bool = False
    #: Per-request timeout of the Elasticsearch client (seconds).
    request_timeout_s: float = Field(default=10.0, gt=0)
    #: Bulk requests carry many documents: a longer timeout (one attempt's; with several nodes each request
    #: gets half of it, so a bulk that lands on a hung node fails over to another in time).
    bulk_timeout_s: float = Field(default=60.0, gt=0)
    #: Primary shards of a new index; replicas: None = one as soon as a second node exists (auto-expand 0-1).
    number_of_shards: int = Field(default=1, ge=1, le=1024)
    number_of_replicas: int | None = Field(default=None, ge=0)
    #: Discover the cluster's nodes from the hosts given (at start / when a node fails). Off by default:
    #: behind a load balancer, a proxy or Elastic Cloud the nodes' published addresses are not reachable
    #: by clients, and sniffing would replace a working URL with dead ones. Turn it on for a cluster the
    #: client reaches directly (as the three-node tests do).
    sniff_on_start: bool = False
    sniff_on_node_failure: bool = False
    sniff_min_delay_s: float = Field(default=10.0, ge=0)
    #: Analyzer of ``title``/``text`` (``ES_ANALYZER``) when an index is created: ``english_folded``
    #: (default: English stopwords and Porter stemming with accents folded, defined in the index's settings:
    #: ``storage._dsl.mapping.DEFINED_ANALYZERS``), ``english`` (the same without folding: the analysis-common
    #: module's built-in analyzer), ``standard`` (no stemming, built into every distribution), or any
    #: analyzer the server has (``french``, ``simple``...). Existing indices keep theirs: ``reembed()`` (or
    #: ``indices.create_version()`` / ``indices.promote()``) moves an index to the configured one.
    analyzer: str = Field(default="english_folded", min_length=1)
    #: Each leg's budget in a hybrid search; a leg over it is dropped (degraded result), not awaited.
    leg_timeout_s: float = Field(default=5.0, gt=0)
    #: Search on when some shards cannot answer, and report the result as ``partial`` (Elasticsearch's own
    #: default); False: Elasticsearch refuses such searches (the leg fails with ``shards_unavailable``).
    allow_partial_search_results: bool = True
    #: The server-side ``timeout`` of each leg (and of the facets and the deep walk's streams), so
    #: Elasticsearch stops work the client has given up on (its shards then return what they found, reported
    #: as ``partial``). None: 90 % of what is left of the leg budget when the request is sent.
    search_timeout_s: float | None = Field(default=None, gt=0)
    #: Candidates fetched per leg and fused; ``offset + limit`` must fit inside it.
    window: int = Field(default=DEFAULT_WINDOW, ge=1, le=10_000)
    #: kNN ``num_candidates`` (HNSW breadth per shard); at least ``window``.
    num_candidates: int = Field(default=100, ge=1, le=10_000)
    fusion: FusionMethod = "rrf"
    rrf_k: int = Field(default=DEFAULT_RRF_K, ge=1)
    bm25_weight: float = Field(default=1.0, ge=0)
    knn_weight: float = Field(default=1.0, ge=0)
    #: Two concurrent requests (BM25 starts while the query is embedded) or one ``_msearch`` after the
    #: embedding. See docs/benchmarks.md for the measurement behind the default.
    round_trip: RoundTrip = "parallel"
    #: Rerank every search by default (needs a reranker: ``RERANKER_PROVIDER``); ``search(rerank=...)`` wins.
    rerank: bool = False
    #: How many of the fused hits the reranker sees. 50: what the systems this replaces over-fetch, and about
    #: 0.1-0.5 s of a hosted cross-encoder; ``offset + limit`` must fit inside it.
    rerank_candidates: int = Field(default=50, ge=1, le=1000)
    #: The rerank stage's budget inside a search (retries included); over it, the fused order is returned.
    rerank_timeout_s: float = Field(default=3.0, gt=0)
    #: Answers (:meth:`SearchClient.answer`): the whole call's deadline (search, context, the chat model,
    #: retries included). A local CPU model may need tens of seconds; hosted ones a few.
    answer_timeout_s: float = Field(default=90.0, gt=0)
    #: Hits retrieved for an answer, and the characters of their text the model is given at most.
    answer_limit: int = Field(default=5, ge=1, le=100)
    answer_context_chars: int = Field(default=6000, ge=200)
    #: Deep paging (search_page / walk): each leg's candidates fused into the walk's head; then the BM25 tail.
    walk_window: int = Field(default=1000, ge=1, le=10_000)
    #: How long a walk's point-in-time lives between two pages.
    pit_keep_alive: str = Field(default="5m", pattern=r"^[0-9]+(ms|s|m|h)$")
    #: Ship search telemetry into a data stream (opt-in; see kibana/README.md).
    telemetry: bool = False
    telemetry_data_stream: str = Field(
        default="logs-hybridsearch.search-default", pattern=r"^logs-[a-z0-9_.]+-[a-z0-9_.]+$"
    )
    #: Documents per bulk request.
    bulk_chunk_size: int = Field(default=200, ge=1)
    #: Bytes per bulk request (~100 documents with 384-dim vectors). A larger request (a larger setting, or one
    #: document over it) is sent all the same, a body over 1 MiB streamed to aiohttp in chunks.
    bulk_max_bytes: int = Field(default=1_000_000, ge=10_000)
    #: Documents embedded per batch handed to the embedder (which may split further).
    embed_batch_size: int = Field(default=64, ge=1)
    #: Long documents get passages (``storage.passages``): every part of a document longer than the model's
    #: window gets a vector, and the kNN leg scores a document by its best one (the head included). Applies
    #: to new indices (recorded in ``_meta``); an index built without passages is searched as it was, and
    #: ``reembed()`` moves it. Set explicitly, a value that differs from the index's is a ModelMismatch.
    passages: bool = True
    #: The model's tokens of text per passage (the title comes on top) and the tokens two passages share.
    passage_tokens: int = Field(default=DEFAULT_TOKENS, ge=16, le=8192)
    passage_overlap: int = Field(default=DEFAULT_OVERLAP, ge=0, le=4096)
    #: The best passages each hit carries (and the RAG context reads), per leg that found them.
    passages_shown: int = Field(default=3, ge=1, le=20)

    # Resilience (one stack per dependency; see storage._transport.resilience for the reasons of the defaults).
    retry_attempts: int = Field(default=3, ge=1, le=10)
    breaker_fail_max: int = Field(default=5, ge=1)
    breaker_reset_s: float = Field(default=30.0, gt=0)
    max_concurrency: int = Field(default=32, ge=1)
    operation_deadline_s: float = Field(default=15.0, gt=0)
    embeddings_timeout_s: float = Field(default=10.0, gt=0)

    def passage_setting(self) -> PassageSetting | None:
        """How new indices cut long documents (None: no passages)."""
        return PassageSetting(self.passage_tokens, self.passage_overlap) if self.passages else None

    def passages_explicit(self) -> bool:
        """Whether a passage setting was given (``ES_PASSAGES``...): then an index built otherwise is a
        mismatch; else the client follows what the index recorded."""
        return bool({"passages", "passage_tokens", "passage_overlap"} & self.model_fields_set)

    def fusion_setting(self) -> FusionSetting:
        """The fusion these settings name (their defaults where nothing was set)."""
        return FusionSetting(self.fusion, self.rrf_k, self.bm25_weight, self.knn_weight, self.window)

    def fusion_explicit(self) -> frozenset[str]:
        """The fusion parameters set explicitly (``ES_FUSION``..., or a field given): they win over the
        setting stored with an index."""
        given = self.model_fields_set
        return frozenset(param for param, fields in _FUSION_FIELDS.items() if any(f in given for f in fields))

    def es_policy(self) -> ResiliencePolicy:
        return ResiliencePolicy(
            attempts=self.retry_attempts,
            fail_max=self.breaker_fail_max,
            reset_timeout_s=self.breaker_reset_s,
            max_concurrency=self.max_concurrency,
            deadline_s=self.operation_deadline_s,
            # A little above the transport's request timeout, so that the transport times out first: it then
            # marks the node dead and fails over, instead of being cancelled unaware (and picking it again).
            attempt_timeout_s=self.request_timeout_s + 0.5,
        )

    def embeddings_policy(self) -> ResiliencePolicy:
        return ResiliencePolicy(
            attempts=self.retry_attempts,
            fail_max=self.breaker_fail_max,
            reset_timeout_s=self.breaker_reset_s,
            max_concurrency=self.max_concurrency,
            deadline_s=max(self.operation_deadline_s, self.embeddings_timeout_s),
            attempt_timeout_s=self.embeddings_timeout_s,
        )

    def reranker_policy(self) -> ResiliencePolicy:
        return ResiliencePolicy(
            attempts=self.retry_attempts,
            fail_max=self.breaker_fail_max,
            reset_timeout_s=self.breaker_reset_s,
            max_concurrency=self.max_concurrency,
            deadline_s=self.rerank_timeout_s,
            attempt_timeout_s=self.rerank_timeout_s,
        )

    def llm_policy(self) -> ResiliencePolicy:
        """The chat model's stack: its own breaker; retries only inside the answer's deadline. At most 4
        answers in flight: a local server runs one at a time, and a queue past that only times out."""
        return ResiliencePolicy(
            attempts=self.retry_attempts,
            fail_max=self.breaker_fail_max,
            reset_timeout_s=self.breaker_reset_s,
            max_concurrency=min(self.max_concurrency, 4),
            max_wait_s=self.answer_timeout_s,
            deadline_s=self.answer_timeout_s,
            attempt_timeout_s=self.answer_timeout_s,
        )

    def hosts(self) -> list[str]:
        return [u.strip() for u in (self.url or "").split(",") if u.strip()]
