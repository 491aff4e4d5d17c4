// Forms built from JSON Schemas: a run's input (a template's
// `input_schema`) and a wait's answer (its `schema`). One field per
// property of an object schema; a string that may hold lines (a CSV, a
// letter) gets a text area, so nothing typed or pasted is flattened.
"use strict";

import { el } from "./core.js";

let fieldIds = 0;

// Whether a string property is for text with lines: said by its schema
// (`format: "multiline"`, a `text/*` `contentMediaType`, or room for more
// than 200 characters).
function multiline(p) {
  return p.format === "multiline" || (p.contentMediaType || "").startsWith("text/") || (p.maxLength || 0) > 200;
}

// A form for a value matching `schema`. `read()` gives the value;
// `errors(problems, prefix)` shows each problem at its field and returns
// the problems that belong to no field (the caller shows them).
export function schemaForm(schema, label) {
  const box = el("div", { class: "schema-form" });
  const props = schema && schema.type === "object" && schema.properties;
  const fields = {};
  const add = (name, input, p, text, note) => {
    input.id = "field-" + (++fieldIds);
    const err = el("span", { class: "error", id: input.id + "-error", role: "status", "data-field": name });
    input.setAttribute("aria-describedby", err.id);
    fields[name] = { input, p, err };
    const row = el("div", { class: "field", "data-field-row": name }, el("label", { htmlFor: input.id }, text), input, note, err,
      p.description ? el("small", { class: "help" }, p.description) : null);
    box.append(row);
    return row;
  };
  if (props) {
    for (const [name, p] of Object.entries(props)) {
      const req = (schema.required || []).includes(name) ? " *" : "";
      if (p.type === "string" && !p.enum) { stringField(name, p, req, add, fields); continue; }
      let input;
      if (p.type === "boolean") input = el("input", { type: "checkbox", name });
      else if (p.enum) input = el("select", { name }, ...p.enum.map((v) => el("option", { value: JSON.stringify(v) }, String(v))));
      else if (p.type === "integer" || p.type === "number") input = el("input", { type: "text", name, inputMode: "numeric" });
      else input = el("textarea", { name, rows: 3, cols: 40, placeholder: "JSON" });
      add(name, input, p, name + req, null);
    }
  } else {
    add("", el("textarea", { name: "json", rows: 4, cols: 50, value: "{}" }), {}, label || "JSON", null);
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
    for (const f of Object.values(fields)) { f.err.textContent = ""; f.input.removeAttribute("aria-invalid"); }
    const left = [];
    for (const pr of problems || []) {
      const path = pr.path || "";
      const rest = path.startsWith(prefix) ? path.slice(prefix.length) : null;
      const name = rest === null ? null : decodeURIComponent((rest.split("/")[1] || "").replace(/~1/g, "/").replace(/~0/g, "~"));
      const f = name !== null ? (fields[name] || fields[""]) : null;
      if (!f) { left.push(pr); continue; }
      f.err.textContent += (f.err.textContent ? "; " : "") + pr.message;
      f.input.setAttribute("aria-invalid", "true");
    }
    return left;
  };
  return { box, read, errors };
}

// A string field: a text area when the schema says it holds lines, else
// one line with a "several lines" switch; pasting text with line breaks
// into one line switches it by itself (the lines are kept).
function stringField(name, p, req, add, fields) {
  const area = () => el("textarea", { name, rows: 6, cols: 60 });
  if (multiline(p)) { add(name, area(), p, name + req, null); return; }
  const line = el("input", { type: "text", name });
  const toggle = el("button", { type: "button", class: "lines", "aria-pressed": "false" }, "several lines");
  add(name, line, p, name + req, toggle);
  const swap = (text) => {
    const f = fields[name];
    const next = f.input.tagName === "TEXTAREA" ? el("input", { type: "text", name }) : area();
    next.id = f.input.id;
    next.setAttribute("aria-describedby", f.err.id);
    next.value = text ?? f.input.value;
    if (next.tagName === "INPUT") next.addEventListener("paste", pasted);
    f.input.replaceWith(next);
    f.input = next;
    toggle.setAttribute("aria-pressed", String(next.tagName === "TEXTAREA"));
    next.focus();
  };
  const pasted = (e) => {
    const text = (e.clipboardData || window.clipboardData).getData("text");
    if (!text.includes("\n")) return;
    e.preventDefault();
    const input = fields[name].input;
    const before = input.value.slice(0, input.selectionStart), after = input.value.slice(input.selectionEnd);
    swap(before + text + after);
  };
  line.addEventListener("paste", pasted);
  toggle.onclick = () => swap();
}
