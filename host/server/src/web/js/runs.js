// The runs list: searchable (id, template, state, key, label, parent,
// time window), paged with the API's cursor, newest first, with how long
// each run took, why it failed, and its parent. The first page follows
// the server's run stream live; later pages hold still while read.
"use strict";

import { api, el, main, state, short, took, table, sse, debounce, FINISHED, pageSignal } from "./core.js";

const STATES = ["", "submitted", "working", "input-required", "auth-required", "completed", "failed", "canceled", "rejected", "recording"];
const SEARCH = ["state", "template_contains", "key", "label", "parent", "created_from", "created_until"];
const PAGE = 50;


// `<input type=datetime-local>` holds local time; the API takes RFC 3339.
function toRfc(local) { return local ? new Date(local).toISOString() : ""; }
function toLocal(rfc) {
  if (!rfc) return "";
  const d = new Date(rfc);
  return isNaN(d) ? "" : new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
}

function field(label, input) {
  input.id = "search-" + input.name;
  return el("span", { class: "search-field" }, el("label", { htmlFor: input.id }, label), input);
}

export async function runsPage(q) {
  // The cursors of the pages before this one, in the address (`prev`), so
  // Back, Forward and a kept link show the same page with its number.
  const newer = q.get("cursor") ? (q.get("prev") || "").split(",").filter((c, i) => c || i === 0) : [];
  const f = el("form", { class: "filters", id: "filters", role: "search" },
    field("Run id", el("input", { name: "id", placeholder: "r_…", size: 16 })),
    field("State", el("select", { name: "state" }, ...STATES.map((s) => el("option", { value: s, selected: q.get("state") === s }, s || "any")))),
    field("Template", el("input", { name: "template_contains", value: q.get("template_contains") || "", size: 14 })),
    field("Key", el("input", { name: "key", value: q.get("key") || "", size: 10 })),
    field("Label", el("input", { name: "label", value: q.get("label") || "", placeholder: "key:value", size: 14 })),
    field("Parent", el("input", { name: "parent", value: q.get("parent") || "", placeholder: "r_…", size: 16 })),
    field("Created from", el("input", { name: "created_from", type: "datetime-local", value: toLocal(q.get("created_from")) })),
    field("until", el("input", { name: "created_until", type: "datetime-local", value: toLocal(q.get("created_until")) })),
    el("button", { type: "submit" }, "Search"), " ", el("a", { href: "#/", id: "clear" }, "Clear"));
  const msg = el("p", { class: "error", id: "search-message", role: "status" });
  f.onsubmit = (e) => {
    e.preventDefault();
    const id = f.elements.id.value.trim();
    if (id) { location.hash = "#/runs/" + encodeURIComponent(id); return; }
    const p = new URLSearchParams();
    for (const name of SEARCH) {
      let v = f.elements[name].value.trim();
      if (name.startsWith("created_")) v = toRfc(v);
      if (v) p.set(name, v);
    }
    location.hash = "#/?" + p.toString();
  };
  const list = el("div", { id: "runs-list" });
  const pager = el("nav", { class: "pager", "aria-label": "pages of runs" });
  main.replaceChildren(el("h1", {}, "Runs"), f, msg, list, pager);
  const load = async () => {
    const p = new URLSearchParams(q);
    p.delete("prev");
    p.set("limit", String(PAGE));
    const { status, body } = await api("/runs?" + p.toString());
    if (status !== 200) { msg.textContent = `${body.message || "HTTP " + status}${body.path ? " (at " + body.path + ")" : ""}`; return; }
    msg.textContent = "";
    list.replaceChildren(body.runs.length ? runsTable(body.runs) : el("p", { id: "no-runs" }, "No runs match."));
    const go = (cursor, before) => {
      const n = new URLSearchParams(q);
      n.delete("cursor"); n.delete("prev");
      if (cursor) { n.set("cursor", cursor); n.set("prev", before.join(",")); }
      location.hash = "#/?" + n.toString();
    };
    const prev = el("button", { type: "button", id: "newer", disabled: !q.get("cursor") }, "← Newer");
    prev.onclick = () => go(newer[newer.length - 1] || "", newer.slice(0, -1));
    const next = el("button", { type: "button", id: "older", disabled: !body.next }, "Older →");
    next.onclick = () => go(body.next, [...newer, q.get("cursor") || ""]);
    pager.replaceChildren(prev, " ", next, ` page ${newer.length + 1}, ${body.runs.length} runs`);
  };
  await load();
  if (!q.get("cursor")) sse("/stream", debounce(load, 150), pageSignal());
}

// A table of runs: id, template, state, when, how long, why it failed,
// parent.
export function runsTable(runs) {
  return table("runs", ["run", "template", "state", "created", "took", "error", "labels", "parent"], runs.map((r) => {
    const ended = FINISHED.includes(r.state);
    const ms = Date.parse(ended ? r.updated_at : new Date().toISOString()) - Date.parse(r.created_at);
    const err = r.error ? `${r.error.kind}: ${r.error.message}` : "";
    return el("tr", { "data-run": r.id },
      el("td", {}, el("a", { href: "#/runs/" + r.id }, r.id)),
      el("td", {}, r.template, r.version ? el("small", {}, " v" + r.version) : null),
      el("td", {}, state(r.state)), el("td", { class: "nowrap" }, short(r.created_at)),
      el("td", { class: "nowrap" }, ended ? took(ms) : took(ms) + "…"),
      el("td", { class: "err", title: err }, err.length > 80 ? err.slice(0, 79) + "…" : err),
      el("td", {}, ...Object.entries(r.labels || {}).filter(([k]) => k !== "weft/retry-of").map(([k, v]) =>
        el("a", { class: "label", href: "#/?label=" + encodeURIComponent(k + ":" + v) }, `${k}:${v}`))),
      el("td", {}, r.parent ? el("a", { href: "#/runs/" + r.parent }, r.parent) : ""));
  }), { id: "runs" });
}
