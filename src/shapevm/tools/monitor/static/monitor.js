// The monitor page: renders the state that /api/events streams (the same JSON as
// /api/state). Every field of every row is shown: the main ones in columns, the rest under
// "more", so fields that the JIT adds later appear without changes here.
"use strict";

const TOKEN = new URLSearchParams(location.search).get("token");
const MAX_POINTS = 2000;
const latency = {};
let state = null;
let selected = null; // {function, key_text}
let code = null; // {for: "function|key|status", texts: {...}}
let tab = null;
const charts = {};

function api(path, params) {
  const q = new URLSearchParams(params || {});
  if (TOKEN) q.set("token", TOKEN);
  const s = q.toString();
  return path + (s ? "?" + s : "");
}

// -- formatting ----------------------------------------------------------------------------
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "data") for (const [dk, dv] of Object.entries(v)) e.dataset[dk] = dv;
    else e.setAttribute(k, v);
  }
  for (const c of children) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}
const fmt = {
  text: (v) => (v === null || v === undefined || v === "" ? "" : typeof v === "object" ? JSON.stringify(v) : String(v)),
  num: (v) => (v === null || v === undefined ? "" : Number(v).toLocaleString()),
  ms: (v) => (v === null || v === undefined ? "–" : window.formatMs(Number(v))),
  pct: (v) => (v === null || v === undefined ? "" : (100 * v).toFixed(1) + " %"),
  scd: (v) => (v === null || v === undefined ? "" : Number(v).toFixed(2)),
  bytes: (v) => {
    if (v === null || v === undefined) return "–";
    const units = ["B", "KiB", "MiB", "GiB"];
    let x = Number(v), i = 0;
    while (x >= 1024 && i < units.length - 1) { x /= 1024; i++; }
    return (i ? x.toFixed(1) : x) + " " + units[i];
  },
  ago: (v) => (v === null || v === undefined ? "never" : v < 1 ? "now" : v < 90 ? v.toFixed(0) + " s ago" : (v / 60).toFixed(0) + " min ago"),
};
function auto(key, v) {
  if (/_bytes$/.test(key)) return fmt.bytes(v);
  if (/_ms$/.test(key)) return fmt.ms(v);
  if (/rate$/.test(key)) return fmt.pct(v);
  if (typeof v === "number") return fmt.num(v);
  return fmt.text(v);
}
function isLong(v) { return typeof v === "string" && (v.includes("\n") || v.length > 90); }
function bar(fraction, label) {
  const f = Math.max(0, Math.min(1, fraction || 0));
  const i = el("i"); i.style.width = (100 * f).toFixed(1) + "%";
  return el("span", {}, el("span", { class: "bar" }, i), label);
}
function badge(status) { return el("span", { class: "badge " + status }, status); }
function more(row, shown) {
  const parts = [];
  for (const [k, v] of Object.entries(row)) {
    if (shown.has(k) || v === null || v === "" || (Array.isArray(v) && !v.length)) continue;
    const text = isLong(v) ? `(${String(v).split("\n").length} lines: see the variant's fields)` : auto(k, v);
    parts.push(el("span", { class: "muted" }, `${k}: `), text, "  ");
  }
  return el("td", { class: "more" }, ...parts);
}

// -- tables ----------------------------------------------------------------------------------
function table(id, columns, rows, decorate, empty) {
  const t = document.getElementById(id);
  const head = el("tr", {}, ...columns.map((c) => el("th", { class: c.num ? "num" : "" }, c.label)));
  const body = el("tbody");
  if (!rows.length) body.append(el("tr", { class: "empty" }, el("td", { colspan: columns.length }, empty)));
  for (const r of rows) {
    const tr = el("tr", {}, ...columns.map((c) => {
      const td = c.cell ? c.cell(r) : el("td", { class: c.num ? "num" : "" }, (c.fmt || fmt.text)(r[c.key]));
      if (c.nowrap) td.classList.add("nowrap");
      return td;
    }));
    if (decorate) decorate(tr, r);
    body.append(tr);
  }
  t.replaceChildren(el("thead", {}, head), body);
}
const col = (key, label, f, num) => ({ key, label, fmt: f, num, nowrap: true });

const FUNCTION_MAIN = ["function", "calls", "hit_rate", "compiled_calls", "avg_compile_ms", "scd", "variants", "failures", "skip_reason"];
function renderFunctions(rows) {
  const shown = new Set(FUNCTION_MAIN);
  table("functions", [
    col("function", "function"), col("calls", "calls", fmt.num, true),
    { label: "hit rate", nowrap: true, cell: (r) => el("td", {}, bar(r.hit_rate, fmt.pct(r.hit_rate))) },
    col("compiled_calls", "compiled calls", fmt.num, true), col("avg_compile_ms", "avg compile", fmt.ms, true),
    col("scd", "SCD", fmt.scd, true), col("variants", "variants", fmt.num, true),
    col("failures", "failures", fmt.num, true),
    { label: "fallback", cell: (r) => el("td", { class: "reason" }, r.skip_reason ? "stays interpreted: " + r.skip_reason : "") },
    { label: "more", cell: (r) => more(r, shown) },
  ], rows, (tr, r) => {
    tr.dataset.function = r.function;
    if (r.skip_reason) tr.classList.add("bad");
  }, "no jitted function has been called yet");
}

