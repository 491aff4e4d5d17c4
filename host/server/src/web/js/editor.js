// The template editor (#/templates/NAME/edit, #/new): each step as a form
// (action and its plugin, tool or template from the catalog; input with
// refs offered from the run's input and the other steps' output schemas;
// `when` as ref, operator and value; edges with `on` and conditions;
// for_each/where; retry; timeout), the definition's JSON beside it, both
// kept in step; checked by the API's one validation as you type (each
// problem at its field); saved as the template's next version.
"use strict";

import { api, el, main, guardLeave } from "./core.js";
import { dagView } from "./dag.js";

const KINDS = ["code", "tool", "agent", "wait", "sleep", "workflow", "return"];
const OPS = ["eq", "neq", "gt", "gte", "lt", "lte", "in", "exists"];
const ONS = ["success", "failure", "skipped", "always"];
let ids = 0;

// A literal as one line of text, and back: `@…` stays a ref, JSON reads
// as JSON (numbers, true, {…}), anything else is a string.
export function toText(v) { return v === undefined ? "" : typeof v === "string" ? v : JSON.stringify(v); }
export function fromText(s) {
  if (s === "") return undefined;
  if (s.startsWith("@")) return s;
  try { return JSON.parse(s); } catch (_) { return s; }
}
function put(obj, key, v) { if (v === undefined) delete obj[key]; else obj[key] = v; }
function kindOf(s) { return KINDS.find((k) => s[k] !== undefined) || "code"; }

// The canonical form the editor works on: `return: VALUE` is `return:
// true` with `input` (what weft stores anyway).
function normal(def) {
  for (const s of def.steps || []) {
    if (s.return !== undefined && s.return !== true) { s.input = s.return; s.return = true; }
  }
  return def;
}

// A condition (`when`, an edge's `when`, `where`) as three fields.
function condition(get, set, path, refs, f) {
  const c = get() || {};
  const op = OPS.find((o) => c[o] !== undefined) || "";
  const ref = el("input", { value: c.ref || "", placeholder: "@step.field", size: 18 });
  ref.setAttribute("list", refs);
  const sel = el("select", {}, el("option", { value: "" }, "is truthy"), ...OPS.map((o) => el("option", { value: o, selected: o === op }, o)));
  const val = el("input", { value: op ? toText(c[op]) : "", placeholder: "value", size: 12 });
  const update = () => {
    if (!ref.value.trim()) { set(undefined); f.changed(); return; }
    const next = { ref: ref.value.trim() };
    if (sel.value) next[sel.value] = fromText(val.value) ?? (sel.value === "exists" ? true : null);
    set(next);
    f.changed();
  };
  // `exists` tests presence: true or false, nothing else.
  sel.addEventListener("input", () => { if (sel.value === "exists" && !["true", "false"].includes(val.value)) val.value = "true"; });
  for (const i of [ref, sel, val]) i.addEventListener("input", update);
  const group = el("span", { class: "condition" });
  group.append(f.labelled("ref", ref, path + "/ref"), f.labelled("operator", sel, path), f.labelled("value", val, path + "/" + (op || "value")));
  return group;
}

