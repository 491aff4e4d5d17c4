// A step's panel (what it was given, what it gave, its attempts with their
// errors, its items by state for a `for_each` step, its log and its
// artifacts) and the run's event log shown a page at a time.
"use strict";

import { el, state, json, short, took, table } from "./core.js";

const EVENTS_PAGE = 100;
// The most lines of a step's own log its panel shows.
const LOG_LINES = 20;

// What a `progress` event says: its message, and its data (compact, cut
// at 160 characters); nothing for other events.
function said(e) {
  if (e.kind === "step.skipped" && e.data && e.data.reason) return `: ${e.data.reason}${e.data.ref ? ` (${e.data.ref} = ${JSON.stringify(e.data.value)})` : ""}`;
  if (e.kind !== "progress" || !e.data) return "";
  const data = e.data.data === undefined ? "" : " " + JSON.stringify(e.data.data);
  const text = `: ${e.data.message ?? ""}${data}`;
  return text.length > 160 ? text.slice(0, 159) + "…" : text;
}

// Why a step was skipped, from its `step.skipped` event.
function skipReason(events) {
  const e = [...events].reverse().find((x) => x.kind === "step.skipped");
  const d = (e && e.data) || {};
  const was = d.ref ? ` (${d.ref} was ${JSON.stringify(d.value)})` : "";
  if (d.reason === "edge when") return `skipped: the condition on its edge from ${d.edge} did not hold${was}`;
  if (d.reason === "when") return `skipped: its \`when\` did not hold${was}`;
  if (d.reason) return `skipped: ${d.reason}${was}`;
  return "skipped: a step it needs did not succeed";
}

function line(e) {
  return el("li", { "data-seq": e.seq }, `${e.seq} ${short(e.at)} ${e.kind}${e.step ? " " + e.step : ""}${e.item != null ? "[" + e.item + "]" : ""}${said(e)}`);
}

export function stepPanel(run, s, events, kept, close) {
  const x = el("button", { type: "button", id: "close-step" }, "Close");
  x.onclick = close;
  const h = el("h2", { tabIndex: -1 }, "Step ", el("code", {}, s.name));
  const a = s.started_at ? Date.parse(s.started_at) : null, b = s.ended_at ? Date.parse(s.ended_at) : Date.now();
  const facts = [state(s.state),
    s.items || kept || !s.attempts ? null : ` · ${s.attempts} attempt${s.attempts === 1 ? "" : "s"}`,
    s.state === "skipped" ? ` · ${skipReason(events)}` : null,
    kept ? (run.labels && run.labels["weft/retry-of"] ? " · kept from the run this retries: not run again" : " · its output was given when the run started (a preset): not run")
      : a ? ` · started ${short(s.started_at)}, ${s.ended_at ? "took" : "running for"} ${took(b - a)}` : " · not started",
    s.next_attempt_at ? ` · tries again at ${short(s.next_attempt_at)}` : null,
    s.interruptions ? ` · interrupted ${s.interruptions}×` : null];
  const out = [el("div", { class: "panel-head" }, h, x), s.description ? el("p", {}, s.description) : null, el("p", {}, ...facts)];
  if (s.items) out.push(items(s));
  if (s.input !== undefined) out.push(el("h3", {}, "Input"), json(s.input, `step ${s.name}'s input`));
  if (s.output != null) out.push(el("h3", {}, "Output"), json(s.output, `step ${s.name}'s output`));
  if (s.error) out.push(el("h3", {}, "Error"), el("p", { class: "err", id: "step-error" }, `${s.error.kind}: ${s.error.message}`, s.error.retryable ? " (retryable)" : ""));
  if (s.tries && s.tries.length) out.push(tries(s));
  const arts = run.artifacts.filter((x) => x.step === s.name);
  if (arts.length) out.push(el("h3", {}, "Artifacts"), el("ul", {}, ...arts.map((x) => el("li", {}, `${x.name}${x.item != null ? " (item " + x.item + ")" : ""}, ${x.mime}, ${x.size} bytes`))));
  const logged = events.length > LOG_LINES ? events.slice(-LOG_LINES) : events;
  out.push(el("h3", {}, "Log"), logged.length ? el("ol", { class: "events", id: "step-log" }, ...logged.map(line)) : el("p", {}, "Nothing yet."));
  if (events.length > logged.length) out.push(el("p", {}, `The last ${logged.length} of ${events.length}; the run's event log below has them all (Show: ${s.name}).`));
  return out.filter(Boolean);
}

