// The workbench page: every value is rendered as text (textContent, never innerHTML), so a query, a filter,
// a title or a passage holding markup or script is shown, never run. Highlights come as text with <em>
// markers; they are split on those markers and the matches wrapped in <mark> elements built here.
"use strict";

const state = { info: null, last: null, grades: {} };
const $ = (sel) => document.querySelector(sel);

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k.startsWith("data-")) node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function marked(text) {
  // "a <em>b</em> c" -> [text a, <mark>b</mark>, text c]; anything else stays text.
  const span = el("span");
  const parts = String(text).split(/<\/?em>/);
  parts.forEach((part, n) => span.append(n % 2 ? el("mark", {}, part) : document.createTextNode(part)));
  return span;
}

async function api(path, body) {
  const opts = body === undefined ? {} : {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  };
  const resp = await fetch(path, { credentials: "same-origin", ...opts });
  const text = await resp.text();
  let data;
  try { data = JSON.parse(text); } catch { data = { error: text }; }
  if (!resp.ok) throw new Error(data.error || `${resp.status}`);
  return data;
}

function say(message, isError) {
  const s = $("#status");
  s.textContent = message;
  s.className = isError ? "flag" : "";
}

function parseFilters(text) {
  // "ticker=AAPL, ticker=MSFT, published_at>=2024-01-01" -> the library's filter model.
  const out = {};
  for (const raw of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const m = raw.match(/^([A-Za-z0-9_.\-]+)\s*(>=|<=|>|<|=)\s*(.*)$/);
    if (!m) throw new Error(`a filter is key=value or key>=value, got "${raw}"`);
    const [, key, op, value] = m;
    if (op === "=") {
      if (key in out) out[key] = [].concat(out[key], value);
      else out[key] = value;
    } else {
      const bound = { ">=": "gte", "<=": "lte", ">": "gt", "<": "lt" }[op];
      out[key] = Object.assign(typeof out[key] === "object" && !Array.isArray(out[key]) ? out[key] : {}, { [bound]: value });
    }
  }
  return Object.keys(out).length ? out : null;
}

function request() {
  return {
    query: $("#query").value,
    mode: $("#mode").value,
    limit: Number($("#limit").value) || 10,
    filters: parseFilters($("#filters").value),
    tenant_id: $("#tenant").value || null,
  };
}

function fusion() {
  return {
    method: $("#method").value,
    k: Number($("#k").value) || null,
    window: Number($("#window").value) || null,
    weights: { bm25: Number($("#w-bm25").value), knn: Number($("#w-knn").value) },
  };
}

function grades(query, docId) {
  const box = el("span", { class: "grades" });
  const key = `${query}\u0000${docId}`;
  const given = state.grades[key];
  // A grade already recorded (imported on another scale, or clicked before) is shown, so a click replaces it
  // knowingly: "judged 3" beside the buttons when it is none of them.
  const note = el("span", { class: "judged-grade" }, given !== undefined && !state.info.grades.includes(given) ? `judged ${given} ` : "");
  box.append(note);
  for (const g of state.info.grades) {
    const b = el("button", { type: "button", class: state.grades[key] === g ? "chosen" : "", "data-grade": String(g),
      title: ["not relevant", "relevant", "highly relevant"][g] }, String(g));
    b.addEventListener("click", () => judge(query, docId, g));
    box.append(b);
  }
  return box;
}

async function judge(query, docId, g) {
  const key = `${query}\u0000${docId}`;
  try {
    await api("/api/judgments", { query, doc_id: docId, grade: g });
    state.grades[key] = g;
    document.querySelectorAll(`.hit[data-id="${CSS.escape(docId)}"] .grades`).forEach((box) => {
      box.querySelector(".judged-grade").textContent = "";
      box.querySelectorAll("button").forEach((x) => { x.className = Number(x.dataset.grade) === g ? "chosen" : ""; });
    });
    say(`judged ${docId}: ${g}`);
  } catch (e) { say(e.message, true); }
}

// The keyboard: "/" to the query box; j / k move through the fused column's hits; a digit grades the hit
// marked as current (the grades the page offers). Keys typed into a field are the field's.
function currentHits() { return [...document.querySelectorAll("#col-fused .hit")]; }

