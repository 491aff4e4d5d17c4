// A workflow's DAG drawn with dagre (vendored; see ../vendor/README.md):
// ranks, crossing reduction and edges routed around nodes are dagre's.
// This file picks the direction that fits the box (left to right, or top
// to bottom for long chains), draws it as SVG with each step's state,
// writes conditions on their edges, and adds zoom, pan and clickable steps.
"use strict";

import { el } from "./core.js";

const NS = "http://www.w3.org/2000/svg";
const MAX_HEIGHT = 560;
let dagIds = 0;

const FILL = { pending: "#eceff1", running: "#bbdefb", waiting: "#fff9c4", retrying: "#ffe0b2", succeeded: "#c8e6c9",
  failed: "#ffcdd2", skipped: "#e0e0e0", canceled: "#d7ccc8" };

function cut(text, n) { return text.length > n ? text.slice(0, n - 1) + "…" : text; }

// What a node says under its name: its action and state, its attempts,
// and for a `for_each` step its items by state (not attempts).
function subtitle(n, items, plain) {
  // A template's graph (no run): its actions only.
  if (plain) return [n.action];
  let s = `${n.action} · ${n.state}`;
  if (items) {
    const total = items.succeeded + items.failed + items.canceled + items.unfinished;
    const parts = [[items.succeeded, "ok"], [items.failed, "failed"], [items.canceled, "canceled"], [items.unfinished, "running"]]
      .filter(([c]) => c > 0).map(([c, w]) => `${c} ${w}`);
    return [s, `${total} items: ${parts.join(", ") || "none yet"}`];
  }
  if (n.attempts > 1) s += ` · ${n.attempts} attempts`;
  return [s];
}

function linesOf(n, opts) {
  return [cut(n.name, 30), ...subtitle(n, (opts.items || {})[n.name], opts.plain)].map((l) => cut(l, 34));
}

// What decides the layout: the steps, their edges, and how many lines each
// node has. A graph of the same shape is updated in place (states, counts),
// keeping the reader's zoom and position.
function shape(graph, opts) {
  return JSON.stringify([graph.nodes.map((n) => [n.name, n.action, linesOf(n, opts).length]),
    graph.edges.map((e) => [e.from, e.to, e.on, e.label || ""])]);
}

function layout(graph, dir, opts) {
  const g = new dagre.graphlib.Graph({ multigraph: true });
  g.setGraph({ rankdir: dir, nodesep: 22, ranksep: 46, edgesep: 10, marginx: 10, marginy: 10 });
  for (const n of graph.nodes) {
    const lines = linesOf(n, opts);
    // A for_each step's counts change as it runs: room for the longest.
    const longest = (opts.items || {})[n.name] ? 34 : Math.max(...lines.map((l) => l.length));
    const width = Math.max(130, Math.min(250, 16 + 7 * longest));
    g.setNode(n.name, { width, height: 14 + 15 * lines.length, lines, n });
  }
  graph.edges.forEach((e, i) => {
    const text = e.label ? cut(e.label, 30) : "";
    g.setEdge(e.from, e.to, { e, text, width: text ? 6 * text.length + 8 : 0, height: text ? 14 : 0, labelpos: "c" }, "e" + i);
  });
  dagre.layout(g);
  return g;
}

function svg(tag, attrs) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

// A smooth path through dagre's points for an edge.
function path(points) {
  let d = `M${points[0].x},${points[0].y}`;
  for (let i = 1; i < points.length - 1; i++) {
    const p = points[i], q = points[i + 1];
    d += ` Q${p.x},${p.y} ${(p.x + q.x) / 2},${(p.y + q.y) / 2}`;
  }
  const last = points[points.length - 1];
  return d + ` L${last.x},${last.y}`;
}