// A for_each step: its items by state, and which items failed.
function items(s) {
  const c = s.items;
  const total = c.succeeded + c.failed + c.canceled + c.unfinished;
  const failed = [...new Set((s.tries || []).filter((t) => t.state === "failed" && t.item != null).map((t) => t.item))];
  return el("div", { id: "items" }, el("h3", {}, `${total} items`),
    el("ul", { class: "counts" }, ...[["succeeded", c.succeeded], ["failed", c.failed], ["canceled", c.canceled], ["running or waiting", c.unfinished]]
      .map(([w, n]) => el("li", { "data-count": w }, `${n} ${w}`))),
    failed.length ? el("p", {}, "Failed items (of the first attempts listed): ", failed.slice(0, 50).join(", "), failed.length > 50 ? " …" : "") : null);
}

// Its attempts (each item's, for a for_each step), with their errors.
function tries(s) {
  const head = s.items ? ["attempt", "item", "state", "error"] : ["attempt", "state", "error"];
  const rows = s.tries.map((t) => el("tr", { "data-try": t.attempt },
    el("td", {}, t.attempt), s.items ? el("td", {}, t.item ?? "") : null, el("td", {}, state(t.state)),
    el("td", { class: "err" }, t.error ? `${t.error.kind}: ${t.error.message}` : "")));
  const t = table(`step ${s.name}'s attempts`, head, rows);
  // Many attempts (a for_each step's, say) start folded.
  return rows.length > 10 ? el("details", { id: "tries" }, el("summary", {}, `Attempts (${rows.length}${rows.length === 100 ? ", the first 100" : ""})`), t)
    : el("div", { id: "tries" }, el("h3", {}, "Attempts"), t);
}

// The run's events, kept as they arrive and shown a page at a time
// (filtered by step); the last page follows new events.
export class EventLog {
  constructor(box) {
    this.box = box;
    this.events = [];
    this.page = null; // null: the last page
    this.step = "";
    this.draw = debounced(() => this.render(), 100);
  }
  add(e) { this.events.push(e); this.draw(); }
  of(step) { return this.events.filter((e) => e.step === step); }
  render() {
    const shown = this.step ? this.of(this.step) : this.events;
    const pages = Math.max(1, Math.ceil(shown.length / EVENTS_PAGE));
    const page = this.page === null ? pages - 1 : Math.min(this.page, pages - 1);
    const steps = [...new Set(this.events.map((e) => e.step).filter(Boolean))];
    const pick = el("select", { id: "events-step" }, el("option", { value: "" }, "every step"),
      ...steps.map((s) => el("option", { value: s, selected: s === this.step }, s)));
    pick.onchange = () => { this.step = pick.value; this.page = null; this.render(); };
    const go = (p) => { this.page = p >= pages - 1 ? null : p; this.render(); };
    const btn = (text, id, p, off) => { const b = el("button", { type: "button", id, disabled: off }, text); b.onclick = () => go(p); return b; };
    this.box.replaceChildren(el("h2", {}, "Events"),
      el("div", { class: "pager" }, el("label", { htmlFor: "events-step" }, "Show "), pick, " ",
        btn("« First", "events-first", 0, page === 0), btn("‹ Earlier", "events-earlier", page - 1, page === 0),
        btn("Later ›", "events-later", page + 1, page >= pages - 1), btn("Latest »", "events-latest", pages - 1, page >= pages - 1),
        el("span", { id: "events-where" }, ` ${shown.length ? page * EVENTS_PAGE + 1 : 0}–${Math.min(shown.length, (page + 1) * EVENTS_PAGE)} of ${shown.length}`)),
      el("ol", { class: "events", id: "events" }, ...shown.slice(page * EVENTS_PAGE, (page + 1) * EVENTS_PAGE).map(line)));
  }
}

function debounced(f, ms) { let t = null; return () => { if (t === null) t = setTimeout(() => { t = null; f(); }, ms); }; }