function moveCurrent(step) {
  const hits = currentHits();
  if (!hits.length) return;
  const at = hits.findIndex((h) => h.classList.contains("current"));
  const next = at < 0 ? 0 : Math.min(Math.max(at + step, 0), hits.length - 1);
  hits.forEach((h, n) => h.classList.toggle("current", n === next));
  hits[next].scrollIntoView({ block: "nearest" });
  say(`#${hits[next].dataset.id}: press ${state.info.grades.join(" / ")} to grade`);
}

function onKey(e) {
  const typing = e.target instanceof HTMLElement && e.target.closest("input, textarea, select");
  if (typing || e.altKey || e.ctrlKey || e.metaKey || $("#tab-compare").hidden) return;
  if (e.key === "/") { e.preventDefault(); $("#query").focus(); $("#query").select(); return; }
  if (e.key === "j" || e.key === "k") { e.preventDefault(); moveCurrent(e.key === "j" ? 1 : -1); return; }
  const grade = Number(e.key);
  const hit = document.querySelector("#col-fused .hit.current");
  if (/^[0-9]$/.test(e.key) && hit && state.last && state.info.grades.includes(grade)) {
    e.preventDefault();
    judge(state.last.data.query, hit.dataset.id, grade);
  }
}

// Scores to six decimals (four hid differences: three hits read "0.0238"); an exact tie with the hit above says
// so, and what the fusion orders ties by.
function scoreText(score) { return Number(score).toFixed(6); }

function hitItem(query, hit, showRanks, above) {
  const legs = Object.entries(hit.ranks).map(([leg, r]) => {
    const s = hit.leg_scores[leg];
    return `${leg} #${r}${s === undefined ? "" : ` (${Number(s).toFixed(3)})`}`;
  }).join(", ");
  const tie = above && Number(above.score) === Number(hit.score) ? " · tie with the hit above: ordered by more legs, then the better rank, then the id" : "";
  const label = showRanks === "score" ? "score" : "fused";
  const li = el("li", { class: "hit", "data-id": hit.id },
    el("div", { class: "title" }, hit.title || "(untitled)"),
    el("div", { class: "ids" }, showRanks ? `#${hit.id} · ${label} ${scoreText(hit.score)}` + (legs ? ` · ${legs}` : "") + tie : `#${hit.id} · ${legs}`),
  );
  for (const p of hit.passages.slice(0, 2)) {
    li.append(el("div", { class: "passage" }, `[${p.leg}${p.score ? " " + Number(p.score).toFixed(3) : ""}, characters ${p.start}-${p.end}] `, p.text.slice(0, 300)));
  }
  if (!hit.passages.length) {
    for (const frag of (hit.highlights.text || hit.highlights.title || []).slice(0, 2)) {
      li.append(el("div", { class: "passage" }, marked(frag)));
    }
  }
  li.append(grades(query, hit.id));
  if (showRanks) {
    const why = el("button", { type: "button", class: "why", title: "why this hit is here" }, "why?");
    why.addEventListener("click", () => explainHit(li, hit.id));
    li.append(" ", why);
  }
  return li;
}

function explanationTree(node, depth) {
  // Elasticsearch's explanation: a value, what it is, its parts (the first levels; deeper ones are folded).
  const item = el("li", {}, `${Number(node.value).toFixed(4)} — ${node.description}`);
  if (node.details && node.details.length && depth < 6) {
    item.append(el("ul", {}, ...node.details.map((d) => explanationTree(d, depth + 1))));
  }
  return item;
}

