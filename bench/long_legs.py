"""How a long document's head and its passages combine in each leg, measured on every long collection
against no passages (issue 64: "never worse than without passages").

For each collection two indices are built through the product (the same documents, query vectors and
document vectors from the embedding cache): ``head`` (``passages=False``) and ``passages`` (the default).
The head index gives the head-only legs (``client.leg_rankings``, window 100). On the passages index each leg
is sent in the variants below (the product's own clauses, only their combination differs; a short document
has no passages and scores by its head, its whole text, in every variant). A long document scores by

- ``head`` / ``whole``: its head vector / its whole text only (the passages not read);
- ``better_of``: the better of the two (``dis_max``: mapping version 4's, today's);
- ``p×β``: the better of the head's and the best passage's score times β (``dis_max``, the passage query
  boosted by β: a passage must beat the head by a margin to decide);
- ``tie_0.3``: the better one plus 0.3 of the other (``dis_max`` ``tie_breaker``);
- ``sum``: both added (``bool.should``: the layout before version 4);
- ``passage``: the best passage only (a document without passages is not in this list);
- ``lists``: two rankings of the leg's own, fused by rank (RRF, the fusion's k): the head's (``whole`` /
  ``head``) and ``better_of``'s — a long document's passages can lift it, but only as far as one list of two.

``four lists`` fuses the four rankings (both legs' head and ``better_of`` lists) at once.

Every BM25 variant is fused with every kNN variant by the fusion in force (RRF, k 10): nDCG@10 of each leg
and of the hybrid, beside head-only's — and the product's own legs on the passages index (``leg_rankings``:
head first where the index's long documents agree with their heads, else the better of), with the median
agreement its writes recorded.

    .venv/bin/python bench/long_legs.py --sets manpages lisa-x10 scifact-x10 scifact

Starts a local Elasticsearch (1 GiB heap) unless ES_URL is set. Prints a table; JSON in
bench/results/long_legs.json.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from layouts import embedder
from long_documents import SHARED, long_collection
from man_pages import build as man_pages
from output import each_set, save
from readmes import build as readmes

from storage import SearchClient, SearchSettings
from storage._dsl.queries import bm25_request, knn_query_request  # (the product's clauses, recombined)
from storage._dsl.tenancy import every_tenant
from storage._fusion.methods import fused_list
from storage.evaluation import fuse_top, load_beir, measure
from storage.local_es import url_or_local

ROOT = Path(__file__).resolve().parents[1]
WINDOW = 100
Clause = dict[str, Any]
Combine = Callable[[Clause, Clause], Clause]


def _boosted(clause: Clause, boost: float) -> Clause:
    kind, body = next(iter(clause.items()))
    return {kind: {**body, "boost": boost}}


def _variants(first: str) -> dict[str, Combine]:
    return {
        first: lambda head, best: head,
        "passage": lambda head, best: best,
        "better_of": lambda head, best: {"dis_max": {"queries": [head, best]}},
        "p×0.9": lambda head, best: {"dis_max": {"queries": [head, _boosted(best, 0.9)]}},
        "p×0.7": lambda head, best: {"dis_max": {"queries": [head, _boosted(best, 0.7)]}},
        "tie_0.3": lambda head, best: {"dis_max": {"queries": [head, best], "tie_breaker": 0.3}},
        "sum": lambda head, best: {"bool": {"should": [head, best], "minimum_should_match": 1}},
    }


BM25 = _variants("whole")
KNN = _variants("head") | {
    "p×0.98": lambda head, best: {"dis_max": {"queries": [head, _boosted(best, 0.98)]}},
    "p×0.95": lambda head, best: {"dis_max": {"queries": [head, _boosted(best, 0.95)]}},
}


def folder(name: str) -> Path:
    if name == "manpages":
        return man_pages()
    if name == "readmes":
        return readmes()
    if name.endswith("-x10"):
        return long_collection(name.removesuffix("-x10"))
    return {"scifact": SHARED / "beir" / "scifact", "lisa": SHARED / "ir" / "lisa"}[name]


def bm25_clauses(text: str) -> tuple[Clause, Clause]:
    """The product's whole-text and best-passage BM25 clauses for ``text``."""
    body = bm25_request(text, scope=every_tenant(), size=WINDOW, passage_text=True, head_vectors=True)
    whole, best = body["query"]["bool"]["must"][0]["dis_max"]["queries"]
    return whole, best


def knn_clauses(vector: list[float]) -> tuple[Clause, Clause]:
    """The product's head and best-passage kNN queries (``num_candidates`` 100, as the leg's default)."""
    body = knn_query_request(vector, scope=every_tenant(), depth=WINDOW, size=WINDOW, passages=1, head_vectors=True)
    head, best = body["query"]["dis_max"]["queries"]
    best["nested"].pop("inner_hits", None)
    return head, best


def equal_rrf(lists: dict[str, tuple[list[str], list[float]]], k: int, n: int = 10) -> list[str]:
    """The first ``n`` ids of ``lists`` fused by RRF with equal weights."""
    return fused_list(lists, method="rrf", k=k, weights=dict.fromkeys(lists, 1.0)).top_ids(n)


async def build(url: str, name: str, layout: str) -> SearchClient:
    data = load_beir(folder(name))
    settings = SearchSettings(
        url=url, index=f"bench-long-legs-{name}-{layout}", leg_timeout_s=60, passages=layout == "passages"
    )
    client = SearchClient.from_settings(settings, embedder=embedder())
    await client.__aenter__()
    await client.indices.delete()
    await client.ensure_index()
    report = await client.index_documents(data.documents, refresh=True)
    assert report.ok, report.failed[:3]
    return client


