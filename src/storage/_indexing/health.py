"""``health()``: what the client knows of the cluster, the alias and its own dependencies (a :class:`Health`),
and ``client.breakers``' snapshots of the circuit breakers."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .._dsl.mapping import building_versions
from .._errors import AccessDenied
from .._fusion.setting import configured_fusion
from .._transport.resilience import Resilience
from .._types.status import BreakerStatus, ClusterHealth, Health, IndexHealth
from .indices import IndexManager

__all__ = ["breaker_status", "breakers", "health"]


async def health(m: IndexManager) -> Health:
    """Cluster status, server version, license, the index's stats, the versions a reembed is building, the
    fusion in force and the client's breakers (each part the credentials may not see: left empty)."""
    b = m.backend

    async def optional(call: Callable[[], Awaitable[Any]]) -> dict[str, Any]:
        """Cluster-level facts need the `monitor` privilege, which an application key may lack."""
        try:
            return dict((await b.es_call(call)).body)
        except AccessDenied:
            return {}

    # Not GET /: the root endpoint is a module (rest-root) that minimal distributions leave out.
    nodes = (await optional(lambda: b.es.nodes.info(metric="process"))).get("nodes", {})
    versions = sorted({str(n.get("version")) for n in nodes.values()}) or ["unknown (no monitor privilege)"]
    cluster = await optional(lambda: b.es.cluster.health())
    lic = (await optional(lambda: b.es.license.get())).get("license", {}).get("type", "unknown")
    stats = await b.es_call(lambda: b.es.options(ignore_status=404).indices.stats(index=m.alias, metric="docs,store"))
    indices = stats.body.get("indices", {}) if stats.meta.status == 200 else {}
    # The documents a user wrote: ``_count`` counts top-level documents only, where the stats' docs count
    # every Lucene document (each nested passage is one).
    documents = await m.count_all(m.alias) if indices else 0
    try:
        building = building_versions(await m.versions())
    except AccessDenied:
        building = []
    # The fusion a search of the alias uses when the call passes none, and where each part comes from.
    s = b.settings
    target = await b.metadata.read_target(m.alias)
    in_force, sources = configured_fusion(s.fusion_setting(), s.fusion_explicit(), target.fusion)
    return Health(
        cluster=ClusterHealth(
            name=cluster.get("cluster_name"), status=cluster.get("status"), nodes=cluster.get("number_of_nodes")
        ),
        version=", ".join(versions),
        license=lic,
        index=IndexHealth(
            alias=m.alias,
            exists=bool(indices),
            indices=sorted(indices),
            documents=documents,
            size_bytes=sum(i["primaries"]["store"]["size_in_bytes"] for i in indices.values()),
            building=building,
            searches_passages=target.searches_passages,
            passage_agreement=target.agreement,
            long_documents_head_first=target.searches_passages and target.head_first,
        ),
        breakers=breakers(b.resilience),
        embedding_model=b.embedder.model_id,
        embedding_dimensions=b.embedder.dimensions,
        reranker_model=b.reranker.model_id if b.reranker is not None else None,
        fusion=in_force,
        fusion_sources=dict(sources),
    )


def breaker_status(stack: Resilience) -> BreakerStatus:
    """A read-only snapshot of one dependency's breaker and counters."""
    state = stack.state
    return BreakerStatus(
        state=state if state in ("closed", "open") else "half-open",  # type: ignore[arg-type]
        failures=int(stack.breaker.fail_counter),
        calls=stack.calls,
        attempts=stack.attempts,
        retries=stack.retries,
        rejected_open=stack.rejected_open,
        retry_budget=round(stack.budget.tokens, 3),
        last_failure=stack.last_failure,
    )


def breakers(stacks: Mapping[str, Resilience]) -> dict[str, BreakerStatus]:
    return {name: breaker_status(stack) for name, stack in stacks.items()}