async function explainHit(li, docId) {
  if (!state.last) return;
  const old = li.querySelector(".explain");
  if (old) { old.remove(); return; }
  const box = el("div", { class: "explain" }, "explaining…");
  li.append(box);
  try {
    const f = fusion();
    const shown = f.k ? { method: f.method, k: f.k, weights: f.weights, window: f.window || 100 } : null;
    const r = await api("/api/explain", { query: state.last.data.query, doc_id: docId, filters: state.last.request.filters,
      tenant_id: state.last.request.tenant_id, fusion: shown });
    const lines = ["bm25", "knn"].map((leg) => {
      const at = r.legs[leg];
      const what = leg === "knn" ? "similarity" : "score";
      if (!at) return `${leg} leg: not in its first ${r.fusion.window}`;
      const term = r.rrf && r.rrf[leg] ? ` → RRF term ${r.fusion.weights[leg]} / (${r.fusion.k} + ${at.rank}) = ${r.rrf[leg].term.toFixed(6)} (${(100 * r.rrf[leg].share).toFixed(0)} % of the fused score)` : "";
      return `${leg} leg: #${at.rank}, ${what} ${Number(at.score).toFixed(4)}${term}`;
    });
    if (r.fused !== null) lines.push(`fused score ${r.fused.toFixed(6)} (${r.fusion.method} k=${r.fusion.k})`);
    else lines.push(`${r.fusion.method}: each leg's score normalized, then weighted (${weightsText(r.fusion.weights)})`);
    box.replaceChildren(...lines.map((t) => el("div", {}, t)),
      r.bm25 ? el("details", { open: true }, el("summary", {}, "the BM25 score, as Elasticsearch explains it"), el("ul", { class: "explain-tree" }, explanationTree(r.bm25, 0)))
        : el("div", {}, "BM25: the document does not match the query's words"));
  } catch (e) { box.replaceChildren(el("span", { class: "flag" }, e.message)); }
}

function fillColumn(id, query, column, showRanks) {
  const box = $(id);
  const list = box.querySelector("ol");
  list.replaceChildren(...column.hits.map((h, n) => hitItem(query, h, showRanks, n ? column.hits[n - 1] : null)));
  const legs = Object.entries(column.legs).map(([leg, r]) => `${leg} ${r.hits} hits ${r.latency_ms} ms${r.ok ? "" : ` FAILED (${r.reason})`}`);
  const flags = [];
  if (column.degraded) flags.push(`degraded: ${column.legs_failed.join(", ")} failed (${column.degraded_reason})`);
  if (column.partial) flags.push("partial: some shards did not answer");
  const meta = box.querySelector(".meta");
  meta.replaceChildren(el("span", {}, legs.join(" · ") + (column.fetch_ms !== null ? ` · fetch ${column.fetch_ms} ms` : "")));
  for (const f of flags) meta.append(el("span", { class: "flag" }, " " + f));
}

function weightsText(weights) {
  // Only the legs that ran: a bm25 search has no kNN weight (it printed "bm25:knn=1:undefined").
  const legs = Object.entries(weights || {}).filter(([, w]) => w !== undefined && w !== null);
  return legs.length === 2 ? `bm25:knn=${weights.bm25}:${weights.knn}` : legs.map(([l, w]) => `${l} weight ${w}`).join(" ");
}

function showInForce(fusionMeta, sources) {
  const parts = Object.entries(sources).map(([p, s]) => `${p} from ${s}`).join(", ");
  $("#in-force").textContent =
    `in force: ${fusionMeta.method} k=${fusionMeta.k} window=${fusionMeta.window} ${weightsText(fusionMeta.weights)} (${parts})`;
}

async function compare(extra) {
  say("searching…");
  try {
    const body = { ...request(), ...(extra || {}) };
    const data = await api("/api/compare", body);
    state.last = { request: body, data };
    for (const [docId, g] of Object.entries(data.judged || {})) state.grades[`${data.query}\u0000${docId}`] = g;
    fillColumn("#col-bm25", data.query, data.bm25, false);
    fillColumn("#col-knn", data.query, data.knn, false);
    const single = body.mode && body.mode !== "hybrid";
    $("#col-fused h2").textContent = single ? `${body.mode} alone (no fusion)` : "Fused";
    fillColumn("#col-fused", data.query, data.fused, single ? "score" : "fused");
    const f = data.fused.fusion;
    $("#method").value = f.method; $("#k").value = f.k; $("#window").value = f.window;
    $("#w-bm25").value = f.weights.bm25; $("#w-knn").value = f.weights.knn;
    showInForce(f, data.fused.fusion_sources);
    say(`${data.fused.hits.length} ${single ? `${body.mode} ` : "fused "}results`);
  } catch (e) {
    // The last query's results must not stay on screen, gradable, under this one.
    for (const id of ["#col-bm25", "#col-knn", "#col-fused"]) {
      $(id).querySelector("ol").replaceChildren();
      $(id).querySelector(".meta").replaceChildren();
    }
    state.last = null;
    say(e.message, true);
  }
}

