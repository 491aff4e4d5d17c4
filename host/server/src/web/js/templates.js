// Templates: the list, and one template version with its DAG, a form from
// its `input_schema` that starts a run of that version, its versions with
// what changed between two, its recent runs and its definition.
"use strict";

import { api, el, main, json, table } from "./core.js";
import { dagView } from "./dag.js";
import { schemaForm } from "./forms.js";
import { runsTable } from "./runs.js";

export async function templatesPage() {
  const { body } = await api("/templates");
  main.replaceChildren(el("h1", {}, "Templates"), el("p", {}, el("a", { href: "#/new", id: "new-template", class: "button" }, "New template")), table("templates", ["template", "version", "description"],
    body.templates.map((t) => el("tr", { "data-template": t.name },
      el("td", {}, el("a", { href: "#/templates/" + encodeURIComponent(t.name) }, t.name)), el("td", {}, t.version), el("td", {}, t.description || ""))),
    { id: "templates" }));
}

export async function templatePage(name, q) {
  const version = q && q.get("version");
  const { status, body: t } = await api("/templates/" + encodeURIComponent(name) + (version ? "?version=" + version : ""));
  if (status !== 200) { main.replaceChildren(el("h1", {}, "No such template"), el("p", {}, t.message || "no such template")); return; }
  const f = schemaForm(t.definition.input_schema, "input (JSON)");
  const msg = el("p", { class: "error", id: "start-message", role: "status" });
  const form = el("form", { id: "start" }, el("h2", {}, `Start a run of v${t.version}`), f.box, el("button", { type: "submit" }, `Run v${t.version}`), msg);
  form.onsubmit = async (e) => {
    e.preventDefault();
    msg.textContent = "";
    let input;
    try { input = f.read(); } catch (err) { msg.textContent = "not JSON: " + err.message; return; }
    let r;
    try { r = await api("/runs", { method: "POST", body: { template: name, version: t.version, input } }); } catch (err) { msg.textContent = err.message; return; }
    if (r.status === 201) { location.hash = "#/runs/" + r.body.id; return; }
    const problems = r.body.problems || (r.body.path ? [{ path: r.body.path, message: r.body.message }] : []);
    const left = f.errors(problems, "/input");
    msg.textContent = left.length || !problems.length ? (r.body.message || ("HTTP " + r.status)) : "Some fields need a change (see each field).";
  };
  const recent = el("section", { id: "template-runs" });
  const history = el("section", { id: "versions" });
  const edit = el("a", { href: `#/templates/${encodeURIComponent(name)}/edit`, id: "edit", class: "button" }, "Edit");
  main.replaceChildren(...[el("h1", {}, "Template ", el("code", {}, t.name), " v" + t.version),
    q && q.get("saved") ? el("p", { id: "saved", role: "status" }, `Saved as version ${t.version}.`) : null,
    t.description ? el("p", {}, t.description) : null, el("p", {}, edit),
    el("h2", {}, "Graph"), dagView(t.graph, { plain: true }), form, history, recent,
    el("h2", {}, "Definition"), json(t.definition, "the definition")].filter(Boolean));
  versions(history, name, t);
  const { body: runs } = await api("/runs?limit=10&template=" + encodeURIComponent(name));
  if (runs.runs && runs.runs.length) {
    recent.replaceChildren(el("h2", {}, "Recent runs"), runsTable(runs.runs),
      el("p", {}, el("a", { href: "#/?template_contains=" + encodeURIComponent(name) }, "All its runs")));
  }
}

// Its versions, each a link; and what changed between the one shown and
// another (steps matched by name, so moving a step is not a change).
async function versions(box, name, t) {
  const { status, body } = await api(`/templates/${encodeURIComponent(name)}/versions`);
  if (status !== 200 || body.versions.length < 2) { box.replaceChildren(); return; }
  const other = el("select", { id: "compare-with" }, ...body.versions.filter((v) => v.version !== t.version)
    .map((v) => el("option", { value: v.version }, `v${v.version}`)));
  const out = el("div", { id: "diff" });
  const compare = async () => {
    const { body: o } = await api(`/templates/${encodeURIComponent(name)}?version=${other.value}`);
    const changes = diff(byName(o.definition), byName(t.definition));
    out.replaceChildren(changes.length ? table(`changes from v${other.value} to v${t.version}`, ["where", `v${other.value}`, `v${t.version}`],
      changes.map((c) => el("tr", { "data-change": c.path }, el("td", {}, el("code", {}, c.path)), el("td", {}, show(c.before)), el("td", {}, show(c.after)))))
      : el("p", {}, "No difference."));
  };
  other.onchange = compare;
  box.replaceChildren(el("h2", {}, "Versions"),
    el("ul", { class: "versions" }, ...body.versions.map((v) => el("li", {}, v.version === t.version ? el("strong", {}, `v${v.version}`)
      : el("a", { href: `#/templates/${encodeURIComponent(name)}?version=${v.version}` }, `v${v.version}`), ` ${v.created_at.replace("T", " ").slice(0, 19)}`))),
    el("p", {}, el("label", { htmlFor: "compare-with" }, `Compare v${t.version} with `), other), out);
  compare();
}

function show(v) { return v === undefined ? el("em", {}, "absent") : el("code", {}, JSON.stringify(v)); }

// A definition with its steps keyed by name.
function byName(def) {
  const d = Object.assign({}, def);
  d.steps = Object.fromEntries((def.steps || []).map((s) => [s.name, s]));
  return d;
}

// Where two values differ: [{path, before, after}], paths as JSON Pointers.
export function diff(a, b, path = "", out = []) {
  if (JSON.stringify(a) === JSON.stringify(b)) return out;
  const obj = (x) => x !== null && typeof x === "object";
  if (obj(a) && obj(b) && Array.isArray(a) === Array.isArray(b)) {
    for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) diff(a[k], b[k], `${path}/${k}`, out);
    return out;
  }
  out.push({ path: path || "/", before: a, after: b });
  return out;
}
