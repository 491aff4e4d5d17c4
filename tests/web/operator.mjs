// An operator's tasks in the web view, at scale, with the accessibility
// and narrow-screen checks (called by check.mjs on the loopback server):
// search and page through 300 runs, find a failed one and why, retry a
// failed run and see what it kept, open a
// step's panel, answer a multi-line form, read a 1,500-item run and a
// 40-step graph, a server that does not answer, edit a template's `when`
// and run the new version, and axe-core on every page at 1300 and 390 px.
import { auditor } from "./audit.mjs";

export async function operatorChecks({ page, base, api, ok, check, shot, axePath }) {
  // Opens a page of the view and waits for `ready` on it. The page being
  // left is emptied first: a change of hash renders the next page
  // asynchronously, and under load `ready` matched the page left (its
  // `#retry` was clicked, then replaced by the new run's page).
  const open = async (hash, ready) => {
    await page.evaluate(() => document.getElementById("main")?.replaceChildren());
    const url = `${base}/#${hash}`;
    if (page.url() === url) await page.reload();
    else await page.goto(url);
    await page.waitForSelector(ready, { timeout: 20000 });
  };
  const audit = auditor({ page, check, shot, axePath });

  // 300 runs with a label, and one failed one-off definition.
  const batch = "b" + Date.now();
  for (let i = 0; i < 300; i += 25) {
    await Promise.all(Array.from({ length: 25 }, () => api("/runs", { method: "POST", body: { template: "gate", labels: { batch } } })));
  }
  const broken = await api("/runs", { method: "POST", body: { definition: { name: "broken", steps: [
    { name: "each", for_each: "@input.v", code: { plugin: "json-select" }, input: { data: {}, path: "a" } }] }, input: { v: 5 }, wait_ms: 10000 } });
  check(broken.body.state === "failed", `a one-off definition's run failed (${broken.body.state})`);

  // Search by label, then page through all 300 with Older and back with Newer.
  await open("/", "#runs");
  await page.fill("#search-label", `batch:${batch}`);
  await page.click("#filters button[type=submit]");
  await page.waitForFunction(() => location.hash.includes("label="));
  await page.waitForSelector("#runs tbody tr");
  const seen = new Set();
  for (let p = 1; ; p++) {
    await page.waitForFunction((p) => document.querySelector(".pager")?.textContent.includes(`page ${p},`), p);
    const ids = await page.$$eval("#runs tbody tr", (rows) => rows.map((r) => r.dataset.run));
    ids.forEach((id) => seen.add(id));
    if (await page.isDisabled("#older")) break;
    await page.click("#older");
  }
  check(seen.size === 300, `paging by the label showed all 300 runs once each (${seen.size})`);
  await page.click("#newer");
  await page.waitForFunction(() => document.querySelector(".pager")?.textContent.includes("page 5,"));
  ok("Newer goes back a page");
  await page.reload();
  await page.waitForFunction(() => document.querySelector(".pager")?.textContent.includes("page 5,"));
  await page.goBack();
  await page.waitForFunction(() => document.querySelector(".pager")?.textContent.includes("page 6,"));
  ok("a page's address keeps its number (reload, Back)");
  await audit("runs-paged");

  // Search by part of a template's name; the failed run says why.
  await open("/?template_contains=ROK", "#runs tbody tr");
  const rows = await page.$$eval("#runs tbody tr", (rows) => rows.map((r) => [r.dataset.run, r.querySelector(".err").textContent]));
  check(rows.length === 1 && rows[0][0] === broken.body.id && rows[0][1].startsWith("validation:"),
    `a template's name in any case finds its failed run, with why: ${JSON.stringify(rows)}`);
  await page.click(`#runs a[href="#/runs/${broken.body.id}"]`);
  await page.waitForSelector("#run-head h1");
  const head = await page.textContent("#run-head");
  const linked = await page.$$eval("#run-head a", (a) => a.map((x) => x.getAttribute("href")));
  check(head.includes("a one-off definition") && !linked.some((h) => h.startsWith("#/templates/")),
    `a one-off definition's run does not link to a template page that does not exist: ${head} ${linked}`);

  // Retry a failed run from its page: the step that succeeded is kept.
  const failed = await api("/runs", { method: "POST", body: { template: "twostep", input: { v: 5 }, wait_ms: 10000 } });
  check(failed.body.state === "failed", `a run failed at its second step (${failed.body.state})`);
  await open(`/runs/${failed.body.id}`, "#retry");
  await page.click("#retry");
  // It asks first: from where, with which input; this error needs a change.
  check((await page.textContent("#retry-warning")).includes("validation"), "the retry says a validation error needs a change first");
  await page.fill("#retry-input", JSON.stringify({ v: [1, 2] }));
  await page.click("#retry-start");
  await page.waitForSelector(`#retry-of a[href="#/runs/${failed.body.id}"]`, { timeout: 10000 });
  await page.waitForSelector("[data-step-row=first] .kept", { timeout: 10000 });
  const again = (await page.evaluate(() => location.hash)).slice("#/runs/".length);
  const retried = (await api(`/runs/${again}`)).body;
  const firstRan = (await api(`/runs/${again}/events`)).body.events.filter((e) => e.step === "first" && e.kind === "step.running");
  check(firstRan.length === 1 && firstRan[0].data.how === "preset" && retried.steps[0].output === 1,
    `the retry kept the step that succeeded (shown "kept"), not run again: ${JSON.stringify(firstRan)}`);
  await page.waitForSelector("#run-state [data-state=completed]", { timeout: 10000 });
  ok("with the input changed, the retry completed");
  await open(`/runs/${failed.body.id}`, `#retried-as a[href="#/runs/${again}"]`);
  ok("the failed run links to its retry");
  await audit("run-retried");

  // A step's panel from the DAG; its address opens it again.
  const done = await api("/runs", { method: "POST", body: { template: "approval", input: { order: "B-1" } } });
  await open(`/runs/${done.body.id}`, "form[data-wait=approve]");
  // A multi-line answer keeps its lines: the switch makes a text area.
  await page.click("form[data-wait=approve] [data-field-row=by] button.lines");
  await page.fill("form[data-wait=approve] textarea[name=by]", "ada\nlovelace");
  await page.check("form[data-wait=approve] input[name=ok]");
  await page.click("form[data-wait=approve] button[type=submit]");
  await page.waitForSelector("#run-state [data-state=completed]", { timeout: 20000 });
  const answered = (await api(`/runs/${done.body.id}`)).body.steps.find((s) => s.name === "approve").output;
  check(answered.by === "ada\nlovelace", `a multi-line answer keeps its lines: ${JSON.stringify(answered)}`);
  await page.click("svg.dag a[data-step=record]");
  await page.waitForSelector("#step-panel h2");
  const panel = await page.textContent("#step-panel");
  check(panel.includes("Input") && panel.includes("Output") && panel.includes("lovelace") && page.url().endsWith("/steps/record"),
    "a step's node opens its panel with its input and output, and its address");
  await audit("run-step-panel");
  await page.reload();
  await page.waitForSelector("#step-panel h2");
  check((await page.textContent("#step-panel h2")).includes("record"), "the step's address opens its panel");

  // Pasting lines into a one-line field keeps them (it becomes a text area).
  await open("/templates/approval", "form#start");
  await page.focus("form#start input[name=order]");
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.setData("text", "line one\nline two");
    document.activeElement.dispatchEvent(new ClipboardEvent("paste", { clipboardData: dt, bubbles: true, cancelable: true }));
  });
  const pasted = await page.inputValue("form#start textarea[name=order]");
  check(pasted === "line one\nline two", `pasted lines are kept: ${JSON.stringify(pasted)}`);
  await audit("template");

  // A server that does not answer: said at the form and in the header; nothing changes.
  const waiting = await api("/runs", { method: "POST", body: { template: "approval", input: { order: "C-1" } } });
  await open(`/runs/${waiting.body.id}`, "form[data-wait=approve]");
  await audit("run-waiting");
  await page.route("**/signal", (r) => r.abort("connectionrefused"));
  await page.check("form[data-wait=approve] input[name=ok]");
  await page.fill("form[data-wait=approve] input[name=by]", "bob");
  await page.click("form[data-wait=approve] button[type=submit]");
  await page.waitForFunction(() => document.querySelector("#wait-message")?.textContent.includes("unreachable"));
  check((await page.textContent("#conn")).includes("unreachable"), "the header says the server is unreachable");
  check((await api(`/runs/${waiting.body.id}`)).body.state === "input-required", "the wait is still open");
  await page.unroute("**/signal");
  // Live updates keep the reader's zoom: the graph is updated in place.
  await page.click(".dag-tools button[aria-label='zoom in']");
  const zoomed = await page.$eval("svg.dag g.viewport", (g) => g.getAttribute("transform"));
  await page.click("form[data-wait=approve] button[type=submit]");
  await page.waitForSelector("#run-state [data-state=completed]", { timeout: 20000 });
  await page.waitForSelector("svg.dag [data-step=tally][data-state=succeeded]");
  check((await page.$eval("svg.dag g.viewport", (g) => g.getAttribute("transform"))) === zoomed,
    "the graph turned green in place, keeping the zoom");

  // 1,500 items: counted by state; the event log is paged.
  const items = Array.from({ length: 1500 }, (_, i) => i);
  const fan = await api("/runs", { method: "POST", body: { template: "fanout", input: { items }, wait_ms: 120000 } });
  check(fan.body.state === "completed", `the 1,500-item run completed (${fan.body.state})`);
  await open(`/runs/${fan.body.id}`, "svg.dag [data-step=each]");
  await page.waitForFunction(() => [...document.querySelectorAll("#events li")].some((li) => li.textContent.includes("run.completed")));
  const node = await page.textContent("svg.dag [data-step=each]");
  check(node.includes("1500 items: 1500 ok") && !node.includes("attempts"), `a for_each node counts items, not attempts: ${node}`);
  const [lines, tall, where] = await page.evaluate(() => [document.querySelectorAll("#events li").length,
    document.documentElement.scrollHeight, document.querySelector("#events-where").textContent]);
  const total = Number(where.split(" of ")[1]);
  check(lines > 0 && lines <= 100 && total > 3000 && tall < 8000,
    `the event log shows its last page (${lines} of ${total} events, ${where}), the page stays short (${tall} px)`);
  await page.click("#events-first");
  check((await page.textContent("#events li")).startsWith("1 "), "its first page starts at the first event");
  await page.click("svg.dag a[data-step=each]");
  await page.waitForSelector("#items [data-count=succeeded]");
  check((await page.textContent("#items [data-count=succeeded]")).startsWith("1500"), "the step's panel counts its items");
  await audit("run-1500-items");

  // 40 steps: laid out with no node over another and no edge behind a node.
  await open("/templates/wide", "svg.dag [data-step=s7_4]");
  await audit("template-40-steps");
  const layout = await page.evaluate(() => {
    const nodes = [...document.querySelectorAll("svg.dag [data-step]")].map((g) => {
      const r = g.querySelector("rect");
      return { name: g.dataset.step, x: +r.getAttribute("x"), y: +r.getAttribute("y"), w: +r.getAttribute("width"), h: +r.getAttribute("height") };
    });
    const inside = (p, n, m) => p.x > n.x + m && p.x < n.x + n.w - m && p.y > n.y + m && p.y < n.y + n.h - m;
    let overlaps = 0, behind = [];
    for (const a of nodes) for (const b of nodes) {
      if (a !== b && a.x < b.x + b.w && b.x < a.x + a.w && a.y < b.y + b.h && b.y < a.y + a.h) overlaps++;
    }
    for (const path of document.querySelectorAll("svg.dag path[data-edge]")) {
      const [from, to] = path.dataset.edge.split("->");
      const len = path.getTotalLength();
      for (let t = 0; t <= len; t += 3) {
        const p = path.getPointAtLength(t);
        const hit = nodes.find((n) => n.name !== from && n.name !== to && inside(p, n, 1));
        if (hit) { behind.push(`${from}->${to} under ${hit.name}`); break; }
      }
    }
    const labels = document.querySelectorAll("svg.dag text.edge-label").length;
    return { count: nodes.length, overlaps, behind, labels };
  });
  check(layout.count === 40 && layout.overlaps === 0, `40 steps, none over another (${JSON.stringify(layout.overlaps)})`);
  check(layout.behind.length === 0, `no edge passes behind a node: ${layout.behind.slice(0, 5).join(", ")}`);
  check(layout.labels >= 1, `conditions are written on their edges (${layout.labels})`);
  const scale = () => page.$eval("svg.dag g.viewport", (g) => g.getAttribute("transform"));
  const before = await scale();
  await page.click(".dag-tools button[aria-label='zoom in']");
  check((await scale()) !== before, "the graph zooms");

  await open("/templates", "#templates");
  await audit("templates");
  await editTemplate({ page, open, api, ok, check, audit });
}