async function refuse() {
  if (!state.last) { say("run a search first", true); return; }
  try {
    const f = fusion();
    const data = await api("/api/fuse", {
      candidates: state.last.data.candidates, limit: state.last.request.limit,
      fusion: f, window: state.last.data.window,
    });
    const byId = new Map();
    for (const col of [state.last.data.fused, state.last.data.bm25, state.last.data.knn]) {
      for (const h of col.hits) if (!byId.has(h.id)) byId.set(h.id, h);
    }
    const hits = data.ids.map((id, n) => {
      const known = byId.get(id) || { id, title: "", passages: [], highlights: {}, leg_scores: {} };
      return { ...known, id, score: data.scores[n], ranks: data.ranks[n] };
    });
    const column = { ...state.last.data.fused, hits };
    fillColumn("#col-fused", state.last.data.query, column, true);
    $("#in-force").textContent = `re-fused here (no search run): ${f.method} k=${f.k} window=${f.window} ${weightsText(f.weights)}`;
    say(`re-fused ${hits.length} results`);
  } catch (e) { say(e.message, true); }
}

async function loadJudged() {
  const box = $("#judged-list");
  try {
    const data = await api("/api/judged");
    const forget = (q, j) => {
      const b = el("button", { type: "button", class: "forget" }, j ? "×" : "forget this query");
      b.title = j ? `delete the judgment of ${j.doc_id}` : "delete every judgment of this query (it leaves the measured set)";
      b.addEventListener("click", async () => {
        try {
          await api("/api/judgments/forget", j ? { query: q.query, doc_id: j.doc_id } : { query: q.query });
          loadJudged();
          offerUndo(q, j ? [j] : q.judgments);
        } catch (e) { $("#judged-status").textContent = e.message; }
      });
      return b;
    };
    box.replaceChildren(...data.queries.map((q) => el("div", { class: "judged", "data-query-id": q.query_id },
      el("h3", {}, q.query, " ", forget(q, null)),
      el("p", {}, ...q.judgments.flatMap((j) => [`#${j.doc_id}: ${j.grade} (${j.judge}, ${j.at}) `, forget(q, j), " · "])),
      el("p", { class: "meta" }, q.unjudged_in_top10.length ? `unjudged in today's top 10: ${q.unjudged_in_top10.join(", ")}` : "today's top 10 is judged"),
    )));
    if (!data.queries.length) box.replaceChildren(el("p", {}, "nothing judged yet"));
  } catch (e) { box.replaceChildren(el("p", { class: "flag" }, e.message)); }
}

function offerUndo(q, gone) {
  // A delete can be undone: the judgments go back as they were (the query's id and each grade), one import.
  const status = $("#judged-status");
  const undo = el("button", { type: "button", id: "undo" }, "undo");
  undo.addEventListener("click", async () => {
    try {
      const r = await api("/api/qrels", {
        queries: JSON.stringify({ _id: q.query_id, text: q.query }) + "\n",
        qrels: gone.map((j) => `${q.query_id}\t${j.doc_id}\t${j.grade}`).join("\n") + "\n",
      });
      status.replaceChildren(`restored ${r.imported} judgment${r.imported === 1 ? "" : "s"} of "${q.query}"`);
      loadJudged();
    } catch (e) { status.textContent = e.message; }
  });
  status.replaceChildren(`deleted ${gone.length} judgment${gone.length === 1 ? "" : "s"} of "${q.query}" `, undo);
}