const VARIANT_MAIN = ["function", "key", "key_text", "status", "stage", "compiling_for_ms", "compile_ms", "hits", "last_use_s_ago", "planned_bytes", "naive_bytes", "reason"];
// a failed build of generated C (tier 3): the variant runs on without it, at tier 2
function tier3Failed(r) { return typeof r.tier3 === "string" && r.tier3.startsWith("failed"); }
function isBad(r) { return r.status === "failed" || r.fallback === true || tier3Failed(r) || (r.reason && r.status !== "evicted" && r.status !== "ready"); }
function renderVariants(rows) {
  const shown = new Set(VARIANT_MAIN);
  table("variants", [
    col("function", "function"), col("key_text", "key"),
    { label: "status", nowrap: true, cell: (r) => el("td", {}, badge(r.status), r.stage ? el("span", { class: "muted" }, " " + r.stage + (r.compiling_for_ms !== undefined ? ` (${fmt.ms(r.compiling_for_ms)})` : "")) : null) },
    col("compile_ms", "compile", (v) => (v ? fmt.ms(v) : "–"), true), col("hits", "hits", fmt.num, true),
    col("last_use_s_ago", "last use", fmt.ago),
    { label: "memory planned / naive", nowrap: true, cell: (r) => el("td", {}, r.naive_bytes ? bar(r.planned_bytes / r.naive_bytes, `${fmt.bytes(r.planned_bytes)} / ${fmt.bytes(r.naive_bytes)}`) : "–") },
    { label: "reason", cell: (r) => el("td", { class: "reason" }, r.reason || (tier3Failed(r) ? "generated C (tier 3) " + r.tier3 : "")) },
    { label: "more", cell: (r) => more(r, shown) },
  ], rows, (tr, r) => {
    tr.dataset.function = r.function; tr.dataset.key = r.key_text; tr.dataset.status = r.status;
    if (isBad(r)) tr.classList.add("bad");
    if (r.status === "evicted") tr.classList.add("evicted");
    if (selected && selected.function === r.function && selected.key_text === r.key_text) tr.classList.add("selected");
  }, "no variant yet: a key is compiled once it is hot");
}

function renderQueue(rows) {
  table("queue", [
    col("function", "function"), col("key_text", "key"),
    { label: "status", nowrap: true, cell: (r) => el("td", {}, badge(r.status), r.stage ? el("span", { class: "muted" }, " " + r.stage) : null) },
    col("scd", "SCD", fmt.scd, true),
    { label: "estimated", num: true, cell: (r) => el("td", { class: "num", title: r.estimate_basis }, fmt.ms(r.estimated_ms), el("div", { class: "muted" }, r.estimate_basis)) },
    col("compiling_for_ms", "running for", (v) => (v === undefined ? "" : fmt.ms(v)), true),
  ], rows, null, "empty: nothing waits for a compiler");
}

function renderMemory(rows) {
  const keys = [];
  for (const r of rows) for (const k of Object.keys(r)) if (k !== "pool" && !keys.includes(k)) keys.push(k);
  table("memory", [
    col("pool", "pool"),
    ...keys.map((k) => (k === "used_bytes"
      ? { label: "used", nowrap: true, cell: (r) => el("td", {}, r.used_bytes === undefined ? "" : bar(r.capacity_bytes ? r.used_bytes / r.capacity_bytes : 0, fmt.bytes(r.used_bytes))) }
      : { label: k.replace(/_bytes$/, "").replace(/_/g, " "), num: true, cell: (r) => el("td", { class: "num" }, r[k] === undefined ? "" : auto(k, r[k])) })),
  ], rows, null, "no pool yet");
}

const TOTALS_MAIN = [["calls", "calls"], ["hit_rate", "hit rate"], ["compiled_calls", "compiled calls"], ["compiles", "compiles"], ["avg_compile_ms", "avg compile"], ["failures", "failures"]];
function renderTotals(stats, queue) {
  const boxes = [];
  const box = (label, value, bad) => boxes.push(el("div", { class: "stat" + (bad ? " bad" : "") }, el("b", {}, value), el("span", {}, label)));
  for (const [k, label] of TOTALS_MAIN) box(label, auto(k, stats[k]), k === "failures" && stats[k] > 0);
  box("in the compile queue", String(queue.length));
  for (const [k, v] of Object.entries(stats)) if (!TOTALS_MAIN.some(([m]) => m === k)) box(k.replace(/_/g, " "), auto(k, v), false);
  document.getElementById("totals").replaceChildren(...boxes);
}

