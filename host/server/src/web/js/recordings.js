// Recordings: the open ones, and the review of one (#/recordings/ID): its
// calls as they arrive (read again every two seconds), the refs a save
// would propose with a box each to refuse or accept, steps freed from the
// kept order, what a replay changes, the definition and its graph; then
// Save as template. Every choice asks the API for a dry run of the save,
// the same plan as MCP's `recording_save`.
"use strict";

import { api, el, main, json, short, table, pageSignal, debounce } from "./core.js";
import { dagView } from "./dag.js";
import { graphOf } from "./editor.js";

export async function recordingsPage() {
  const { body } = await api("/recordings");
  const list = body.recordings || [];
  main.replaceChildren(el("h1", {}, "Recordings"),
    el("p", {}, "An MCP session in recording mode turns its proxied calls into a recording; review one here and save it as a template."),
    list.length ? table("open recordings", ["recording", "name", "calls", "started", "last call", "held by an MCP session"], list.map((r) =>
      el("tr", { "data-recording": r.run_id }, el("td", {}, el("a", { href: "#/recordings/" + r.run_id }, r.run_id)), el("td", {}, r.name),
        el("td", {}, r.steps.length), el("td", {}, short(r.started_at)), el("td", {}, short(r.updated_at)), el("td", {}, r.held ? "yes" : "no")))) : el("p", { id: "no-recordings" }, "No open recordings."));
}

export async function recordingPage(id) {
  const signal = pageSignal();
  const steps = el("section", { id: "recorded" });
  const choices = el("section", { id: "choices" });
  const result = el("section", { id: "proposal" });
  const msg = el("p", { class: "error", id: "save-message", role: "status" });
  const head = el("div", {});
  main.replaceChildren(head, steps, result, choices, msg);
  const refuse = new Set(), accept = new Set(), parallel = new Set();
  let keepOrder = false, count = -1, rec = null, saved = false;
  const name = el("input", { id: "template-name", size: 24 });
  const description = el("input", { id: "template-description", size: 50 });

  const review = async () => {
    const body = { template: name.value.trim() || rec.name, refuse: [...refuse], accept: [...accept], parallel: [...parallel],
      keep_order: keepOrder, description: description.value.trim() || undefined, dry_run: true };
    let r;
    try { r = await api(`/recordings/${id}/save`, { method: "POST", body }); } catch (e) { msg.textContent = e.message; return; }
    if (r.status !== 200) { msg.textContent = (r.body.message || "HTTP " + r.status) + (r.body.hint ? " — " + r.body.hint : ""); return; }
    msg.textContent = "";
    proposal(result, r.body, { refuse, accept, changed: again, keepOrder });
  };
  const again = debounce(review, 200);

  const load = async () => {
    let r;
    try { r = await api("/recordings/" + id); } catch (e) { msg.textContent = e.message; return false; }
    if (r.status === 409) {
      main.replaceChildren(el("h1", {}, "Recording ended"), el("p", { id: "ended" }, r.body.message, " ", el("a", { href: "#/runs/" + id }, "See the run")));
      return false;
    }
    if (r.status !== 200) { main.replaceChildren(el("h1", {}, "No such recording"), el("p", {}, r.body.message || "")); return false; }
    rec = r.body;
    if (!name.value) name.value = rec.name;
    head.replaceChildren(el("h1", {}, "Recording ", el("code", {}, rec.name)),
      el("p", {}, `Run ${rec.run_id}, started ${short(rec.started_at)}. `,
        rec.held ? el("strong", { id: "held" }, "An MCP session is recording into it now: saving here ends the recording for that session.")
          : "No MCP session is recording into it now."));
    if (rec.steps.length !== count) {
      count = rec.steps.length;
      steps.replaceChildren(el("h2", {}, `Calls (${count})`), el("h3", {}, "Input"), json(rec.input, "the recording's input"),
        table("recorded calls", ["step", "call", "arguments", "output", "may run in parallel"], rec.steps.map((s) => {
          const free = el("input", { type: "checkbox", checked: parallel.has(s.name), "aria-label": `${s.name} may run in parallel (free it from the recorded order)` });
          free.onchange = () => { if (free.checked) parallel.add(s.name); else parallel.delete(s.name); again(); };
          return el("tr", { "data-recorded": s.name }, el("td", {}, s.name), el("td", {}, s.kind + (s.what ? " " + (typeof s.what === "string" ? s.what : JSON.stringify(s.what)) : "")),
            el("td", {}, json(s.arguments, `${s.name}'s arguments`)), el("td", {}, json(s.output, `${s.name}'s output`)), el("td", {}, s.kind === "preset" ? "" : free));
        })));
      if (count) await review();
      else result.replaceChildren(el("p", {}, "No calls yet: the review appears with the first."));
    }
    return true;
  };
  if (!(await load())) return;
  const keep = el("input", { type: "checkbox", id: "keep-order" });
  keep.onchange = () => { keepOrder = keep.checked; again(); };
  const save = el("button", { type: "button", id: "save-recording" }, "Save as template");
  save.onclick = async () => {
    msg.textContent = "";
    const body = { template: name.value.trim(), refuse: [...refuse], accept: [...accept], parallel: [...parallel], keep_order: keepOrder,
      description: description.value.trim() || undefined };
    let r;
    try { r = await api(`/recordings/${id}/save`, { method: "POST", body }); } catch (e) { msg.textContent = e.message; return; }
    if (r.status === 201) { saved = true; location.hash = `#/templates/${encodeURIComponent(r.body.template)}?version=${r.body.version}&saved=1`; return; }
    msg.textContent = "Not saved: " + (r.body.message || "HTTP " + r.status) + (r.body.hint ? " — " + r.body.hint : "");
  };
  name.addEventListener("input", again);
  description.addEventListener("input", again);
  choices.replaceChildren(el("h2", {}, "Save as"),
    el("div", { class: "field" }, el("label", { htmlFor: "template-name" }, "template "), name),
    el("div", { class: "field" }, el("label", { htmlFor: "template-description" }, "description "), description),
    el("div", { class: "field" }, keep, el("label", { htmlFor: "keep-order" }, " keep every call in the recorded order")),
    save);
  // Calls arrive while the page is open: read again every two seconds.
  (async () => {
    while (!signal.aborted) {
      await new Promise((r) => setTimeout(r, 2000));
      if (signal.aborted || saved || !(await load())) return;
    }
  })();
}