function chart(rows, inForce) {
  // nDCG@10 of RRF across k, one line per weight pair; the setting in force and the best one marked. (RRF only:
  // the table has every method.)
  const rrf = rows.filter((r) => r.fusion === "rrf" && r.parameters && r.parameters.k);
  const weightsOf = (p) => (p.weights ? `${p.weights.bm25}:${p.weights.knn}` : "1:1");
  const series = new Map();
  for (const r of rrf) {
    const w = weightsOf(r.parameters);
    if (!series.has(w)) series.set(w, []);
    series.get(w).push([r.parameters.k, r.ndcg_at_10]);
  }
  const W = 780, H = 300, pad = 48;
  const ks = [...new Set(rrf.map((r) => r.parameters.k))].sort((a, b) => a - b);
  const ys = rrf.map((r) => r.ndcg_at_10);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("id", "ndcg-chart");
  if (!ks.length) return svg;
  const text = (x, y, content, attrs) => {
    const t = document.createElementNS(ns, "text");
    t.setAttribute("x", x); t.setAttribute("y", y); t.setAttribute("font-size", "11");
    for (const [k, v] of Object.entries(attrs || {})) t.setAttribute(k, v);
    t.textContent = content;
    svg.append(t);
    return t;
  };
  const lo = Math.min(...ys), hi = Math.max(...ys) || 1;
  const x = (k) => pad + (ks.indexOf(k) / Math.max(ks.length - 1, 1)) * (W - 2 * pad - 150);
  const y = (v) => H - pad - ((v - lo) / Math.max(hi - lo, 1e-9)) * (H - 2 * pad);
  // Okabe-Ito: told apart by colour-blind readers too, and every one readable on white.
  const colors = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00", "#56B4E9"];
  let n = 0;
  for (const [w, points] of series) {
    points.sort((a, b) => a[0] - b[0]);
    const line = document.createElementNS(ns, "polyline");
    line.setAttribute("fill", "none"); line.setAttribute("stroke", colors[n % colors.length]); line.setAttribute("stroke-width", "2");
    line.setAttribute("points", points.map(([k, v]) => `${x(k)},${y(v)}`).join(" "));
    svg.append(line);
    text(W - 140, 14 + 14 * n, `bm25:knn ${w}`, { fill: colors[n % colors.length], "font-weight": "bold" });
    n += 1;
  }
  const mark = (id, r, label) => {
    const c = document.createElementNS(ns, "circle");
    c.setAttribute("id", id); c.setAttribute("cx", x(r.parameters.k)); c.setAttribute("cy", y(r.ndcg_at_10));
    c.setAttribute("r", "6"); c.setAttribute("fill", "none"); c.setAttribute("stroke", "#000"); c.setAttribute("stroke-width", "2");
    svg.append(c);
    text(x(r.parameters.k) + 8, y(r.ndcg_at_10) - 8, `${label} ${r.ndcg_at_10.toFixed(4)}`);
  };
  const best = rrf.reduce((a, b) => (b.ndcg_at_10 > a.ndcg_at_10 ? b : a));
  mark("chart-best", best, "best");
  const current = inForce && inForce.method === "rrf"
    ? rrf.find((r) => r.parameters.k === inForce.k && weightsOf(r.parameters) === weightsOf(inForce)) : null;
  if (current && current !== best) mark("chart-in-force", current, "in force");
  if (current === best) svg.querySelector("#chart-best + text").textContent += " (in force)";
  for (const k of ks) text(x(k) - 6, H - pad + 16, String(k));
  for (const v of [lo, hi]) text(4, y(v) + 4, v.toFixed(3));
  text(W / 2 - 60, H - 8, "RRF k (x axis)", { id: "chart-x-title" });
  text(4, 14, "nDCG@10 (y axis)", { id: "chart-y-title" });
  return svg;
}

async function measure() {
  const body = $("#measure-table tbody");
  try {
    const data = await api("/api/measure", {});
    const inForce = data.rows.filter((r) => r.mode !== "hybrid" || JSON.stringify(r.parameters) === JSON.stringify(data.in_force));
    body.replaceChildren(...inForce.map((r) => el("tr", { "data-mode": r.mode },
      el("td", {}, r.mode), el("td", {}, r.fusion ? `${r.fusion} (in force)` : "—"),
      el("td", {}, r.ndcg_at_10.toFixed(4)), el("td", {}, r.recall_at_100.toFixed(4)))));
    $("#chart").replaceChildren(el("p", { class: "meta" }, `nDCG@10 of RRF across k over ${data.queries} judged queries (RRF only: the table above has every method)`), chart(data.rows, data.in_force));
  } catch (e) { body.replaceChildren(el("tr", {}, el("td", { class: "flag", colSpan: 4 }, e.message))); }
}