async def measure_set(url: str, name: str) -> dict[str, Any]:
    data = load_beir(folder(name))
    queries = {q: data.queries[q] for q in sorted(data.qrels) if q in data.queries}
    qrels = {q: data.qrels[q] for q in queries}
    head, passages = await build(url, name, "head"), await build(url, name, "passages")
    try:
        setting, _ = await head.indices.fusion_in_force()
        out: dict[str, Any] = {"set": name, "documents": len(data.documents), "queries": len(queries)}
        lists: dict[str, dict[str, Any]] = {q: {} for q in queries}
        es = passages.elasticsearch
        status = (await passages.health()).index  # (a fresh look: the agreement its writes recorded)
        out["agreement"] = status.passage_agreement
        out["head_first"] = status.long_documents_head_first
        for qid, text in queries.items():
            for leg, hits in (await head.leg_rankings(text, window=WINDOW)).items():
                lists[qid][f"head_{leg}"] = ([h.id for h in hits], [h.score for h in hits])
            for leg, hits in (await passages.leg_rankings(text, window=WINDOW)).items():
                lists[qid][f"product_{leg}"] = ([h.id for h in hits], [h.score for h in hits])
            vector = list(await passages.embedder.embed_query(text))
            for leg, (first, second), variants in (
                ("bm25", bm25_clauses(text), BM25),
                ("knn", knn_clauses(vector), KNN),
            ):
                for variant, combine in variants.items():
                    body = {"query": combine(first, second), "size": WINDOW, "_source": False}
                    hits = (await es.search(index=passages.index, **body))["hits"]["hits"]
                    lists[qid][f"{leg}:{variant}"] = ([h["_id"] for h in hits], [h["_score"] for h in hits])
                # Two lists of the leg's own, fused by rank: the head's ranking and the best passage's.
                first_list = lists[qid][f"{leg}:{next(iter(variants))}"]
                pair = {"head": first_list, "passage": lists[qid][f"{leg}:better_of"]}
                ids = equal_rrf(pair, setting.k, WINDOW)
                lists[qid][f"{leg}:lists"] = (ids, [1.0 / (n + 1) for n in range(len(ids))])

        def ndcg(pick: Callable[[dict[str, Any]], list[str]]) -> float:
            return round(measure(qrels, {q: pick(lists[q])[:10] for q in queries})[0], 4)

        def hybrid(bm25: str, knn: str) -> float:
            return ndcg(lambda x: fuse_top({"bm25": x[bm25], "knn": x[knn]}, setting, 10))

        out["head"] = {
            "bm25": ndcg(lambda x: x["head_bm25"][0]),
            "knn": ndcg(lambda x: x["head_knn"][0]),
            "hybrid": hybrid("head_bm25", "head_knn"),
        }
        out["product"] = {
            "bm25": ndcg(lambda x: x["product_bm25"][0]),
            "knn": ndcg(lambda x: x["product_knn"][0]),
            "hybrid": hybrid("product_bm25", "product_knn"),
        }
        out["bm25"] = {v: ndcg(lambda x, v=v: x[f"bm25:{v}"][0]) for v in [*BM25, "lists"]}
        out["knn"] = {v: ndcg(lambda x, v=v: x[f"knn:{v}"][0]) for v in [*KNN, "lists"]}
        out["hybrid"] = {
            f"{b} + {k}": hybrid(f"bm25:{b}", f"knn:{k}") for b in [*BM25, "lists"] for k in [*KNN, "lists"]
        }
        out["hybrid"]["four lists"] = ndcg(
            lambda x: equal_rrf(
                {"bw": x["bm25:whole"], "bp": x["bm25:better_of"], "kh": x["knn:head"], "kp": x["knn:better_of"]},
                setting.k,
            )
        )
        return out
    finally:
        for client in (head, passages):
            await client.indices.delete()
            await client.__aexit__(None, None, None)


def table(rows: list[dict[str, Any]]) -> str:
    """Per collection: head-only, then each leg's variants, then the hybrids of the variants tried together."""
    out = []
    for r in rows:
        h = r["head"]
        out.append(
            f"\n{r['set']} ({r['documents']} docs, {r['queries']} queries): head-only BM25 {h['bm25']:.4f}, "
            f"kNN {h['knn']:.4f}, hybrid {h['hybrid']:.4f}"
        )
        p = r["product"]
        out.append(
            f"  the product (passages, read {'head first' if r['head_first'] else 'by the better of'}; median "
            f"agreement {r['agreement']}): BM25 {p['bm25']:.4f}, kNN {p['knn']:.4f}, hybrid {p['hybrid']:.4f}"
        )
        out.append("  BM25: " + ", ".join(f"{v} {x:.4f}" for v, x in r["bm25"].items()))
        out.append("  kNN: " + ", ".join(f"{v} {x:.4f}" for v, x in r["knn"].items()))
        best = sorted(r["hybrid"].items(), key=lambda kv: -kv[1])[:5]
        out.append("  hybrid best: " + ", ".join(f"{v} {x:.4f}" for v, x in best))
        out.append("  hybrid today (better_of + better_of): " + f"{r['hybrid']['better_of + better_of']:.4f}")
        out.append(
            f"  hybrid two lists per leg: {r['hybrid']['lists + lists']:.4f}, "
            f"four lists: {r['hybrid']['four lists']:.4f}"
        )
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=["manpages", "lisa-x10", "scifact-x10", "scifact"])
    args = parser.parse_args()
    with url_or_local("bench-long-legs", heap="1g") as url:
        rows = each_set(args.sets, lambda name: asyncio.run(measure_set(url, name)))
    save(rows, "long_legs.json", table)


if __name__ == "__main__":
    main()
