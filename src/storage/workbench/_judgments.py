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

from .. import InvalidQuery, SearchClient
from ..evaluation import Judgments

__all__ = ["GRADES", "IMPORTED_GRADES", "Judgment", "JudgmentStore", "parse_judged", "query_id"]

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
    #: The query's id as imported (a judged collection's own); None: the text's digest (:func:`query_id`).
    given_id: str | None = None

    @property
    def query_id(self) -> str:
        return self.given_id or query_id(self.query)


#: The grades a judged collection may carry (kept as given: 0-1, 0-2, 0-3, 0-4 scales; TREC's -1 / -2 for
#: junk are kept too, and count as not relevant).
IMPORTED_GRADES = range(-2, 101)


def parse_judged(queries_text: str, qrels_text: str) -> list[tuple[str, str, str, int]]:
    """A judged collection's files — BEIR's ``queries.jsonl`` and its qrels, ``query-id corpus-id score``
    (BEIR, with or without its header) or ``query-id iteration doc-id relevance`` (TREC), tabs or spaces —
    as (query id, query text, document id, grade), every line checked before anything is written: the first
    bad line is an :class:`InvalidQuery` naming it, its file and what was expected."""
    if not queries_text.strip():
        raise InvalidQuery("the queries file is empty: the qrels name queries by id, send queries.jsonl too")
    texts: dict[str, str] = {}
    for n, line in enumerate(queries_text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise InvalidQuery(f"queries.jsonl line {n} is not JSON: {line[:60]!r}") from None
        if not isinstance(record, dict) or "_id" not in record or not str(record.get("text") or "").strip():
            raise InvalidQuery(f'queries.jsonl line {n} needs "_id" and a non-empty "text": {line[:60]!r}')
        texts[str(record["_id"])] = str(record["text"])
    out: list[tuple[str, str, str, int]] = []
    for n, line in enumerate(qrels_text.splitlines(), start=1):
        parts = line.split()
        if not parts or (n == 1 and parts[0] in ("query-id", "query_id", "qid")):
            continue
        if len(parts) == 3:
            qid, doc_id, grade_text = parts
        elif len(parts) == 4:
            qid, _, doc_id, grade_text = parts
        else:
            raise InvalidQuery(
                f"qrels line {n} has {len(parts)} columns: expected 'query-id corpus-id score' (BEIR) or "
                f"'query-id iteration doc-id relevance' (TREC), tabs or spaces: {line[:60]!r}"
            )
        try:
            grade = int(grade_text)
        except ValueError:
            raise InvalidQuery(f"qrels line {n}: the grade {grade_text!r} is not a whole number") from None
        if grade not in IMPORTED_GRADES:
            raise InvalidQuery(f"qrels line {n}: the grade {grade} is outside -2..100")
        if qid not in texts:
            raise InvalidQuery(f"qrels line {n}: query id {qid!r} is not in queries.jsonl ({len(texts)} queries)")
        out.append((qid, texts[qid], doc_id, grade))
    if not out:
        raise InvalidQuery("the qrels file holds no judgment")
    return out


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

    def _entry(self, j: Judgment) -> tuple[str, dict[str, Any]]:
        """A judgment's document id (one per tenant, query and document: the latest grade wins) and body."""
        key = json.dumps([self.tenant_id, j.query_id, j.doc_id])
        body = {
            "query_id": j.query_id,
            "query": j.query,
            "doc_id": j.doc_id,
            "grade": j.grade,
            "tenant_id": self.tenant_id,
            "judge": j.judge,
            "at": j.at,
        }
        return hashlib.sha256(key.encode()).hexdigest(), body

    async def _known_id(self, query: str) -> str | None:
        """The id this query text was imported under, if it was (a click then judges the same query)."""
        es = self._client.elasticsearch
        scope = self._scope()
        found = await es.search(
            index=self.index,
            query={"bool": {"filter": [{"term": {"query": query}}, *scope.get("bool", {}).get("filter", [])]}},
            size=1,
            source_includes=["query_id"],
        )
        hits = found.body["hits"]["hits"]
        return str(hits[0]["_source"]["query_id"]) if hits else None

    async def judge(self, query: str, doc_id: str, grade: int, *, judge: str) -> Judgment:
        """Record ``grade`` for ``doc_id`` under ``query`` (replacing an earlier grade, an imported one too),
        and return it."""
        await self._ensure()
        at = datetime.now(UTC).isoformat(timespec="seconds")
        text = query.strip()
        j = Judgment(text, doc_id, grade, judge, at, self.tenant_id, await self._known_id(text))
        doc_id_key, body = self._entry(j)
        await self._client.elasticsearch.index(index=self.index, id=doc_id_key, document=body, refresh="wait_for")
        return j

    async def import_judged(self, rows: list[tuple[str, str, str, int]], *, judge: str) -> int:
        """Write a parsed judged collection (:func:`parse_judged`) in one bulk request, refreshed once; the
        query ids and grades as given. Returns how many were written; a judgment Elasticsearch refused is an
        :class:`InvalidQuery` naming it (the others are written)."""
        await self._ensure()
        at = datetime.now(UTC).isoformat(timespec="seconds")
        operations: list[dict[str, Any]] = []
        for qid, text, doc_id, grade in rows:
            key, body = self._entry(Judgment(text.strip(), doc_id, grade, judge, at, self.tenant_id, qid))
            operations += [{"index": {"_index": self.index, "_id": key}}, body]
        answer = (await self._client.elasticsearch.bulk(operations=operations, refresh="wait_for")).body
        failed = [item["index"] for item in answer["items"] if item["index"].get("error")]
        if failed:
            raise InvalidQuery(
                f"{len(failed)} of {len(rows)} judgments were refused by Elasticsearch (the others are written): "
                f"{failed[0]['error'].get('reason', failed[0]['error'])}"
            )
        return len(rows)

    async def grades_of(self, query: str) -> dict[str, int]:
        """The latest grade of each document judged under ``query`` (its text): what the compare view shows
        on each hit, imported or clicked."""
        es = self._client.elasticsearch
        if not (await es.indices.exists(index=self.index)).body:
            return {}
        scope = self._scope().get("bool", {}).get("filter", [])
        found = await es.search(
            index=self.index,
            query={"bool": {"filter": [{"term": {"query": query.strip()}}, *scope]}},
            size=10_000,
            source_includes=["doc_id", "grade"],
        )
        return {str(h["_source"]["doc_id"]): int(h["_source"]["grade"]) for h in found.body["hits"]["hits"]}

    async def forget(self, query: str, doc_id: str | None = None) -> int:
        """Delete the judgments of ``query`` (its text): one document's, or (``doc_id`` None) every one — the
        query leaves the measured set. Returns how many were deleted."""
        es = self._client.elasticsearch
        if not (await es.indices.exists(index=self.index)).body:
            return 0
        clauses: list[dict[str, Any]] = [{"term": {"query": query.strip()}}]
        if doc_id is not None:
            clauses.append({"term": {"doc_id": doc_id}})
        clauses += self._scope().get("bool", {}).get("filter", [])
        # Found, then deleted by id (the local node has no _delete_by_query: it is the reindex module's).
        found = await es.search(index=self.index, query={"bool": {"filter": clauses}}, size=10_000, source=False)
        ids = [h["_id"] for h in found.body["hits"]["hits"]]
        if not ids:
            return 0
        operations = [{"delete": {"_index": self.index, "_id": i}} for i in ids]
        answer = (await es.bulk(operations=operations, refresh="wait_for")).body
        return sum(1 for item in answer["items"] if item["delete"].get("result") == "deleted")

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
                given = None if s["query_id"] == query_id(s["query"]) else s["query_id"]
                out.append(
                    Judgment(s["query"], s["doc_id"], int(s["grade"]), s["judge"], s["at"], s.get("tenant_id"), given)
                )
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

    async def judged_set(self) -> Judgments:
        """The judgments as a judged collection (what ``evaluate`` and ``tune`` read); refused when empty."""
        queries, qrels = await self.qrels()
        if not qrels:
            raise InvalidQuery("nothing is judged yet: judge results in the compare view, or import qrels")
        return Judgments(f"{self._client.index} judgments", queries, qrels)


def qrels_tsv(qrels: dict[str, dict[str, int]]) -> str:
    """BEIR's ``qrels/test.tsv``."""
    lines = ["query-id\tcorpus-id\tscore"]
    lines += [f"{q}\t{d}\t{g}" for q in sorted(qrels) for d, g in sorted(qrels[q].items())]
    return "\n".join(lines) + "\n"


def queries_jsonl(queries: dict[str, str]) -> str:
    """BEIR's ``queries.jsonl``."""
    return "".join(json.dumps({"_id": q, "text": t}, ensure_ascii=False) + "\n" for q, t in sorted(queries.items()))
