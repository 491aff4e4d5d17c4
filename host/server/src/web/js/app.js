// weft's web view: runs, a run's live DAG, waits answered by forms,
// templates started by forms. Everything comes from /api/v1; updates come
// from its server-sent-event streams (read with fetch, so the bearer token
// goes in a header, never in a URL).
"use strict";

const API = "/api/v1";
const main = document.getElementById("main");
let stop = new AbortController(); // the current page's streams

function token() { return sessionStorage.getItem("weft-token") || ""; }

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (token()) h["Authorization"] = "Bearer " + token();
  return h;
}

async function api(path, opts) {
  opts = opts || {};
  const res = await fetch(API + path, {
    method: opts.method || "GET",
    headers: headers(opts.body ? { "content-type": "application/json" } : {}),
    body: opts.body ? JSON.stringify(opts.body) : undefined,
  });
  if (res.status === 401) { askToken(); throw new Error("unauthorized"); }
  const text = await res.text();
  let body; try { body = JSON.parse(text); } catch (_) { body = text; }
  return { status: res.status, body };
}

function askToken() {
  stop.abort();
  main.innerHTML = "";
  const f = el("form", { id: "token-form" },
    el("p", {}, "This weft serve needs its token (the --token it was started with)."),
    el("input", { type: "password", name: "token", placeholder: "token", autocomplete: "off" }),
    el("button", { type: "submit" }, "Use"));
  f.onsubmit = (e) => { e.preventDefault(); sessionStorage.setItem("weft-token", f.token.value); route(); };
  main.append(f);
}

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v; else if (k.startsWith("data-")) e.setAttribute(k, v); else e[k] = v;
  }
  for (const k of kids) if (k != null) e.append(k.nodeType ? k : String(k));
  return e;
}

function state(s) { return el("span", { class: "state s-" + s, "data-state": s }, s); }
// A value as JSON; the box scrolls past 16 lines, so it takes the keyboard
// focus (a region that scrolls must be reachable without a mouse).
function json(v) { return el("pre", { tabIndex: 0 }, JSON.stringify(v, null, 2)); }
function short(t) { return t ? t.replace("T", " ").replace(/\.\d+Z$/, "Z") : ""; }