// The DAG of `graph` ({nodes: [{name, action, state, attempts}], edges:
// [{from, to, on, label?}]}). `opts.items`: for_each counts by step;
// `opts.plain`: no states (a template's graph);
// `opts.href(name)` and `opts.onStep(name)` make steps links.
export function dagView(graph, opts) {
  opts = opts || {};
  if (!graph.nodes.length) return el("p", { class: "dag-box" }, "No steps yet.");
  const id = "dag-" + (++dagIds);
  const box = el("div", { class: "dag-box" });
  const room = Math.max(280, Math.min(document.documentElement.clientWidth - 40, 1400));
  const fit = (g) => Math.min(1, room / g.graph().width, MAX_HEIGHT / g.graph().height);
  const lr = layout(graph, "LR", opts);
  const tb = graph.nodes.length > 1 ? layout(graph, "TB", opts) : lr;
  const g = fit(tb) > fit(lr) * 1.15 ? tb : lr;
  const gw = g.graph().width, gh = g.graph().height;
  const height = Math.max(90, Math.min(MAX_HEIGHT, gh * fit(g)));
  const root = svg("svg", { class: "dag", width: "100%", height, role: "group", "aria-labelledby": id + "-title", tabindex: "0" });
  const title = svg("title", { id: id + "-title" });
  title.textContent = `Graph of ${graph.nodes.length} steps (zoom: + and −, move: arrow keys or drag)`;
  root.append(title);
  root.insertAdjacentHTML("beforeend", `<defs><marker id="${id}-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#546e7a"/></marker></defs>`);
  const view = svg("g", { class: "viewport" });
  root.append(view);
  // Edges leave a step from its far side and enter the next from its near
  // side (bottom to top, or right to left), so no edge runs sideways
  // through its neighbours in the same rank; dagre's bends in between
  // stay in the gaps between ranks.
  const down = g.graph().rankdir === "TB";
  const anchor = (name, out) => {
    const n = g.node(name);
    return down ? { x: n.x, y: n.y + (out ? n.height / 2 : -n.height / 2) } : { x: n.x + (out ? n.width / 2 : -n.width / 2), y: n.y };
  };
  for (const ref of g.edges()) {
    const { e, text, x, y } = g.edge(ref);
    const points = [anchor(ref.v, true), ...g.edge(ref).points.slice(1, -1), anchor(ref.w, false)];
    const line = svg("path", { d: path(points), fill: "none", stroke: e.on === "failure" ? "#c62828" : "#546e7a",
      "stroke-width": "1.4", "marker-end": `url(#${id}-arrow)`, "data-edge": `${e.from}->${e.to}` });
    if (e.on !== "success") line.setAttribute("stroke-dasharray", "4 3");
    view.append(line);
    if (text) {
      const t = svg("text", { x, y: y + 4, class: "edge-label", "text-anchor": "middle" });
      t.textContent = text;
      const tip = svg("title"); tip.textContent = e.label; t.append(tip);
      view.append(svg("rect", { x: x - text.length * 3 - 4, y: y - 7, width: text.length * 6 + 8, height: 14, fill: "#fff", opacity: "0.9" }), t);
    }
  }
  for (const name of g.nodes()) {
    const { x, y, width, height: h, lines, n } = g.node(name);
    const link = opts.href ? svg("a", { href: opts.href(name) }) : svg("g");
    link.setAttribute("class", "node s-" + n.state);
    link.setAttribute("data-step", name);
    link.setAttribute("data-state", n.state);
    if (opts.onStep) link.addEventListener("click", (ev) => { ev.preventDefault(); opts.onStep(name); });
    link.append(svg("rect", { x: x - width / 2, y: y - h / 2, width, height: h, rx: 6, fill: FILL[n.state] || "#fff", stroke: "#78909c" }));
    lines.forEach((l, i) => {
      const t = svg("text", { x: x - width / 2 + 8, y: y - h / 2 + 18 + 15 * i, class: i ? "sub" : "name" });
      t.textContent = l;
      link.append(t);
    });
    view.append(link);
  }
  // Zoom and pan: the viewport's transform.
  let k = fit(g), tx = 0, ty = 0;
  const apply = () => view.setAttribute("transform", `translate(${tx},${ty}) scale(${k})`);
  const reset = () => { k = fit(g); tx = Math.max(0, (root.clientWidth - gw * k) / 2) || 0; ty = 0; apply(); };
  const zoom = (f, cx, cy) => {
    moved = true;
    const nk = Math.max(0.1, Math.min(4, k * f));
    cx = cx ?? root.clientWidth / 2; cy = cy ?? height / 2;
    tx = cx - (cx - tx) * (nk / k); ty = cy - (cy - ty) * (nk / k); k = nk; apply();
  };
  apply();
  // Fitted again when the box changes size, until the reader zooms or moves.
  let moved = false;
  new ResizeObserver(() => { if (!moved) reset(); }).observe(root);
  root.addEventListener("wheel", (ev) => {
    if (!ev.ctrlKey && !ev.metaKey) return; // a plain wheel scrolls the page
    ev.preventDefault();
    const r = root.getBoundingClientRect();
    zoom(ev.deltaY < 0 ? 1.15 : 1 / 1.15, ev.clientX - r.left, ev.clientY - r.top);
  }, { passive: false });
  let drag = null;
  root.addEventListener("pointerdown", (ev) => {
    if (ev.target.closest("a")) return;
    drag = { x: ev.clientX - tx, y: ev.clientY - ty };
    root.setPointerCapture(ev.pointerId);
  });
  root.addEventListener("pointermove", (ev) => { if (drag) { moved = true; tx = ev.clientX - drag.x; ty = ev.clientY - drag.y; apply(); } });
  root.addEventListener("pointerup", () => { drag = null; });
  root.addEventListener("keydown", (ev) => {
    const step = 40;
    const keys = { "+": () => zoom(1.2), "=": () => zoom(1.2), "-": () => zoom(1 / 1.2), "0": reset,
      ArrowLeft: () => { tx += step; apply(); }, ArrowRight: () => { tx -= step; apply(); },
      ArrowUp: () => { ty += step; apply(); }, ArrowDown: () => { ty -= step; apply(); } };
    if (keys[ev.key] && ev.target === root) { ev.preventDefault(); moved = ev.key !== "0"; keys[ev.key](); }
  });
  const button = (text, label, f) => { const b = el("button", { type: "button", "aria-label": label }, text); b.onclick = f; return b; };
  box.append(el("div", { class: "dag-tools" }, button("+", "zoom in", () => zoom(1.25)), button("−", "zoom out", () => zoom(0.8)),
    button("Fit", "Fit the graph to the box", () => { moved = false; reset(); }), button("1:1", "1:1 (actual size)", () => { moved = true; k = 1; apply(); })), root);
  box.dataset.direction = g === tb ? "TB" : "LR";
  // The same graph with new states: `true` when updated in place.
  const drawn = shape(graph, opts);
  box.update = (next, nextOpts) => {
    if (shape(next, nextOpts) !== drawn) return false;
    for (const n of next.nodes) {
      const node = [...view.querySelectorAll("[data-step]")].find((x) => x.dataset.step === n.name);
      node.setAttribute("class", "node s-" + n.state);
      node.setAttribute("data-state", n.state);
      node.querySelector("rect").setAttribute("fill", FILL[n.state] || "#fff");
      const texts = node.querySelectorAll("text");
      linesOf(n, nextOpts).forEach((l, i) => { if (texts[i].textContent !== l) texts[i].textContent = l; });
    }
    return true;
  };
  return box;
}