async function tune() {
  const box = $("#tune-result");
  box.replaceChildren(el("p", {}, "tuning…"));
  try {
    const r = await api("/api/tune", { min_queries: Number($("#min-queries").value) || 20 });
    state.tuned = r.recommended || null;  // a "keep" decision recommends nothing: there is nothing to apply
    box.replaceChildren(
      el("p", { id: "tune-decision" }, `decision: ${r.decision} — ${r.reason}`),
      el("p", {}, `current nDCG@10 ${r.current.ndcg} · best of the grid ${r.best.label} ${r.best.ndcg} · cross-validated ${r.cross_validated.ndcg} (gain ${r.cross_validated.gain}, p ${r.cross_validated.p_value}) · ${r.queries} queries`),
      ...r.warnings.map((w) => el("p", { class: "flag" }, w)),
    );
    $("#apply-box").hidden = !state.tuned || !state.info.allow_writes;
    if (state.tuned && !state.info.allow_writes) {
      box.append(el("p", { id: "apply-read-only" }, "this workbench is read-only: start it with --allow-writes to store a setting with the index"));
    }
  } catch (e) { box.replaceChildren(el("p", { class: "flag" }, e.message)); }
}

async function applySetting() {
  const out = $("#apply-status");
  if (!state.tuned) { out.textContent = "nothing to apply: the decision was to keep the setting in force"; out.className = "flag"; return; }
  if (!$("#apply-confirm").checked) {
    out.textContent = "tick the box above to confirm: every search of this index will use this setting";
    out.className = "flag";
    return;
  }
  try {
    const r = await api("/api/apply", { setting: state.tuned, confirm: $("#apply-confirm").checked });
    out.textContent = `stored with ${r.index}`;
    out.className = "";
  } catch (e) { out.textContent = e.message; out.className = "flag"; }
}

// -- runs: the judged queries with one setting, kept; two of them compared query by query -------------------

async function loadRuns() {
  const body = $("#runs-table tbody");
  try {
    const data = await api("/api/runs");
    body.replaceChildren(...data.runs.map((r, n) => {
      const forget = el("button", { type: "button", class: "forget", title: `delete the run ${r.name}` }, "×");
      forget.addEventListener("click", async () => {
        try { await api("/api/runs/forget", { name: r.name }); loadRuns(); } catch (e) { say(e.message, true); }
      });
      return el("tr", { "data-run": r.name },
        el("td", {}, el("input", { type: "radio", name: "run-a", value: r.name, checked: n === 1 })),
        el("td", {}, el("input", { type: "radio", name: "run-b", value: r.name, checked: n === 0 })),
        el("td", {}, r.name), el("td", {}, r.label), el("td", {}, String(r.queries)),
        el("td", {}, r.mean_ndcg.toFixed(4)), el("td", {}, r.at), el("td", {}, forget));
    }));
  } catch (e) { body.replaceChildren(el("tr", {}, el("td", { class: "flag", colSpan: 8 }, e.message))); }
}

async function createRun() {
  const out = $("#run-status");
  const how = $("#run-with").value;
  const body = { name: $("#run-name").value };
  if (how === "bm25" || how === "knn") body.mode = how;
  if (how === "form") {
    if (!$("#k").value) { out.textContent = "search in the compare view first: its form holds the fusion to run"; out.className = "flag"; return; }
    const f = fusion();
    body.setting = { method: f.method, k: f.k || 60, weights: f.weights, window: f.window || 100 };
  }
  out.textContent = "running the judged queries…"; out.className = "";
  try {
    const r = await api("/api/runs/create", body);
    out.textContent = `${r.name}: nDCG@10 ${r.mean_ndcg.toFixed(4)} over ${r.queries} queries`;
    loadRuns();
  } catch (e) { out.textContent = e.message; out.className = "flag"; }
}