export async function editorPage(name) {
  const fresh = !name;
  const [t, cat, list] = await Promise.all([
    fresh ? null : api("/templates/" + encodeURIComponent(name)), api("/catalog"), api("/templates")]);
  if (t && t.status !== 200) { main.replaceChildren(el("h1", {}, "No such template"), el("p", {}, t.body.message || "")); return; }
  const catalog = cat.status === 200 ? cat.body : { plugins: [], servers: [] };
  const templates = (list.body.templates || []).map((x) => x.name);
  let def = normal(t ? structuredClone(t.body.definition) : { name: "", steps: [] });
  const version = t ? t.body.version : 0;

  const formBox = el("div", { class: "editor-form" });
  const jsonView = el("textarea", { id: "definition-json", spellcheck: false, rows: 30 });
  const jsonErr = el("p", { class: "error", role: "status", id: "json-message" });
  const graphBox = el("div", { id: "editor-graph" });
  const status = el("p", { id: "validation", role: "status" });
  const general = el("ul", { class: "problems", id: "problems" });
  const save = el("button", { type: "button", id: "save" }, fresh ? "Save as a new template" : `Save as version ${version + 1}`);
  const saveMsg = el("p", { class: "error", id: "save-message", role: "status" });
  jsonView.setAttribute("aria-label", "the definition as JSON");
  main.replaceChildren(el("h1", {}, fresh ? "New template" : el("span", {}, "Edit ", el("code", {}, name), ` (from v${version})`)),
    el("div", { class: "editor" }, formBox, el("div", { class: "editor-side" },
      el("h2", {}, "JSON"), jsonView, jsonErr, el("h2", {}, "Graph"), graphBox)),
    el("div", { class: "editor-bar" }, status, general, save, saveMsg));

  // Fields by the JSON Pointer (into the definition) they edit: a problem
  // goes to the field of its longest matching path.
  let errs = {};
  const f = {
    labelled(text, input, path) {
      input.id = input.id || "ed-" + (++ids);
      input.dataset.path = path;
      const err = el("span", { class: "error", "data-error-for": path });
      errs[path] = { err, input };
      return el("span", { class: "ed-field" }, el("label", { htmlFor: input.id }, text), input, err);
    },
    changed: () => changed(),
  };
  const row = (text, input, path, note) => el("div", { class: "field" }, f.labelled(text, input, path), note || null);
  const textIn = (v, on, attrs) => { const i = el("input", Object.assign({ value: v ?? "" }, attrs || {})); i.addEventListener("input", () => { on(i.value); changed(); }); return i; };
  const jsonIn = (v, on, path, rows) => {
    const i = el("textarea", { rows: rows || 3, cols: 50, value: v === undefined ? "" : JSON.stringify(v, null, 2) });
    i.addEventListener("input", () => {
      if (!i.value.trim()) { on(undefined); changed(); return; }
      try { on(JSON.parse(i.value)); changed(); } catch (e) { show({ [path]: ["not JSON yet: " + e.message] }); }
    });
    return i;
  };
  const select = (options, v, on) => {
    const s = el("select", {}, ...options.map(([value, text]) => el("option", { value, selected: value === v }, text)));
    s.addEventListener("change", () => on(s.value));
    return s;
  };

  // Refs a step may use: the run's input fields, other steps and the
  // fields their output schemas declare, and @item/@index under for_each.
  const outputFields = (s) => {
    const k = kindOf(s);
    let schema = null;
    if (k === "code") schema = (catalog.plugins.find((p) => p.name === s.code.plugin) || {}).output_schema;
    if (k === "tool") schema = ((catalog.servers.find((x) => x.name === s.tool.server) || { tools: [] }).tools.find((x) => x.name === s.tool.name) || {}).output_schema;
    if (k === "wait") schema = s.wait.schema;
    if (k === "agent") return ["text", "data", "state"];
    return Object.keys((schema && schema.properties) || {});
  };
  const refsFor = (i) => {
    const out = ["@input", ...Object.keys((def.input_schema && def.input_schema.properties) || {}).map((p) => "@input." + p)];
    def.steps.forEach((s, j) => { if (j !== i && s.name) out.push("@" + s.name, ...outputFields(s).map((x) => `@${s.name}.${x}`)); });
    if (def.steps[i] && def.steps[i].for_each !== undefined) out.push("@item", "@index");
    return out;
  };
  const inputSchema = (s) => {
    const k = kindOf(s);
    if (k === "code") return (catalog.plugins.find((p) => p.name === s.code.plugin) || {}).input_schema;
    if (k === "tool") return ((catalog.servers.find((x) => x.name === s.tool.server) || { tools: [] }).tools.find((x) => x.name === s.tool.name) || {}).input_schema;
    return null;
  };

  const action = (s, i, at) => {
    const k = kindOf(s);
    if (k === "code") {
      if (s.code.plugin === undefined) return el("p", {}, "Code by ", el("code", {}, JSON.stringify(s.code)), " (edit it in the JSON)");
      const names = catalog.plugins.map((p) => p.name);
      if (!names.includes(s.code.plugin)) names.unshift(s.code.plugin);
      return row("plugin", select(names.map((n) => [n, n]), s.code.plugin, (v) => { s.code = { plugin: v }; render(); changed(); }), at + "/code/plugin");
    }
    if (k === "tool") {
      const servers = catalog.servers.map((x) => x.name);
      if (s.tool.server && !servers.includes(s.tool.server)) servers.unshift(s.tool.server);
      const tools = ((catalog.servers.find((x) => x.name === s.tool.server) || { tools: [] }).tools).map((x) => x.name);
      if (s.tool.name && !tools.includes(s.tool.name)) tools.unshift(s.tool.name);
      return el("div", {}, row("server", select([["", "—"], ...servers.map((n) => [n, n])], s.tool.server || "", (v) => { s.tool = { server: v, name: "" }; render(); changed(); }), at + "/tool/server"),
        row("tool", select([["", "—"], ...tools.map((n) => [n, n])], s.tool.name || "", (v) => { s.tool.name = v; render(); changed(); }), at + "/tool/name"));
    }
    if (k === "agent") return row("agent", textIn(typeof s.agent === "string" ? s.agent : s.agent.name, (v) => { s.agent = v; }), at + "/agent");
    if (k === "wait") {
      return el("div", {}, row("prompt", textIn(s.wait.prompt, (v) => put(s.wait, "prompt", v || undefined), { size: 50 }), at + "/wait/prompt"),
        row("answer schema", jsonIn(s.wait.schema, (v) => put(s.wait, "schema", v), at + "/wait/schema", 4), at + "/wait/schema"));
    }
    if (k === "sleep") return row("ms", textIn(toText(s.sleep.ms), (v) => put(s.sleep, "ms", fromText(v)), { inputMode: "numeric", size: 8 }), at + "/sleep/ms");
    if (k === "workflow") {
      return el("div", {}, row("template", select([["", "—"], ...templates.map((n) => [n, n])], s.workflow.template || "", (v) => { s.workflow.template = v; changed(); }), at + "/workflow/template"),
        row("version", textIn(toText(s.workflow.version), (v) => put(s.workflow, "version", fromText(v)), { size: 4, inputMode: "numeric" }), at + "/workflow/version"));
    }
    return null; // return: its input below
  };

  // The input: one row per field of the action's input schema (type a
  // value or pick a ref), else the whole input as JSON.
  const input = (s, i, at) => {
    const schema = inputSchema(s);
    const props = Object.keys((schema && schema.properties) || {});
    const extra = s.input && typeof s.input === "object" && !Array.isArray(s.input) ? Object.keys(s.input).filter((k) => !props.includes(k)) : [];
    if (!props.length || (s.input !== undefined && (typeof s.input !== "object" || Array.isArray(s.input)))) {
      return row("input (JSON)", jsonIn(s.input, (v) => put(s, "input", v), at + "/input", 4), at + "/input");
    }
    const req = (schema.required || []);
    return el("fieldset", { class: "input-fields" }, el("legend", {}, "input"), ...[...props, ...extra].map((p) => {
      const v = textIn(toText((s.input || {})[p]), (x) => {
        s.input = s.input || {};
        put(s.input, p, fromText(x));
        if (!Object.keys(s.input).length) delete s.input;
      }, { size: 30, placeholder: (schema.properties[p] || {}).type || "" });
      v.setAttribute("list", "refs-" + i);
      return row(p + (req.includes(p) ? " *" : ""), v, `${at}/input/${p}`, (schema.properties[p] || {}).description ? el("small", { class: "help" }, schema.properties[p].description) : null);
    }));
  };

  const edges = (s, i, at) => {
    const list = (s.after || []).map((e) => (typeof e === "string" ? { step: e } : e));
    const write = () => {
      const out = list.map((e) => (e.on && e.on !== "success") || e.when ? Object.fromEntries(Object.entries(e).filter(([, v]) => v !== undefined)) : e.step);
      put(s, "after", out.length ? out : undefined);
    };
    const others = def.steps.filter((_, j) => j !== i).map((x) => x.name);
    const box = el("fieldset", { class: "edges" }, el("legend", {}, "after (edges)"));
    list.forEach((e, n) => {
      const p = `${at}/after/${n}`;
      const drop = el("button", { type: "button", "aria-label": `remove the edge from ${e.step}` }, "×");
      drop.onclick = () => { list.splice(n, 1); write(); render(); changed(); };
      box.append(el("div", { class: "edge", "data-edge-row": e.step },
        f.labelled("step", select([["", "—"], ...others.map((x) => [x, x])], e.step, (v) => { e.step = v; write(); changed(); }), p + "/step"),
        f.labelled("on", select(ONS.map((o) => [o, o]), e.on || "success", (v) => { e.on = v === "success" ? undefined : v; write(); changed(); }), p + "/on"),
        el("span", {}, " when "), condition(() => e.when, (v) => { e.when = v; write(); }, p + "/when", "refs-" + i, f), drop));
    });
    const add = el("button", { type: "button", class: "add-edge" }, "+ edge");
    add.onclick = () => { list.push({ step: others[0] || "" }); write(); render(); changed(); };
    box.append(add);
    return box;
  };

  const card = (s, i) => {
    const at = `/steps/${i}`;
    const k = kindOf(s);
    const kind = select(KINDS.map((x) => [x, x]), k, (v) => {
      for (const x of KINDS) delete s[x];
      s[v] = { code: { plugin: (catalog.plugins[0] || {}).name || "" }, tool: { server: "", name: "" }, agent: "", wait: { prompt: "" },
        sleep: { ms: 1000 }, workflow: { template: "" }, return: true }[v];
      render(); changed();
    });
    const move = (d) => { const j = i + d; [def.steps[i], def.steps[j]] = [def.steps[j], def.steps[i]]; render(); changed(); };
    const up = el("button", { type: "button", disabled: i === 0, "aria-label": `move ${s.name} up` }, "↑");
    up.onclick = () => move(-1);
    const down = el("button", { type: "button", disabled: i === def.steps.length - 1, "aria-label": `move ${s.name} down` }, "↓");
    down.onclick = () => move(1);
    const drop = el("button", { type: "button", "aria-label": `remove step ${s.name}` }, "Remove");
    drop.onclick = () => { def.steps.splice(i, 1); render(); changed(); };
    const stepErr = el("span", { class: "error", "data-error-for": at });
    errs[at] = { err: stepErr, input: null };
    const fe = s.for_each !== undefined;
    const each = textIn(toText(s.for_each), (v) => { put(s, "for_each", fromText(v)); if (s.for_each === undefined) { delete s.where; delete s.concurrency; } }, { size: 20, placeholder: "@input.items" });
    each.setAttribute("list", "refs-" + i);
    each.addEventListener("change", () => render());
    const retry = textIn(toText((s.retry || {}).max_attempts), (v) => {
      const n = fromText(v);
      if (n === undefined) { if (s.retry) { delete s.retry.max_attempts; if (!Object.keys(s.retry).length) delete s.retry; } } else { s.retry = s.retry || {}; s.retry.max_attempts = n; }
    }, { size: 4, inputMode: "numeric" });
    return el("fieldset", { class: "step-card", "data-step-card": s.name || "" },
      el("legend", {}, `${i + 1}. ${s.name || "(unnamed)"}`), stepErr,
      el("datalist", { id: "refs-" + i }, ...refsFor(i).map((r) => el("option", { value: r }))),
      row("name", textIn(s.name, (v) => { s.name = v; }, { size: 20 }), at + "/name"),
      row("description", textIn(s.description, (v) => put(s, "description", v || undefined), { size: 40 }), at + "/description"),
      row("action", kind, at + "/" + k), action(s, i, at),
      input(s, i, at),
      el("div", { class: "field" }, el("span", { class: "ed-label" }, "when "), condition(() => s.when, (v) => put(s, "when", v), at + "/when", "refs-" + i, f)),
      edges(s, i, at),
      el("div", { class: "field inline" }, f.labelled("for_each", each, at + "/for_each"),
        fe ? el("span", {}, " where ", condition(() => s.where, (v) => put(s, "where", v), at + "/where", "refs-" + i, f)) : null,
        fe ? f.labelled("concurrency", textIn(toText(s.concurrency), (v) => put(s, "concurrency", fromText(v)), { size: 4 }), at + "/concurrency") : null),
      el("div", { class: "field inline" }, f.labelled("attempts", retry, at + "/retry/max_attempts"),
        f.labelled("timeout_ms", textIn(toText(s.timeout_ms), (v) => put(s, "timeout_ms", fromText(v)), { size: 8, inputMode: "numeric" }), at + "/timeout_ms")),
      el("div", { class: "card-tools" }, up, down, drop));
  };

  const render = () => {
    errs = {};
    const head = el("fieldset", { class: "step-card" }, el("legend", {}, "Template"),
      fresh ? row("name", textIn(def.name, (v) => { def.name = v; }, { size: 24 }), "/name") : null,
      row("description", textIn(def.description, (v) => put(def, "description", v || undefined), { size: 50 }), "/description"),
      row("input schema", jsonIn(def.input_schema, (v) => put(def, "input_schema", v), "/input_schema", 4), "/input_schema"));
    const add = el("button", { type: "button", id: "add-step" }, "+ step");
    add.onclick = () => {
      let n = def.steps.length + 1;
      while (def.steps.some((s) => s.name === "step_" + n)) n++;
      def.steps.push({ name: "step_" + n, code: { plugin: (catalog.plugins[0] || {}).name || "" } });
      render(); changed();
    };
    formBox.replaceChildren(head, ...def.steps.map(card), add);
  };

  // After any change: the JSON view (unless it is being typed in), the
  // graph, and the API's validation (after a pause).
  let timer = null, asked = 0;
  const changed = (fromJson) => {
    if (!fromJson) jsonView.value = JSON.stringify(def, null, 2);
    // Nothing to save until something changed (a save is a new version).
    const same = JSON.stringify(def) === loaded;
    save.disabled = same && !fresh;
    save.textContent = same && !fresh ? "No change to save" : fresh ? "Save as a new template" : `Save as version ${version + 1}`;
    graphBox.replaceChildren(dagView(graphOf(def), { plain: true }));
    clearTimeout(timer);
    timer = setTimeout(validate, 350);
  };
  const show = (byPath) => {
    for (const { err, input } of Object.values(errs)) { err.textContent = ""; if (input) input.removeAttribute("aria-invalid"); }
    general.replaceChildren();
    for (const [path, messages] of Object.entries(byPath)) {
      let p = path;
      while (!(p in errs) && p.includes("/")) p = p.slice(0, p.lastIndexOf("/"));
      const at = errs[p];
      if (!at) { general.append(...messages.map((m) => el("li", {}, path ? `${path}: ${m}` : m))); continue; }
      at.err.textContent = messages.join("; ");
      if (at.input) at.input.setAttribute("aria-invalid", "true");
    }
  };
  const validate = async () => {
    const mine = ++asked;
    let r;
    try { r = await api("/validate", { method: "POST", body: { definition: def } }); } catch (e) { status.textContent = e.message; return; }
    if (mine !== asked) return; // a later check is on its way
    const byPath = {};
    for (const p of r.body.problems || []) (byPath[(p.path || "").replace(/^\/definition/, "")] ||= []).push(p.message + (p.hint ? ` (${p.hint})` : ""));
    show(byPath);
    const n = (r.body.problems || []).length;
    status.textContent = r.status !== 200 ? (r.body.message || "HTTP " + r.status) : n ? `${n} problem${n > 1 ? "s" : ""}: see the fields` : "Valid" + ((r.body.warnings || []).length ? `, ${r.body.warnings.length} warning(s)` : "");
    status.dataset.valid = String(r.status === 200 && n === 0);
  };
  jsonView.addEventListener("input", () => {
    try {
      const next = JSON.parse(jsonView.value);
      if (!next || typeof next !== "object" || !Array.isArray(next.steps)) throw new Error("a definition is an object with `steps`");
      def = normal(next);
      jsonErr.textContent = "";
      render(); changed(true);
    } catch (e) { jsonErr.textContent = "not read yet: " + e.message; }
  });
  save.onclick = async () => {
    saveMsg.textContent = "";
    const target = fresh ? (def.name || "").trim() : name;
    if (!target) { saveMsg.textContent = "give the template a name first"; return; }
    let r;
    try { r = await api("/templates/" + encodeURIComponent(target), { method: "PUT", body: { definition: def } }); } catch (e) { saveMsg.textContent = e.message; return; }
    if (r.status === 201) {
      leaving = true;
      window.onbeforeunload = null;
      location.hash = `#/templates/${encodeURIComponent(r.body.name)}?version=${r.body.version}&saved=1`;
      return;
    }
    const byPath = {};
    for (const p of r.body.problems || [{ path: r.body.path || "", message: r.body.message }]) (byPath[(p.path || "").replace(/^\/definition/, "")] ||= []).push(p.message);
    show(byPath);
    saveMsg.textContent = "Not saved: " + (r.body.message || "HTTP " + r.status);
  };
  const loaded = JSON.stringify(def);
  let leaving = false;
  guardLeave(() => leaving || JSON.stringify(def) === loaded || confirm("Leave the editor? The changes are not saved."));
  window.onbeforeunload = (e) => { if (!leaving && JSON.stringify(def) !== loaded) e.preventDefault(); };
  render();
  changed();
}