// What a save would make: proposals with their boxes, the order kept,
// what a replay changes, warnings, the definition and its graph.
function proposal(box, p, { refuse, accept, changed, keepOrder }) {
  const row = (r, candidate) => {
    const on = el("input", { type: "checkbox", checked: r.applied, "data-proposal": r.id, "aria-label": `apply ${r.id}: ${r.reference} in ${r.step}` });
    on.onchange = () => {
      if (candidate) { if (on.checked) accept.add(r.id); else accept.delete(r.id); } else if (on.checked) refuse.delete(r.id); else refuse.add(r.id);
      changed();
    };
    return el("tr", { "data-proposal-row": r.id }, el("td", {}, on), el("td", {}, r.id), el("td", {}, r.step), el("td", {}, el("code", {}, r.path)),
      el("td", {}, el("code", {}, JSON.stringify(r.value))), el("td", {}, el("code", {}, r.reference)));
  };
  const head = ["apply", "id", "step", "at", "recorded", "becomes"];
  box.replaceChildren(...[el("h2", {}, "Proposed refs"),
    p.replacements.length ? table("proposed refs", head, p.replacements.map((r) => row(r, false))) : el("p", {}, "None: no argument equals an input value or an earlier output."),
    p.candidates.length ? el("div", {}, el("h3", {}, "Candidates (small values equal to an input value; not applied unless ticked)"), table("candidates", head, p.candidates.map((r) => row(r, true)))) : null,
    el("h3", {}, "Order kept"), keepOrder ? el("p", { id: "order" }, "Every call after the one before it (the recorded order).")
      : p.order.length ? el("ul", { id: "order" }, ...p.order.map((o) => el("li", {}, `${o.step} after ${o.after}: ${o.why}`)))
      : el("p", { id: "order" }, "None: calls that pass no data may run in parallel."),
    el("h3", {}, "What another input changes"), el("ul", { id: "replay" },
      ...p.replay.filter((e) => !p.unused_input.includes(e.field)).map((e) => el("li", {}, `${e.field}: ${e.changes.join(", ") || "nothing"}${e.through.length ? " (then " + e.through.join(", ") + ")" : ""}`)),
      ...p.unused_input.map((f) => el("li", {}, `${f}: no step uses it`))),
    p.warnings.length ? el("div", {}, el("h3", {}, "Warnings"), el("ul", { id: "warnings" }, ...p.warnings.map((w) => el("li", {}, w)))) : null,
    el("h3", {}, "Graph"), dagView(graphOf(p.definition), { plain: true }), el("h3", {}, "Definition"), json(p.definition, "the definition it saves")].filter(Boolean));
}
