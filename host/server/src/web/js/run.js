// One run: its head (state, times, deadline, parent, cancel, retry), its
// DAG coloured live, forms for its waits, its steps with a panel per step,
// input and output, child runs, artifacts, notifications and its event
// log in pages. Live: every event of the run's stream reloads the view.
"use strict";

import { api, el, main, state, json, short, took, table, sse, debounce, headers, API, FINISHED, pageSignal } from "./core.js";
import { dagView } from "./dag.js";
import { schemaForm } from "./forms.js";
import { runsTable } from "./runs.js";
import { stepPanel, EventLog } from "./steps.js";

export async function runPage(id, openStep) {
  const sections = ["run-head", "retry-form", "graph", "step-panel", "waits", "steps", "io", "children", "artifacts", "notifications", "events"];
  const at = Object.fromEntries(sections.map((s) => [s, el("section", { id: s })]));
  at["retry-form"].hidden = true;
  main.replaceChildren(...Object.values(at));
  const log = new EventLog(at.events);
  let openForms = "";
  let run = null, saved = null, drawn = null;
  let shown = openStep || null;
  const show = (name) => {
    shown = name;
    history.replaceState(null, "", `#/runs/${id}/steps/${encodeURIComponent(name)}`);
    draw();
    at["step-panel"].scrollIntoView({ block: "nearest" });
    at["step-panel"].querySelector("h2")?.focus();
  };
  const draw = () => {
    const s = run && run.steps.find((x) => x.name === shown);
    at["step-panel"].replaceChildren(...(s ? stepPanel(run, s, log.of(s.name), given(log).has(s.name), () => { shown = null; history.replaceState(null, "", "#/runs/" + id); draw(); }) : []));
  };
  const load = async () => {
    const [{ body: r }, { body: g }] = await Promise.all([api("/runs/" + id), api("/runs/" + id + "/graph")]);
    if (!r.id) { main.replaceChildren(el("h1", {}, "No such run"), el("p", {}, r.message || "no such run")); return; }
    run = r;
    // A one-off definition's run has no template page (its definition's
    // name and version may name no saved template): asked once.
    if (saved === null) saved = (await api(`/templates/${encodeURIComponent(run.template)}?version=${run.version}`)).status === 200;
    head(at["run-head"], run, saved, load, at["retry-form"]);
    if (FINISHED.includes(run.state)) retriedAs(at["run-head"].querySelector("#retried-as"), id);
    const items = Object.fromEntries(run.steps.filter((s) => s.items).map((s) => [s.name, s.items]));
    const opts = { items, href: (n) => `#/runs/${id}/steps/${encodeURIComponent(n)}`, onStep: show };
    if (!drawn || !drawn.update(g, opts)) {
      drawn = dagView(g, opts);
      at.graph.replaceChildren(el("h2", {}, "Graph"), drawn);
    }
    // Forms for signal waits (kept while the same waits stay open). A
    // for_each wait has one form per item still waiting.
    const key = run.waits.filter((w) => w.kind === "signal").map((w) => w.step + "#" + (w.item ?? "")).join(",");
    if (key !== openForms) {
      openForms = key;
      at.waits.replaceChildren(...run.waits.filter((w) => w.kind === "signal").map((w) => waitForm(id, w, load)));
    }
    steps(at.steps, run, log, show);
    at.io.replaceChildren(...[el("h2", {}, "Input"), json(run.input, "the run's input"),
      run.output !== null ? el("div", {}, el("h2", {}, "Output"), json(run.output, "the run's output")) : null,
      run.error ? el("div", { id: "run-error" }, el("h2", {}, "Error"), json(run.error, "the run's error")) : null].filter(Boolean));
    artifacts(at.artifacts, run);
    notifications(at.notifications, run, load);
    draw();
  };
  await load();
  children(at.children, id);
  const again = debounce(load, 50);
  const kids = debounce(() => children(at.children, id), 200);
  sse("/runs/" + id + "/events", (ev) => {
    const e = JSON.parse(ev.data);
    log.add(e);
    if (e.kind && e.kind.startsWith("child")) kids();
    again();
  }, pageSignal());
}