// A definition's DAG as the page draws it, before it is saved: edges from
// `after` and from refs to other steps.
export function graphOf(def) {
  const names = new Set(def.steps.map((s) => s.name));
  const edges = [];
  for (const s of def.steps) {
    const listed = new Set();
    for (const e of s.after || []) {
      const x = typeof e === "string" ? { step: e } : e;
      if (!names.has(x.step)) continue;
      listed.add(x.step);
      const on = x.on || "success";
      const when = x.when ? `when ${x.when.ref} ${OPS.filter((o) => x.when[o] !== undefined).map((o) => o + " " + JSON.stringify(x.when[o])).join(" ")}`.trim() : "";
      edges.push({ from: x.step, to: s.name, on, label: [on !== "success" ? on : "", when].filter(Boolean).join(" ") || undefined });
    }
    const text = JSON.stringify([s.input, s.when, s.for_each, s.where, s.wait]);
    for (const m of text.matchAll(/@([A-Za-z_][A-Za-z0-9_]*)/g)) {
      if (names.has(m[1]) && m[1] !== s.name && !listed.has(m[1])) { listed.add(m[1]); edges.push({ from: m[1], to: s.name, on: "success" }); }
    }
  }
  return { nodes: def.steps.map((s) => ({ name: s.name, action: kindOf(s), state: "pending", attempts: 0 })), edges };
}