// Edit a `when` in the page, see each change checked, save a version,
// compare it with the last, and run it.
async function editTemplate({ page, open, api, ok, check, audit }) {
  await open("/templates/branch", "#edit");
  await page.click("#edit");
  await page.waitForSelector('[data-step-card=big] input[data-path="/steps/0/when/gte"]');
  await page.waitForSelector("#validation[data-valid=true]");
  ok("the editor shows the template's steps as forms, checked valid");
  await audit("editor");
  // A ref to a step that does not exist: said at its field as you type.
  await page.fill('input[data-path="/steps/0/when/ref"]', "@nosuch.n");
  await page.waitForFunction(() => document.querySelector('[data-error-for="/steps/0/when/ref"]')?.textContent.length > 0);
  const said = await page.textContent('[data-error-for="/steps/0/when/ref"]');
  check(said.includes("nosuch"), `a bad ref is shown at its field: ${said}`);
  await page.fill('input[data-path="/steps/0/when/ref"]', "@input.n");
  await page.fill('input[data-path="/steps/0/when/gte"]', "3");
  await page.waitForSelector("#validation[data-valid=true]");
  const text = await page.inputValue("#definition-json");
  check(JSON.parse(text).steps[0].when.gte === 3, "the JSON beside the form follows it");
  // And the form follows the JSON.
  const edited = JSON.parse(text);
  edited.description = "big from 3";
  await page.fill("#definition-json", JSON.stringify(edited, null, 2));
  await page.waitForFunction(() => document.querySelector('input[data-path="/description"]')?.value === "big from 3");
  ok("the form follows the JSON");
  await page.click("#save");
  await page.waitForFunction(() => location.hash.includes("version=2"));
  await page.waitForSelector("#saved");
  const saved = (await api("/templates/branch")).body;
  check(saved.version === 2 && saved.definition.steps[0].when.gte === 3 && saved.definition.steps[1].when.lt === 10,
    `saved as version 2 with the new condition and the rest as it was: ${JSON.stringify(saved.definition.steps.map((s) => s.when))}`);
  await page.waitForSelector('#diff [data-change="/steps/big/when/gte"]');
  const change = await page.textContent('#diff [data-change="/steps/big/when/gte"]');
  check(change.includes("10") && change.includes("3"), `the versions' difference shows the condition: ${change}`);
  await page.fill("form#start input[name=n]", "5");
  await page.click("form#start button[type=submit]");
  await page.waitForFunction(() => location.hash.startsWith("#/runs/r_"));
  await page.waitForSelector("#run-state [data-state=completed]", { timeout: 20000 });
  const id = (await page.evaluate(() => location.hash)).slice("#/runs/".length);
  const run = (await api(`/runs/${id}`)).body;
  const states = Object.fromEntries(run.steps.map((s) => [s.name, s.state]));
  check(run.version === 2 && states.big === "succeeded" && states.small === "succeeded",
    `the new version ran with its condition (v${run.version}: ${JSON.stringify(states)})`);
}