// Server-sent events over fetch: calls onEvent({id, event, data}) until the
// stream ends; reconnects after a drop, resuming after the last id.
async function sse(path, onEvent, signal) {
  let last = null;
  for (let tries = 0; !signal.aborted && tries < 100; tries++) {
    try {
      const h = headers({ accept: "text/event-stream" });
      if (last !== null) h["Last-Event-ID"] = last;
      const res = await fetch(API + path, { headers: h, signal });
      if (res.status === 401) { askToken(); return; }
      const reader = res.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return; // the stream ended: the run ended
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
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

function debounce(f, ms) { let t = null; return () => { clearTimeout(t); t = setTimeout(f, ms); }; }

// ---- runs list -----------------------------------------------------------

async function runsPage(q) {
  const filters = el("form", { class: "filters", id: "filters" },
    el("label", {}, "State ", el("select", { name: "state" }, ...["", "submitted", "working", "input-required", "auth-required", "completed", "failed", "canceled", "rejected", "recording"].map((s) => el("option", { value: s, selected: q.get("state") === s }, s || "any")))),
    " ", el("label", {}, "Template ", el("input", { name: "template", value: q.get("template") || "" })),
    " ", el("button", { type: "submit" }, "Filter"));
  filters.onsubmit = (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    if (filters.state.value) p.set("state", filters.state.value);
    if (filters.template.value) p.set("template", filters.template.value);
    location.hash = "#/?" + p.toString();
  };
  const table = el("table", { id: "runs" });
  main.replaceChildren(el("h2", {}, "Runs"), filters, table);
  const load = async () => {
    const p = new URLSearchParams(q); p.set("limit", "100");
    const { body } = await api("/runs?" + p.toString());
    table.replaceChildren(el("tr", {}, el("th", {}, "run"), el("th", {}, "template"), el("th", {}, "state"), el("th", {}, "created"), el("th", {}, "updated")),
      ...body.runs.map((r) => el("tr", { "data-run": r.id },
        el("td", {}, el("a", { href: "#/runs/" + r.id }, r.id)), el("td", {}, r.template),
        el("td", {}, state(r.state)), el("td", {}, short(r.created_at)), el("td", {}, short(r.updated_at)))));
  };
  await load();
  const again = debounce(load, 100);
  sse("/stream", () => again(), stop.signal);
}

// ---- the DAG ---------------------------------------------------------------

function dag(graph) {
  const W = 150, H = 34, GX = 60, GY = 22, PAD = 16;
  const rows = {};
  const pos = {};
  for (const n of graph.nodes) {
    const r = rows[n.layer] = (rows[n.layer] || 0) + 1;
    pos[n.name] = { x: PAD + n.layer * (W + GX), y: PAD + (r - 1) * (H + GY) };
  }
  const layers = Math.max(0, ...graph.nodes.map((n) => n.layer)) + 1;
  const height = Math.max(1, ...Object.values(rows)) * (H + GY) + PAD * 2;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("class", "dag");
  svg.setAttribute("width", layers * (W + GX) + PAD * 2);
  svg.setAttribute("height", height);
  svg.innerHTML = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#607d8b"/></marker></defs>';
  for (const e of graph.edges) {
    const a = pos[e.from], b = pos[e.to];
    if (!a || !b) continue;
    const line = document.createElementNS(ns, "path");
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
    line.setAttribute("d", `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}`);
    line.setAttribute("fill", "none");
    line.setAttribute("stroke", e.on === "failure" ? "#c62828" : "#607d8b");
    if (e.on !== "success") line.setAttribute("stroke-dasharray", "4 3");
    line.setAttribute("marker-end", "url(#arrow)");
    svg.append(line);
    if (e.label) {
      // `failure`, `skipped`, `when @check.ok eq true`: said on the edge.
      const title = document.createElementNS(ns, "title");
      title.textContent = e.label;
      line.append(title);
      const t = document.createElementNS(ns, "text");
      t.setAttribute("x", (x1 + x2) / 2);
      t.setAttribute("y", (y1 + y2) / 2 - 3);
      t.setAttribute("class", "edge-label");
      t.setAttribute("text-anchor", "middle");
      t.textContent = e.label.length > 24 ? e.label.slice(0, 23) + "…" : e.label;
      svg.append(t);
    }
  }
  for (const n of graph.nodes) {
    const g = document.createElementNS(ns, "g");
    g.setAttribute("data-step", n.name);
    g.setAttribute("data-state", n.state);
    g.setAttribute("class", "node s-" + n.state);
    const p = pos[n.name];
    g.innerHTML = `<rect x="${p.x}" y="${p.y}" width="${W}" height="${H}" rx="6" fill="${colour(n.state)}" stroke="#90a4ae"/>` +
      `<text x="${p.x + 8}" y="${p.y + 15}"></text><text x="${p.x + 8}" y="${p.y + 28}" fill="#546e7a"></text>`;
    const [t1, t2] = g.querySelectorAll("text");
    t1.textContent = n.name;
    t2.textContent = `${n.action} · ${n.state}${n.attempts > 1 ? " · " + n.attempts + " attempts" : ""}`;
    svg.append(g);
  }
  return svg;
}

function colour(s) {
  return { pending: "#eceff1", running: "#bbdefb", waiting: "#fff9c4", retrying: "#ffe0b2", succeeded: "#c8e6c9",
    failed: "#ffcdd2", skipped: "#e0e0e0", canceled: "#d7ccc8" }[s] || "#fff";
}

// ---- forms from JSON Schemas ------------------------------------------------

// A form for a value matching `schema`: one field per property of an
// object schema (checkbox, number, select, text), else one JSON box.
// `read()` gives the value; `errors(problems, prefix)` shows each problem
// at its field.
let fieldIds = 0;
function schemaForm(schema, label) {
  const box = el("div", { class: "schema-form" });
  // Each label names its input (`for`), so a screen reader reads them together.
  const labelled = (text, input) => {
    input.id = "field-" + (++fieldIds);
    return el("label", { htmlFor: input.id }, text);
  };
  const props = schema && schema.type === "object" && schema.properties;
  const fields = {};
  if (props) {
    for (const [name, p] of Object.entries(props)) {
      let input;
      if (p.type === "boolean") input = el("input", { type: "checkbox", name });
      else if (p.enum) input = el("select", { name }, ...p.enum.map((v) => el("option", { value: JSON.stringify(v) }, String(v))));
      else if (p.type === "integer" || p.type === "number") input = el("input", { type: "text", name, inputMode: "numeric" });
      else if (p.type === "string") input = el("input", { type: "text", name });
      else input = el("textarea", { name, rows: 2, cols: 40 });
      const err = el("span", { class: "error", "data-field": name });
      fields[name] = { input, p, err };
      const req = (schema.required || []).includes(name) ? " *" : "";
      box.append(el("div", { class: "field" }, labelled(name + req, input), input, err,
        p.description ? el("small", {}, " " + p.description) : null));
    }
  } else {
    const input = el("textarea", { name: "json", rows: 4, cols: 50, value: "{}" });
    const err = el("span", { class: "error", "data-field": "" });
    fields[""] = { input, p: {}, err };
    box.append(el("div", { class: "field" }, labelled(label || "JSON", input), input, err));
  }
  const read = () => {
    if (fields[""]) return JSON.parse(fields[""].input.value || "null");
    const out = {};
    for (const [name, { input, p }] of Object.entries(fields)) {
      if (p.type === "boolean") { out[name] = input.checked; continue; }
      const v = input.value;
      if (v === "") continue;
      if (p.enum) out[name] = JSON.parse(v);
      else if (p.type === "integer" || p.type === "number") out[name] = isNaN(Number(v)) ? v : Number(v);
      else if (p.type === "string") out[name] = v;
      else { try { out[name] = JSON.parse(v); } catch (_) { out[name] = v; } }
    }
    return out;
  };
  const errors = (problems, prefix) => {
    for (const f of Object.values(fields)) f.err.textContent = "";
    for (const pr of problems || []) {
      const rest = (pr.path || "").startsWith(prefix) ? pr.path.slice(prefix.length) : pr.path;
      const name = rest.split("/")[1] || "";
      const f = fields[name] || fields[Object.keys(fields)[0]];
      if (f) f.err.textContent += (f.err.textContent ? "; " : "") + pr.message;
    }
  };
  return { box, read, errors };
}

// ---- one run -----------------------------------------------------------------

async function runPage(id) {
  const head = el("section", { id: "run-head" });
  const graph = el("section", { id: "graph" });
  const waits = el("section", { id: "waits" });
  const steps = el("section", { id: "steps" });
  const io = el("section", { id: "io" });
  const arts = el("section", { id: "artifacts" });
  const sent = el("section", { id: "notifications" });
  const log = el("ol", { class: "events", id: "events" });
  main.replaceChildren(head, graph, waits, steps, io, arts, sent, el("section", {}, el("h2", {}, "Events"), log));
  let openForms = "";
  const load = async () => {
    const [{ body: run }, { body: g }] = await Promise.all([api("/runs/" + id), api("/runs/" + id + "/graph")]);
    if (!run.id) { main.replaceChildren(el("p", {}, run.message || "no such run")); return; }
    const finished = ["completed", "failed", "canceled", "rejected"].includes(run.state);
    const cancel = el("button", { id: "cancel", disabled: finished }, "Cancel");
    cancel.onclick = async () => {
      // Canceling cannot be undone: asked first.
      if (!confirm(`Cancel run ${id}? Its running steps are interrupted and it ends canceled.`)) return;
      await api("/runs/" + id + "/cancel", { method: "POST" });
      load();
    };
    // Retry from failure: a new run that keeps what succeeded.
    const retryMsg = el("span", { class: "error", id: "retry-message", role: "status" });
    const retry = finished && run.state !== "completed" ? el("button", { id: "retry" }, "Retry") : null;
    if (retry) retry.onclick = async () => {
      retryMsg.textContent = "";
      let r;
      try { r = await api("/runs/" + id + "/retry", { method: "POST", body: {} }); } catch (err) { retryMsg.textContent = "the server is unreachable: " + err.message; return; }
      if (r.status === 201) location.hash = "#/runs/" + r.body.run.id;
      else retryMsg.textContent = r.body.message || ("HTTP " + r.status);
    };
    const of = run.labels && run.labels["weft/retry-of"];
    head.replaceChildren(el("h2", {}, "Run ", el("code", {}, run.id), " of ", el("a", { href: "#/templates/" + run.template }, run.template)),
      el("p", {}, "State ", el("span", { id: "run-state" }, state(run.state)), " · created ", short(run.created_at), " ", cancel, " ", retry, " ", retryMsg),
      ...(of ? [el("p", { id: "retry-of" }, "A retry of ", el("a", { href: "#/runs/" + of }, of))] : []));
    graph.replaceChildren(el("h2", {}, "Graph"), dag(g));
    // Forms for signal waits (kept while the same waits stay open).
    // A for_each wait has one form per item still waiting.
    const key = run.waits.filter((w) => w.kind === "signal").map((w) => w.step + "#" + (w.item ?? "")).join(",");
    if (key !== openForms) {
      openForms = key;
      waits.replaceChildren(...run.waits.filter((w) => w.kind === "signal").map((w) => waitForm(id, w, load)));
    }
    const t0 = Date.parse(run.created_at);
    const t1 = Math.max(Date.now(), ...run.steps.map((s) => Date.parse(s.ended_at || 0)));
    const span = Math.max(1, t1 - t0);
    steps.replaceChildren(el("h2", {}, "Steps"), el("table", {},
      el("tr", {}, el("th", {}, "step"), el("th", {}, "state"), el("th", {}, "attempts"), el("th", {}, "time"), el("th", {}, "timeline"), el("th", {}, "error")),
      ...run.steps.map((s) => {
        const a = s.started_at ? Date.parse(s.started_at) : null, b = s.ended_at ? Date.parse(s.ended_at) : Date.now();
        const bar = a ? el("div", { class: "bar" }) : null;
        if (bar) { bar.style.marginLeft = ((a - t0) / span * 200) + "px"; bar.style.width = Math.max(2, (b - a) / span * 200) + "px"; }
        return el("tr", { "data-step-row": s.name }, el("td", {}, s.name), el("td", {}, state(s.state)), el("td", {}, s.attempts),
          el("td", {}, a ? (b - a) + " ms" : ""), el("td", { style: "width:210px" }, bar),
          el("td", {}, s.error ? s.error.kind + ": " + s.error.message : ""));
      })));
    io.replaceChildren(...[el("h2", {}, "Input"), json(run.input),
      run.output !== null ? el("div", {}, el("h2", {}, "Output"), json(run.output)) : null,
      run.error ? el("div", { id: "run-error" }, el("h2", {}, "Error"), json(run.error)) : null].filter(Boolean));
    arts.replaceChildren(...(run.artifacts.length ? [el("h2", {}, "Artifacts"), el("ul", {}, ...run.artifacts.map((a) => {
      const link = el("a", { href: "#", "data-artifact": a.name }, a.name);
      link.onclick = async (e) => {
        e.preventDefault();
        const res = await fetch(API + "/runs/" + id + "/artifacts/" + encodeURIComponent(a.name), { headers: headers() });
        const url = URL.createObjectURL(await res.blob());
        const d = el("a", { href: url, download: a.name }); document.body.append(d); d.click(); d.remove();
      };
      return el("li", {}, link, ` ${a.mime}, ${a.size} bytes`);
    }))] : []));
    // Its notifications (the definition's `notify`): where each stands; a
    // failed one can be sent again.
    const notes = run.notifications || [];
    sent.replaceChildren(...(notes.length ? [el("h2", {}, "Notifications"), el("div", { class: "scroll", tabindex: "0" }, el("table", {},
      el("tr", {}, el("th", {}, "on"), el("th", {}, "to"), el("th", {}, "state"), el("th", {}, "tries"), el("th", {}, "error"), el("th", {}, "send again")),
      ...notes.map((n) => {
        const to = n.target.webhook ? "webhook " + n.target.webhook : "tool " + n.target.tool.server + "/" + n.target.tool.name;
        let again = null;
        if (n.state === "failed" && n.attempts > 0) {
          again = el("button", { "data-resend": n.id }, "Resend");
          again.onclick = async () => { await api("/notifications/" + n.id + "/resend", { method: "POST" }); load(); };
        }
        return el("tr", { "data-notification": n.id }, el("td", {}, n.on), el("td", {}, to), el("td", {}, state(n.state)),
          el("td", {}, `${n.attempts}/${n.max_attempts}`), el("td", {}, n.error || ""), el("td", {}, again));
      })))] : []));
  };
  await load();
  const again = debounce(load, 50);
  sse("/runs/" + id + "/events", (ev) => {
    const e = JSON.parse(ev.data);
    log.append(el("li", {}, `${e.seq} ${short(e.at)} ${e.kind}${e.step ? " " + e.step : ""}${said(e)}`));
    again();
  }, stop.signal);
}

// What a `progress` event says: its message, and its data (compact, cut
// at 160 characters); nothing for other events.
function said(e) {
  if (e.kind !== "progress" || !e.data) return "";
  const data = e.data.data === undefined ? "" : " " + JSON.stringify(e.data.data);
  const text = `: ${e.data.message ?? ""}${data}`;
  return text.length > 160 ? text.slice(0, 159) + "…" : text;
}

function waitForm(id, w, reload) {
  const f = schemaForm(w.schema, "data (JSON)");
  const msg = el("span", { class: "error", id: "wait-message" });
  const submit = el("button", { type: "submit" }, "Answer");
  const item = w.item ?? null;
  const title = item === null ? `Step ${w.step} waits` : `Step ${w.step}, item ${item}, waits`;
  const form = el("form", { class: "wait", "data-wait": w.step, "data-item": item ?? "" }, el("h2", {}, title),
    w.prompt ? el("p", {}, w.prompt) : null,
    w.preview === undefined ? null : el("div", { class: "preview" }, el("h3", {}, "What it is about"),
      typeof w.preview === "string" ? el("p", {}, w.preview) : json(w.preview)),
    f.box, submit, msg);
  form.onsubmit = async (e) => {
    e.preventDefault();
    let data;
    try { data = f.read(); } catch (err) { msg.textContent = "not JSON: " + err.message; return; }
    const { status, body } = await api(`/runs/${id}/steps/${encodeURIComponent(w.step)}/signal`, { method: "POST", body: item === null ? { data } : { data, item } });
    if (status === 200) { form.remove(); reload(); return; }
    msg.textContent = body.message || ("HTTP " + status);
    f.errors(body.problems, "/data");
  };
  return form;
}

// ---- templates ------------------------------------------------------------------

async function templatesPage() {
  const { body } = await api("/templates");
  main.replaceChildren(el("h2", {}, "Templates"), el("table", { id: "templates" },
    el("tr", {}, el("th", {}, "template"), el("th", {}, "version"), el("th", {}, "description")),
    ...body.templates.map((t) => el("tr", { "data-template": t.name },
      el("td", {}, el("a", { href: "#/templates/" + t.name }, t.name)), el("td", {}, t.version), el("td", {}, t.description || "")))));
}

async function templatePage(name) {
  const { status, body: t } = await api("/templates/" + encodeURIComponent(name));
  if (status !== 200) { main.replaceChildren(el("p", {}, t.message || "no such template")); return; }
  const f = schemaForm(t.definition.input_schema, "input (JSON)");
  const msg = el("span", { class: "error", id: "start-message" });
  const form = el("form", { id: "start" }, el("h2", {}, "Start a run"), f.box, el("button", { type: "submit" }, "Start"), msg);
  form.onsubmit = async (e) => {
    e.preventDefault();
    let input;
    try { input = f.read(); } catch (err) { msg.textContent = "not JSON: " + err.message; return; }
    const { status, body } = await api("/runs", { method: "POST", body: { template: name, input } });
    if (status === 201) { location.hash = "#/runs/" + body.id; return; }
    msg.textContent = body.message || ("HTTP " + status);
    f.errors(body.problems, "/input");
  };
  main.replaceChildren(...[el("h2", {}, "Template ", el("code", {}, t.name), " v" + t.version),
    t.description ? el("p", {}, t.description) : null, dag(t.graph), form, el("h2", {}, "Definition"), json(t.definition)].filter(Boolean));
}

// ---- routing -------------------------------------------------------------------------

async function route() {
  stop.abort();
  stop = new AbortController();
  const h = location.hash.slice(1) || "/";
  const [path, query] = h.split("?");
  const parts = path.split("/").filter(Boolean);
  try {
    if (parts[0] === "runs" && parts[1]) await runPage(parts[1]);
    else if (parts[0] === "templates" && parts[1]) await templatePage(decodeURIComponent(parts[1]));
    else if (parts[0] === "templates") await templatesPage();
    else await runsPage(new URLSearchParams(query || ""));
  } catch (e) {
    if (e.message !== "unauthorized") main.replaceChildren(el("p", { class: "error" }, "error: " + e.message));
  }
}

window.addEventListener("hashchange", route);
route();
