"""Relevance judgments the workbench keeps beside the data: an Elasticsearch index of its own
(``<alias>-judgments``), one document per (tenant, query, document) — the latest grade wins — with who judged
and when. Exported as (and imported from) BEIR's qrels and queries files, so ``hybrid-search eval`` / ``tune``
read them as they read any judged collection.

Through :attr:`SearchClient.elasticsearch` (the client's public handle on its connection), never a private
module: the workbench sits above the client's public API, like ``storage.evaluation``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .. import SearchClient

__all__ = ["GRADES", "Judgment", "JudgmentStore", "query_id"]

#: 0: not relevant, 1: relevant, 2: highly relevant (BEIR's qrels grades).
GRADES = (0, 1, 2)
_MAPPING = {
    "dynamic": "strict",
    "properties": {
        "query_id": {"type": "keyword"},
        "query": {"type": "keyword", "ignore_above": 2048},
        "doc_id": {"type": "keyword"},
        "grade": {"type": "byte"},
        "tenant_id": {"type": "keyword"},
        "judge": {"type": "keyword"},
        "at": {"type": "date"},
    },
}


def query_id(query: str) -> str:
    """A judged query's stable id (its text's digest): the same text is the same query in every export."""
    return "q-" + hashlib.sha256(query.strip().encode()).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Judgment:
    query: str
    doc_id: str
    grade: int
    judge: str
    at: str
    tenant_id: str | None = None

    @property
    def query_id(self) -> str:
        return query_id(self.query)


class JudgmentStore:
    """The judgments of one alias (and one tenant, when the workbench is bound to one)."""

    def __init__(self, client: SearchClient, *, tenant_id: str | None = None) -> None:
        self._client = client
        self.index = f"{client.index}-judgments"
        self.tenant_id = tenant_id

    async def _ensure(self) -> None:
        es = self._client.elasticsearch
        if not (await es.indices.exists(index=self.index)).body:
            await es.options(ignore_status=400).indices.create(
                index=self.index, mappings=_MAPPING, settings={"number_of_shards": 1, "auto_expand_replicas": "0-1"}
            )

    def _scope(self) -> dict[str, Any]:
        if self.tenant_id is None:
            return {"match_all": {}}
        return {"bool": {"filter": [{"term": {"tenant_id": self.tenant_id}}]}}

    async def judge(self, query: str, doc_id: str, grade: int, *, judge: str) -> Judgment:
        """Record ``grade`` for ``doc_id`` under ``query`` (replacing an earlier grade), and return it."""
        await self._ensure()
        at = datetime.now(UTC).isoformat(timespec="seconds")
        j = Judgment(query.strip(), doc_id, grade, judge, at, self.tenant_id)
        key = json.dumps([self.tenant_id, j.query_id, doc_id])
        await self._client.elasticsearch.index(
            index=self.index,
            id=hashlib.sha256(key.encode()).hexdigest(),
            document={
                "query_id": j.query_id,
                "query": j.query,
                "doc_id": doc_id,
                "grade": grade,
                "tenant_id": self.tenant_id,
                "judge": judge,
                "at": at,
            },
            refresh="wait_for",
        )
        return j

    async def all(self) -> list[Judgment]:
        """Every judgment of this alias (this tenant's, when bound), oldest query first."""
        es = self._client.elasticsearch
        if not (await es.indices.exists(index=self.index)).body:
            return []
        out: list[Judgment] = []
        size = 1000
        after: list[Any] | None = None
        while True:
            page = await es.search(
                index=self.index,
                query=self._scope(),
                sort=[{"at": "asc"}, {"doc_id": "asc"}],
                size=size,
                search_after=after,
            )
            hits = page.body["hits"]["hits"]
            for h in hits:
                s = h["_source"]
                out.append(Judgment(s["query"], s["doc_id"], int(s["grade"]), s["judge"], s["at"], s.get("tenant_id")))
            if len(hits) < size:
                return out
            after = hits[-1]["sort"]

    async def qrels(self) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
        """BEIR's two parts: query id -> text, and query id -> {doc id: grade}."""
        queries: dict[str, str] = {}
        qrels: dict[str, dict[str, int]] = {}
        for j in await self.all():
            queries[j.query_id] = j.query
            qrels.setdefault(j.query_id, {})[j.doc_id] = j.grade
        return queries, qrels


def qrels_tsv(qrels: dict[str, dict[str, int]]) -> str:
    """BEIR's ``qrels/test.tsv``."""
    lines = ["query-id\tcorpus-id\tscore"]
    lines += [f"{q}\t{d}\t{g}" for q in sorted(qrels) for d, g in sorted(qrels[q].items())]
    return "\n".join(lines) + "\n"


def queries_jsonl(queries: dict[str, str]) -> str:
    """BEIR's ``queries.jsonl``."""
    return "".join(json.dumps({"_id": q, "text": t}, ensure_ascii=False) + "\n" for q, t in sorted(queries.items()))