function head(box, run, saved, reload, retryForm) {
  const id = run.id;
  const finished = FINISHED.includes(run.state);
  const cancel = el("button", { id: "cancel", disabled: finished }, "Cancel");
  const msg = el("span", { class: "error", id: "head-message", role: "status" });
  cancel.onclick = async () => {
    // Canceling cannot be undone: asked first.
    if (!confirm(`Cancel run ${id}? Its running steps are interrupted and it ends canceled.`)) return;
    try { await api("/runs/" + id + "/cancel", { method: "POST" }); } catch (err) { msg.textContent = err.message; return; }
    reload();
  };
  // Retry from failure: a new run that keeps what succeeded; asked first,
  // with where to start from and the input (editable).
  // (The form is a section of its own: it stays open as the head is drawn again.)
  const retry = finished && run.state !== "completed" ? el("button", { id: "retry", "aria-expanded": String(!retryForm.hidden) }, "Retry…") : null;
  if (retry) retry.onclick = () => {
    retryForm.hidden = !retryForm.hidden;
    retry.setAttribute("aria-expanded", String(!retryForm.hidden));
    if (!retryForm.hidden && !retryForm.firstChild) retryForm.append(...retryFields(run));
  };
  const of = run.labels && run.labels["weft/retry-of"];
  const template = saved ? el("a", { href: `#/templates/${encodeURIComponent(run.template)}?version=${run.version}` }, run.template + " v" + run.version) : el("span", {}, run.template, " (a one-off definition)");
  const ms = Date.parse(finished ? run.updated_at : new Date().toISOString()) - Date.parse(run.created_at);
  const labels = Object.entries(run.labels || {}).filter(([k]) => k !== "weft/retry-of");
  box.replaceChildren(...[el("h1", {}, "Run ", el("code", {}, id)),
    el("p", {}, "Of ", template, " · ", el("span", { id: "run-state" }, state(run.state)), " · created ", short(run.created_at),
      " · ", finished ? "took " : "running for ", took(ms),
      run.deadline ? el("span", { id: "deadline" }, " · times out at " + short(run.deadline)) : null),
    el("p", {}, cancel, " ", retry, " ", msg),
    el("p", { id: "retried-as" }),
    run.parent ? el("p", { id: "parent" }, "A child of ", el("a", { href: "#/runs/" + run.parent }, run.parent)) : null,
    of ? el("p", { id: "retry-of" }, "A retry of ", el("a", { href: "#/runs/" + of }, of)) : null,
    labels.length ? el("p", { id: "labels" }, "Labels: ", ...labels.map(([k, v]) => el("a", { class: "label", href: "#/?label=" + encodeURIComponent(k + ":" + v) }, `${k}:${v}`))) : null].filter(Boolean));
}

// Steps given their output instead of run: kept by a retry, or presets.
function given(log) {
  return new Set(log.events.filter((e) => e.kind === "step.running" && e.data && e.data.how === "preset").map((e) => e.step));
}

// The fields of a retry: from which step (by default, where it failed),
// with which input; a retry that cannot help as it is says so.
function retryFields(run) {
  const msg = el("p", { class: "error", id: "retry-message", role: "status" });
  const from = el("select", { id: "retry-from" }, el("option", { value: "" }, "where it failed (keep every step that succeeded)"),
    ...run.steps.map((s) => el("option", { value: s.name }, `step ${s.name} (and what follows it)`)));
  const input = el("textarea", { id: "retry-input", rows: 4, cols: 50, value: JSON.stringify(run.input, null, 2) });
  const go = el("button", { type: "button", id: "retry-start" }, "Start the retry");
  const warn = run.error && run.error.retryable === false
    ? el("p", { class: "error", id: "retry-warning" }, `Its error is not one a retry cures as it is (${run.error.kind}): change the input, or fix what it calls first.`) : null;
  go.onclick = async () => {
    msg.textContent = "";
    let body;
    try { body = { input: JSON.parse(input.value) }; } catch (e) { msg.textContent = "the input is not JSON: " + e.message; return; }
    if (JSON.stringify(body.input) === JSON.stringify(run.input)) delete body.input;
    if (from.value) body.from = from.value;
    let r;
    try { r = await api("/runs/" + run.id + "/retry", { method: "POST", body }); } catch (err) { msg.textContent = err.message; return; }
    if (r.status === 201) location.hash = "#/runs/" + r.body.run.id;
    else msg.textContent = (r.body.message || ("HTTP " + r.status)) + (r.body.path ? ` (at ${r.body.path})` : "");
  };
  return [warn, el("div", { class: "field" }, el("label", { htmlFor: "retry-from" }, "Start from "), from),
    el("div", { class: "field" }, el("label", { htmlFor: "retry-input" }, "Input "), input), go, msg].filter(Boolean);
}

// The runs that retry this one (their label `weft/retry-of`).
async function retriedAs(box, id) {
  const { status, body } = await api(`/runs?limit=10&label=${encodeURIComponent("weft/retry-of:" + id)}`);
  if (status !== 200 || !body.runs.length) return;
  box.replaceChildren("Retried as ", ...body.runs.flatMap((r, i) => [i ? ", " : "", el("a", { href: "#/runs/" + r.id }, r.id), " (", r.state, ")"]));
}