// -- the selected variant --------------------------------------------------------------------
function renderDetail() {
  const box = document.getElementById("detail");
  const row = selected && state.variants.find((r) => r.function === selected.function && r.key_text === selected.key_text);
  if (!row) { box.hidden = true; return; }
  box.hidden = false;
  document.getElementById("detail-title").textContent = `${row.function} ${row.key_text}`;
  const fields = Object.entries(row).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, isLong(v) ? el("pre", { class: "code" }, v) : auto(k, v))));
  document.getElementById("detail-fields").replaceChildren(...fields);
  const version = `${row.function}|${row.key_text}|${row.status}|${row.compile_ms}|${row.tier3}`; // tier 3 adds generated C
  if (!code || code.for !== version) {
    code = { for: version, texts: null };
    fetch(api("/api/code", { function: row.function, key: row.key_text }))
      .then((r) => r.json())
      .then((j) => { if (code.for === version) { code.texts = j.error ? { error: j.error } : j; renderCode(); } })
      .catch((e) => { code.texts = { error: String(e) }; renderCode(); });
  }
  renderCode();
}

function renderCode() {
  const texts = (code && code.texts) || { loading: "…" };
  const names = Object.keys(texts);
  const shown = names.includes(tab) ? tab : names[0]; // the chosen tab stays chosen across a reload
  document.getElementById("tabs").replaceChildren(...names.map((n) => {
    const b = el("button", { type: "button", class: n === shown ? "on" : "", data: { tab: n } }, n);
    b.addEventListener("click", () => { tab = n; renderCode(); });
    return b;
  }));
  document.getElementById("code").textContent = fmt.text(texts[shown]);
}

// -- latency ---------------------------------------------------------------------------------
function mergeLatency(points, incremental) {
  if (!incremental) for (const k of Object.keys(latency)) delete latency[k];
  for (const [fn, pts] of Object.entries(points || {})) {
    const list = (latency[fn] = (latency[fn] || []).concat(pts));
    if (list.length > MAX_POINTS) list.splice(0, list.length - MAX_POINTS);
  }
}

function renderCharts() {
  const box = document.getElementById("charts");
  const names = Object.keys(latency).sort();
  if (!names.length) {
    box.replaceChildren(el("p", { class: "muted" }, "no call since this page opened"));
    for (const k of Object.keys(charts)) delete charts[k];
    return;
  }
  for (const name of names) {
    let c = charts[name];
    if (!c || !box.contains(c.figure)) {
      if (!Object.keys(charts).length) box.replaceChildren();
      const canvas = el("canvas", { "aria-label": `latency of ${name}` });
      const caption = el("figcaption");
      const figure = el("figure", { data: { function: name } }, caption, canvas);
      box.append(figure);
      c = charts[name] = { figure, caption, chart: new window.LatencyChart(canvas, tooltip) };
    }
    const pts = latency[name];
    const sorted = pts.map((p) => p[1]).sort((a, b) => a - b);
    const last = pts[pts.length - 1];
    c.caption.replaceChildren(name, el("span", { class: "muted" },
      `   last ${fmt.ms(last[1])} (${last[2]}) · median ${fmt.ms(sorted[sorted.length >> 1])} · ${pts.length} calls`));
    c.chart.draw(pts);
  }
}

function tooltip(hit) {
  const t = document.getElementById("tooltip");
  if (!hit) { t.hidden = true; return; }
  const [time, ms, mode, shapes] = hit.point;
  t.textContent = `${fmt.ms(ms)} · ${mode} · ${shapes || "no arrays"} · ${new Date(time * 1000).toLocaleTimeString()}`;
  t.style.left = hit.clientX + 12 + "px"; t.style.top = hit.clientY + 12 + "px"; t.hidden = false;
}

// -- the stream ------------------------------------------------------------------------------
function render(s) {
  state = s;
  mergeLatency(s.latency, s.latency_incremental);
  document.getElementById("proc").textContent = `pid ${s.pid} · ${new Date(s.time * 1000).toLocaleTimeString()}`;
  const errors = document.getElementById("errors");
  errors.hidden = !(s.errors && s.errors.length);
  errors.textContent = (s.errors || []).map((e) => "could not read " + e).join("\n");
  renderTotals(s.stats, s.queue);
  renderFunctions(s.functions);
  renderVariants(s.variants);
  renderQueue(s.queue);
  renderMemory(s.memory);
  renderDetail();
  renderCharts();
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
}

function connection(text, stateName) {
  const c = document.getElementById("conn");
  c.textContent = text; c.dataset.state = stateName;
}

function connect() {
  const source = new EventSource(api("/api/events"));
  source.addEventListener("open", () => connection("live", "live"));
  source.addEventListener("state", (e) => render(JSON.parse(e.data)));
  source.addEventListener("error", () => {
    connection("connection lost: retrying", "lost");
    if (source.readyState === EventSource.CLOSED) setTimeout(connect, 2000);
  });
}

document.getElementById("variants").addEventListener("click", (e) => {
  const tr = e.target.closest("tr[data-key]");
  if (!tr) return;
  selected = { function: tr.dataset.function, key_text: tr.dataset.key };
  code = null;
  renderVariants(state.variants);
  renderDetail();
});
document.getElementById("detail-close").addEventListener("click", () => {
  selected = null;
  renderVariants(state.variants);
  renderDetail();
});
window.addEventListener("resize", renderCharts);
connect();
