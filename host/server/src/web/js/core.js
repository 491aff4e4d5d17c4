// What every page of the web view shares: calls to /api/v1 with the
// operator's token, server-sent events read with fetch (so the token goes
// in a header, never in a URL), the connection indicator, and small
// builders (elements, states, values, times, tables that scroll).
"use strict";

export const API = "/api/v1";
export const main = document.getElementById("main");
const conn = document.getElementById("conn");

// The current page's streams: aborted when the page changes.
let stopper = new AbortController();
export function pageSignal() { return stopper.signal; }
export function newPage() { stopper.abort(); stopper = new AbortController(); return stopper.signal; }

function token() { return sessionStorage.getItem("weft-token") || ""; }

export function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token()) h["Authorization"] = "Bearer " + token();
  return h;
}

// What the header's indicator says: `live` (a stream is open),
// `connected` (the server answers), `reconnecting` (a stream dropped),
// `offline` (the server did not answer a request).
export function connection(what) {
  const text = { live: "● live", connected: "● connected", offline: "● server unreachable",
    reconnecting: "● live updates paused, reconnecting…" }[what] || "";
  if (conn.textContent !== text) conn.textContent = text;
  conn.dataset.conn = what || "";
}

// A call to the API: `{status, body}`. A server that does not answer
// throws an Error saying so (and the indicator shows it).
export async function api(path, opts) {
  opts = opts || {};
  let res;
  try {
    res = await fetch(API + path, {
      method: opts.method || "GET",
      headers: headers(opts.body ? { "content-type": "application/json" } : {}),
      body: opts.body ? JSON.stringify(opts.body) : undefined,
    });
  } catch (_) {
    connection("offline");
    throw new Error("the server is unreachable; nothing was changed, try again when it is back");
  }
  // Answered: connected (a live stream says more while it is open).
  if (conn.dataset.conn !== "live" && conn.dataset.conn !== "reconnecting") connection("connected");
  if (res.status === 401) { askToken(); throw new Error("unauthorized"); }
  const text = await res.text();
  let body; try { body = JSON.parse(text); } catch (_) { body = text; }
  return { status: res.status, body };
}

export let onToken = () => {};
export function setOnToken(f) { onToken = f; }

function askToken() {
  newPage();
  const input = el("input", { type: "password", name: "token", id: "token", autocomplete: "off" });
  const f = el("form", { id: "token-form" },
    el("h1", {}, "Token"),
    el("p", {}, "This weft serve needs its token (the --token it was started with)."),
    el("label", { htmlFor: "token" }, "Token "), input, " ",
    el("button", { type: "submit" }, "Use"));
  f.onsubmit = (e) => { e.preventDefault(); sessionStorage.setItem("weft-token", input.value); onToken(); };
  main.replaceChildren(f);
}

export function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k.startsWith("data-") || k.startsWith("aria-") || k === "role") e.setAttribute(k, v);
    else e[k] = v;
  }
  for (const k of kids) if (k != null) e.append(k.nodeType ? k : String(k));
  return e;
}

export function state(s) { return el("span", { class: "state s-" + s, "data-state": s }, s); }

// A value as JSON. Over 12 lines it starts folded (a summary says its
// size); every box has a Copy button. A box that scrolls takes the
// keyboard focus (a scrolling region must be reachable without a mouse).
export function json(v, label) {
  const text = JSON.stringify(v, null, 2) ?? "null";
  const pre = el("pre", { tabIndex: 0 }, text);
  if (label) pre.setAttribute("aria-label", label);
  const copy = el("button", { type: "button", class: "copy" }, "Copy");
  copy.onclick = async () => {
    try { await navigator.clipboard.writeText(text); copy.textContent = "Copied"; } catch (_) { copy.textContent = "Copy failed"; }
    setTimeout(() => { copy.textContent = "Copy"; }, 1500);
  };
  const lines = text.split("\n").length;
  if (lines <= 12) return el("div", { class: "value" }, copy, pre);
  return el("details", { class: "value" }, el("summary", {}, `${lines} lines, ${text.length} characters`), copy, pre);
}

export function short(t) { return t ? t.replace("T", " ").replace(/\.\d+Z$/, "Z") : ""; }

// A span of milliseconds, as a person reads it.
export function took(ms) {
  if (ms == null || isNaN(ms)) return "";
  if (ms < 1000) return ms + " ms";
  if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
  if (ms < 3600000) return Math.floor(ms / 60000) + " min " + Math.round((ms % 60000) / 1000) + " s";
  return Math.floor(ms / 3600000) + " h " + Math.round((ms % 3600000) / 60000) + " min";
}

// A table in a box that scrolls sideways on a narrow screen (the page
// itself never does).
export function table(label, head, rows, attrs) {
  const t = el("table", attrs || {}, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, ...rows));
  return el("div", { class: "scroll", tabIndex: 0, role: "region", "aria-label": label }, t);
}

export const FINISHED = ["completed", "failed", "canceled", "rejected"];

// Server-sent events over fetch: calls onEvent({id, event, data}) until the
// stream ends; reconnects after a drop, resuming after the last id.
export async function sse(path, onEvent, signal) {
  let last = null;
  for (let tries = 0; !signal.aborted && tries < 1000; tries++) {
    try {
      const h = headers({ accept: "text/event-stream" });
      if (last !== null) h["Last-Event-ID"] = last;
      const res = await fetch(API + path, { headers: h, signal });
      if (res.status === 401) { askToken(); return; }
      connection("live");
      tries = 0;
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) { connection("connected"); return; } // the stream ended: the run ended
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i); buf = buf.slice(i + 2);
          const ev = { id: null, event: "message", data: "" };
          for (const line of block.split("\n")) {
            if (line.startsWith("id:")) ev.id = line.slice(3).trim();
            else if (line.startsWith("event:")) ev.event = line.slice(6).trim();
            else if (line.startsWith("data:")) ev.data += line.slice(5).trim();
          }
          if (!ev.data) continue;
          if (ev.id !== null) last = ev.id;
          onEvent(ev);
        }
      }
    } catch (e) {
      if (signal.aborted) return;
      // Only the stream failed (lists may still load): said as such.
      connection("reconnecting");
      await new Promise((r) => setTimeout(r, Math.min(5000, 500 * (tries + 1))));
    }
  }
}

export function debounce(f, ms) { let t = null; return () => { clearTimeout(t); t = setTimeout(f, ms); }; }

// A page with work that would be lost (the editor) guards leaving it:
// `guardLeave(() => true when it may go)`; the next page clears it.
let guard = null;
export function guardLeave(f) { guard = f; }
export function mayLeave() {
  if (!guard || guard()) { guard = null; return true; }
  return false;
}
