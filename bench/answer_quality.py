"""Answer quality and speed (RAG): SciFact test queries answered by a local chat model with citations.

For each of the first ``--queries`` judged SciFact test queries (in id order): ``client.answer(query)`` with
the library's defaults (hybrid search, 5 entries, 6,000 context characters), against a local llama.cpp
server (``embeddings.local_llm``, one thread) and a local Elasticsearch. Reports
- **citations in context**: of the answers that cite any ``[#id]``, the share whose citations are all
  entries of the context (no invented id);
- **cites a relevant document**: the share of answers that cite (really, not by the no-citation fallback)
  at least one document judged relevant for the query; next to it the ceiling, the share of queries with a
  relevant document in the context at all;
- how often the model cited nothing (fallback) or said the entries do not hold the answer;
- latency per step (search, chat model; p50 and max) and the model's speed (completion tokens / s).

Not a test. Prints a table and writes bench/results/answer_quality-<model>.json.

    .venv/bin/python bench/answer_quality.py [--model qwen2.5-1.5b|smollm2-135m] [--queries 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from embeddings import CachedEmbedder, LocalEmbedder, OpenAIChat
from embeddings.local_llm import MODELS, LocalChatServer
from storage import IndexNotFound, SearchClient, SearchSettings
from storage.evaluation import load_beir
from storage.local_es import url_or_local
from storage.types import AnswerPrompt

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "data" / "beir" / "scifact"


#: SciFact's queries are claims, not questions: the user prompt asks about the claim.
CLAIM_USER = "Entries:\n{context}\n\nQuestion: According to the entries, is this claim true? {question}\nAnswer:"
PROMPTS = {
    # The library's default system prompt (answer only from the entries, cite [#id], say so when they do not
    # contain the answer).
    "default": AnswerPrompt(user=CLAIM_USER),
    # The same without the rule to say when the entries do not contain the answer (small models over-use it).
    "no-refusal": AnswerPrompt(
        system="\n".join(line for line in AnswerPrompt().system.splitlines() if "{no_answer}" not in line),
        user=CLAIM_USER,
    ),
}


async def run(url: str, chat: LocalChatServer, args: argparse.Namespace) -> dict[str, Any]:
    data = load_beir(SCIFACT)
    settings = SearchSettings(url=url, index="answer-quality-scifact", leg_timeout_s=60, answer_timeout_s=600)
    llm = OpenAIChat(
        model=chat.model,
        base_url=chat.base_url,
        max_tokens=args.max_tokens,
        context_tokens=chat.context_tokens,
        timeout_s=600,
    )
    embedder = CachedEmbedder(LocalEmbedder(), ROOT / ".cache" / "embeddings")
    rows: list[dict[str, Any]] = []
    async with SearchClient.from_settings(settings, embedder=embedder, llm=llm) as client:
        if not await _holds(client, len(data.documents)):  # index once; later runs reuse it
            await client.indices.delete()
            await client.ensure_index()
            report = await client.index_documents(data.documents, refresh=True)
            assert report.ok, report.failed[:3]
        qids = sorted(data.queries, key=lambda q: int(q) if q.isdigit() else q)[: args.queries]
        for n, qid in enumerate(qids, start=1):
            answer = await client.answer(
                data.queries[qid],
                prompt=PROMPTS[args.prompt],
                limit=args.limit,
                max_context_chars=args.context_chars,
            )
            relevant = {doc for doc, grade in data.qrels.get(qid, {}).items() if grade > 0}
            entries = [e.id for e in answer.entries]
            real = [] if answer.citations_fallback else answer.citations
            rows.append(
                {
                    "qid": qid,
                    "query": data.queries[qid],
                    "status": answer.status,
                    "answer": answer.answer,
                    "entries": entries,
                    "citations": real,
                    "invented": answer.invented_citations,
                    "fallback": answer.citations_fallback,
                    "relevant_in_context": bool(relevant & set(entries)),
                    "cites_relevant": bool(relevant & set(real)),
                    "search_ms": answer.timings.search_ms,
                    "llm_ms": answer.timings.llm_ms,
                    "prompt_tokens": answer.usage.prompt_tokens if answer.usage else None,
                    "completion_tokens": answer.usage.completion_tokens if answer.usage else None,
                    "degraded_reason": answer.degradation.reason if answer.degradation else None,
                }
            )
            r = rows[-1]
            print(
                f"{n:>2}/{len(qids)} q{qid}: {answer.status}, cited {r['citations']} invented {r['invented']}"
                f" relevant {sorted(relevant)} llm {(r['llm_ms'] or 0) / 1000:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    return summarize(rows, chat.model) | {
        "prompt": args.prompt,
        "limit": args.limit,
        "context_chars": args.context_chars,
        "threads": args.threads,
    }


async def _holds(client: SearchClient, count: int) -> bool:
    try:
        return await client.documents.count() == count
    except IndexNotFound:
        return False


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else 0.0


def summarize(rows: list[dict[str, Any]], model: str) -> dict[str, Any]:
    answered = [r for r in rows if r["status"] != "llm_failed"]
    citing = [r for r in answered if r["citations"] or r["invented"]]
    llm_ms = [r["llm_ms"] for r in rows if r["llm_ms"] is not None]
    # Prompt and answer tokens through the model per second (on a CPU the prompt dominates).
    speed = [
        (r["prompt_tokens"] + r["completion_tokens"]) / (r["llm_ms"] / 1000)
        for r in rows
        if r["prompt_tokens"] and r["completion_tokens"] and r["llm_ms"]
    ]
    n = len(rows)
    return {
        "model": model,
        "queries": n,
        "failed": n - len(answered),
        "citing_answers": len(citing),
        "citations_all_in_context": round(sum(not r["invented"] for r in citing) / max(len(citing), 1), 3),
        "cites_relevant": round(sum(r["cites_relevant"] for r in rows) / n, 3),
        "relevant_in_context": round(sum(r["relevant_in_context"] for r in rows) / n, 3),
        "fallback": round(sum(r["fallback"] for r in rows) / n, 3),
        "not_in_entries": sum(r["status"] == "not_in_entries" for r in rows),
        "search_ms_p50": round(statistics.median(r["search_ms"] for r in rows), 1),
        "llm_s_p50": round(statistics.median(llm_ms) / 1000, 2) if llm_ms else None,
        "llm_s_max": round(max(llm_ms) / 1000, 2) if llm_ms else None,
        "prompt_tokens_p50": statistics.median(r["prompt_tokens"] or 0 for r in rows),
        "completion_tokens_p50": statistics.median(r["completion_tokens"] or 0 for r in rows),
        "tokens_per_s_p50": round(statistics.median(speed), 1) if speed else None,
        "rows": rows,
    }


def table(s: dict[str, Any]) -> str:
    head = (
        "model",
        "prompt",
        "entries / chars",
        "queries",
        "citing",
        "citations all in context",
        "cites a relevant doc",
        "relevant doc in context",
        "no citation (fallback)",
        "said not in entries",
        "search p50",
        "model p50 / max",
        "prompt / answer tokens p50",
        "tokens/s",
    )
    row = (
        s["model"],
        s["prompt"],
        f"{s['limit']} / {s['context_chars']:,}",
        s["queries"],
        s["citing_answers"],
        f"{s['citations_all_in_context']:.0%}",
        f"{s['cites_relevant']:.0%}",
        f"{s['relevant_in_context']:.0%}",
        f"{s['fallback']:.0%}",
        s["not_in_entries"],
        f"{s['search_ms_p50']:.0f} ms",
        f"{s['llm_s_p50']} / {s['llm_s_max']} s",
        f"{s['prompt_tokens_p50']:.0f} / {s['completion_tokens_p50']:.0f}",
        s["tokens_per_s_p50"],
    )
    return "\n".join(
        ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), "| " + " | ".join(map(str, row)) + " |"]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="qwen2.5-1.5b", choices=sorted(MODELS))
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=1, help="the chat server's threads (1: leave a core to ES)")
    parser.add_argument("--prompt", default="default", choices=sorted(PROMPTS))
    parser.add_argument("--limit", type=int, default=5, help="entries retrieved (the library's default: 5)")
    parser.add_argument("--context-chars", type=int, default=6000, help="context budget (default: 6,000)")
    args = parser.parse_args()
    started = time.perf_counter()
    with url_or_local("answer-quality", heap="1g") as url, LocalChatServer(args.model, threads=args.threads) as chat:
        summary = asyncio.run(run(url, chat, args))
    summary["seconds"] = round(time.perf_counter() - started, 1)
    out = ROOT / "bench" / "results" / f"answer_quality-{args.model}-{args.prompt}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=1) + "\n")
    print(table(summary))


if __name__ == "__main__":
    main()