function deltaChart(rows) {
  // One bar per query, best gain first: B's nDCG@10 minus A's. Axis titles; zero marked.
  const ns = "http://www.w3.org/2000/svg";
  const w = 640, h = 220, left = 56, bottom = 40, top = 10;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("id", "runs-chart"); svg.setAttribute("width", w); svg.setAttribute("height", h);
  const node = (tag, attrs, text) => {
    const e = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.append(e);
    return e;
  };
  const span = Math.max(0.05, ...rows.map((r) => Math.abs(r.delta)));
  const y = (d) => top + (h - bottom - top) / 2 - (d / span) * (h - bottom - top) / 2;
  const step = (w - left - 10) / Math.max(rows.length, 1);
  node("line", { x1: left, x2: w - 10, y1: y(0), y2: y(0), stroke: "#555" });
  rows.forEach((r, n) => {
    const x = left + n * step;
    node("rect", { x: x + step * 0.1, width: Math.max(step * 0.8, 1), y: Math.min(y(0), y(r.delta)), height: Math.abs(y(r.delta) - y(0)) || 1,
      fill: r.delta > 0 ? "#0072b2" : r.delta < 0 ? "#d55e00" : "#999" }).append(Object.assign(document.createElementNS(ns, "title"), { textContent: `${r.query}: ${r.a} → ${r.b}` }));
  });
  node("text", { x: left - 6, y: y(span) + 4, "text-anchor": "end", "font-size": 11 }, `+${span.toFixed(2)}`);
  node("text", { x: left - 6, y: y(-span) + 4, "text-anchor": "end", "font-size": 11 }, `−${span.toFixed(2)}`);
  node("text", { id: "runs-chart-x-title", x: (w + left) / 2, y: h - 8, "text-anchor": "middle", "font-size": 12 }, "judged queries, best gain first (blue: B better, orange: A better)");
  node("text", { id: "runs-chart-y-title", x: 12, y: (h - bottom) / 2, "text-anchor": "middle", "font-size": 12, transform: `rotate(-90 12 ${(h - bottom) / 2})` }, "nDCG@10, B − A");
  return svg;
}

async function compareRuns() {
  const box = $("#runs-comparison");
  const a = document.querySelector('input[name="run-a"]:checked');
  const b = document.querySelector('input[name="run-b"]:checked');
  if (!a || !b) { box.replaceChildren(el("p", { class: "flag" }, "choose a run A and a run B (make two runs first)")); return; }
  try {
    const c = await api("/api/runs/compare", { a: a.value, b: b.value });
    const table = el("table", { id: "runs-delta-table" }, el("thead", {}, el("tr", {}, ...["query", `A: ${c.a.name}`, `B: ${c.b.name}`, "B − A"].map((t) => el("th", {}, t)))),
      el("tbody", {}, ...c.rows.map((r) => el("tr", { "data-query-id": r.query_id, class: r.delta > 0 ? "win" : r.delta < 0 ? "loss" : "" },
        el("td", {}, r.query), el("td", {}, r.a.toFixed(4)), el("td", {}, r.b.toFixed(4)), el("td", {}, (r.delta > 0 ? "+" : "") + r.delta.toFixed(4))))));
    box.replaceChildren(
      el("p", { id: "runs-summary" }, `B (${c.b.label}) against A (${c.a.label}) over ${c.queries} queries: mean nDCG@10 ${c.mean_a.toFixed(4)} → ${c.mean_b.toFixed(4)}; B wins ${c.wins}, loses ${c.losses}, ties ${c.ties}`
        + (c.only_in_a || c.only_in_b ? ` (${c.only_in_a} queries only in A, ${c.only_in_b} only in B: judged since)` : "")),
      deltaChart(c.rows), table);
  } catch (e) { box.replaceChildren(el("p", { class: "flag" }, e.message)); }
}