function steps(box, run, log, show) {
  const kept = given(log);
  const retried = run.labels && run.labels["weft/retry-of"];
  const t0 = Date.parse(run.created_at);
  const t1 = Math.max(Date.now(), ...run.steps.map((s) => Date.parse(s.ended_at || 0)));
  const span = Math.max(1, t1 - t0);
  box.replaceChildren(el("h2", {}, "Steps"), table("steps", ["step", "state", "attempts", "time", "timeline", "error"], run.steps.map((s) => {
    const a = s.started_at ? Date.parse(s.started_at) : null, b = s.ended_at ? Date.parse(s.ended_at) : Date.now();
    const bar = a ? el("div", { class: "bar" }) : null;
    if (bar) { bar.style.marginLeft = ((a - t0) / span * 200) + "px"; bar.style.width = Math.max(2, (b - a) / span * 200) + "px"; }
    const open = el("a", { href: `#/runs/${run.id}/steps/${encodeURIComponent(s.name)}` }, s.name);
    open.onclick = (e) => { e.preventDefault(); show(s.name); };
    const n = s.items ? `${s.items.succeeded + s.items.failed + s.items.canceled + s.items.unfinished} items` : s.attempts;
    const mark = kept.has(s.name)
      ? el("span", { class: "kept", title: retried ? "kept from the run this retries: not run again" : "its output was given when the run started" }, retried ? " kept" : " preset")
      : null;
    return el("tr", { "data-step-row": s.name }, el("td", {}, open, mark), el("td", {}, state(s.state)), el("td", {}, n || "–"),
      el("td", { class: "nowrap" }, a ? took(b - a) : ""), el("td", { class: "timeline" }, bar),
      el("td", { class: "err" }, s.error ? s.error.kind + ": " + s.error.message : ""));
  })));
}

async function children(box, id) {
  const { status, body } = await api(`/runs?parent=${id}&limit=20`);
  if (status !== 200 || !body.runs.length) { box.replaceChildren(); return; }
  box.replaceChildren(...[el("h2", {}, "Child runs"), runsTable(body.runs),
    body.next ? el("p", {}, el("a", { href: "#/?parent=" + id }, "All child runs")) : null].filter(Boolean));
}

function artifacts(box, run) {
  box.replaceChildren(...(run.artifacts.length ? [el("h2", {}, "Artifacts"), el("ul", {}, ...run.artifacts.map((a) => {
    const link = el("a", { href: "#", "data-artifact": a.name }, a.name);
    link.onclick = async (e) => {
      e.preventDefault();
      const res = await fetch(API + "/runs/" + run.id + "/artifacts/" + encodeURIComponent(a.name), { headers: headers() });
      const url = URL.createObjectURL(await res.blob());
      const d = el("a", { href: url, download: a.name }); document.body.append(d); d.click(); d.remove();
    };
    return el("li", {}, link, ` ${a.mime}, ${a.size} bytes, from ${a.step}`);
  }))] : []));
}

// Its notifications (the definition's `notify`): where each stands; a
// failed one can be sent again.
function notifications(box, run, reload) {
  const notes = run.notifications || [];
  box.replaceChildren(...(notes.length ? [el("h2", {}, "Notifications"), table("notifications", ["on", "to", "state", "tries", "error", "send again"],
    notes.map((n) => {
      const to = n.target.webhook ? "webhook " + n.target.webhook : "tool " + n.target.tool.server + "/" + n.target.tool.name;
      let again = null;
      if (n.state === "failed" && n.attempts > 0) {
        again = el("button", { "data-resend": n.id }, "Resend");
        again.onclick = async () => { await api("/notifications/" + n.id + "/resend", { method: "POST" }); reload(); };
      }
      return el("tr", { "data-notification": n.id }, el("td", {}, n.on), el("td", {}, to), el("td", {}, state(n.state)),
        el("td", {}, `${n.attempts}/${n.max_attempts}`), el("td", {}, n.error || ""), el("td", {}, again));
    }))] : []));
}

function waitForm(id, w, reload) {
  const f = schemaForm(w.schema, "data (JSON)");
  const msg = el("p", { class: "error", id: "wait-message", role: "status" });
  const submit = el("button", { type: "submit" }, "Answer");
  const item = w.item ?? null;
  const title = item === null ? `Step ${w.step} waits` : `Step ${w.step}, item ${item}, waits`;
  const form = el("form", { class: "wait", "data-wait": w.step, "data-item": item ?? "" }, el("h2", {}, title),
    w.prompt ? el("p", {}, w.prompt) : null,
    w.until ? el("p", { class: "deadline" }, "Answer by " + short(w.until) + " (it times out then)") : null,
    w.preview === undefined ? null : el("div", { class: "preview" }, el("h3", {}, "What it is about"),
      typeof w.preview === "string" ? el("p", {}, w.preview) : json(w.preview, "what the wait is about")),
    f.box, submit, msg);
  form.onsubmit = async (e) => {
    e.preventDefault();
    msg.textContent = "";
    let data;
    try { data = f.read(); } catch (err) { msg.textContent = "not JSON: " + err.message; return; }
    let r;
    try {
      r = await api(`/runs/${id}/steps/${encodeURIComponent(w.step)}/signal`, { method: "POST", body: item === null ? { data } : { data, item } });
    } catch (err) { msg.textContent = err.message; return; }
    if (r.status === 200) { form.remove(); reload(); return; }
    const left = f.errors(r.body.problems || (r.body.path ? [{ path: r.body.path, message: r.body.message }] : []), "/data");
    msg.textContent = left.length || !(r.body.problems || r.body.path) ? (r.body.message || ("HTTP " + r.status)) : "Some fields need a change (see each field).";
  };
  return form;
}