async function traffic(kind) {
  const body = $("#traffic-table tbody");
  try {
    const data = await api(`/api/traffic?kind=${encodeURIComponent(kind)}`);
    $("#traffic-status").textContent = data.enabled ? `${data.data_stream}` : `no telemetry in ${data.data_stream} (ES_TELEMETRY=true ships it)`;
    body.replaceChildren(...data.searches.map((s) => {
      const rerun = el("button", { type: "button", disabled: !s.query }, s.query ? "re-run" : "text not recorded");
      rerun.addEventListener("click", () => { $("#query").value = s.query; $("#mode").value = s.mode || "hybrid"; show("compare"); compare(); });
      return el("tr", {}, el("td", {}, s.at || ""), el("td", {}, s.query || s.query_hash || ""), el("td", {}, s.mode || ""),
        el("td", {}, String(s.ms)), el("td", {}, String(s.hits ?? "")), el("td", {}, s.degraded ? `yes (${s.degraded_reason})` : ""),
        el("td", {}, (s.filters || []).join(", ")), el("td", {}, rerun));
    }));
  } catch (e) { $("#traffic-status").textContent = e.message; }
}

async function importQrels() {
  // The button is off while the import runs (one bulk write); an error is styled and said where the button is.
  const button = $("#import"), status = $("#import-status");
  const lines = $("#import-qrels").value.split("\n").filter((l) => l.trim()).length;
  button.disabled = true;
  status.className = "";
  status.textContent = `importing ${lines} lines…`;
  try {
    const r = await api("/api/qrels", { queries: $("#import-queries").value, qrels: $("#import-qrels").value });
    status.textContent = `imported ${r.imported} judgments of ${r.queries} queries`;
    loadJudged();
  } catch (e) {
    status.textContent = `nothing imported: ${e.message}`;
    status.className = "flag";
  } finally { button.disabled = false; }
}

function show(tab) {
  document.querySelectorAll(".tab").forEach((b) => b.classList.toggle("active", b.dataset.tab === tab));
  document.querySelectorAll(".panel").forEach((p) => { p.hidden = p.id !== `tab-${tab}`; });
  if (tab === "judged") loadJudged();
  if (tab === "measure") loadRuns();
}

// The filter's example and the "one per" choices come from the fields this index's documents have values in
// (they were the demo corpus's ticker, source and doc_type on any index).
function offerFields(fields) {
  const names = Object.keys(fields);
  const keyword = names.find((n) => fields[n] === "keyword");
  const date = names.find((n) => fields[n] === "date");
  const example = [keyword && `${keyword}=…`, date && `${date}>=2024-01-01`].filter(Boolean).join(", ");
  $("#filters").placeholder = example || "key=value (no document field holds values here)";
  $("#group-by").replaceChildren(el("option", { value: "" }, "—"),
    ...names.filter((n) => fields[n] === "keyword").map((n) => el("option", { value: n }, n)));
}

async function start() {
  try {
    state.info = await api("/api/info");
  } catch (e) { say(e.message, true); return; }
  const i = state.info;
  $("#where").textContent = `index ${i.index}` + (i.tenant_id ? ` · tenant ${i.tenant_id}` : "") + (i.allow_writes ? " · writes allowed" : " · read-only");
  $("#tenant-box").hidden = !(i.multi_tenant && !i.tenant_id);
  showInForce(i.fusion, i.fusion_sources);
  offerFields(i.fields || {});
  document.querySelectorAll(".tab").forEach((b) => b.addEventListener("click", () => show(b.dataset.tab)));
  $("#search-form").addEventListener("submit", (e) => { e.preventDefault(); compare(); });
  document.addEventListener("keydown", onKey);
  $("#fusion-form").addEventListener("submit", (e) => { e.preventDefault(); refuse(); });
  $("#rearrange").addEventListener("click", () => compare({
    fusion: fusion(), diversity: Number($("#diversity").value) || 0, group_by: $("#group-by").value || null,
  }));
  $("#reload-judged").addEventListener("click", loadJudged);
  $("#import").addEventListener("click", importQrels);
  $("#measure").addEventListener("click", measure);
  $("#tune").addEventListener("click", tune);
  $("#apply").addEventListener("click", applySetting);
  $("#run-form").addEventListener("submit", (e) => { e.preventDefault(); createRun(); });
  $("#runs-compare").addEventListener("click", compareRuns);
  document.querySelectorAll(".traffic").forEach((b) => b.addEventListener("click", () => traffic(b.dataset.kind)));
  document.body.dataset.ready = "true";
}

start();
