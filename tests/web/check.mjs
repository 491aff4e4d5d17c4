// The web view of `weft serve --http`, in Debian's headless Chromium.
//
//   node tests/web/check.mjs BASE_URL SCREENSHOT_DIR [TOKEN]
//
// BASE_URL is the server's root (http://127.0.0.1:PORT). The server's store
// must hold the templates `approval` (input {order}, a signal wait `approve`
// with {ok: boolean, by: string of 2+}, then steps with sleeps between) and
// `gate` (a wait only); without a token, also `wide` (40 steps) and `fanout`
// (a for_each over `items`) for the operator's tasks (operator.mjs). Prints
// one line per check; exits 1 at the first that fails.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { operatorChecks } from "./operator.mjs";

const [base, shots, token] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });
let n = 0;
const ok = (what) => console.log(`ok ${++n} - ${what}`);
const fail = (what) => { console.log(`not ok ${++n} - ${what}`); process.exit(1); };
const check = (cond, what) => (cond ? ok(what) : fail(what));

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
const page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
const urls = [];
page.on("request", (r) => urls.push(r.url()));
const shot = (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
const api = async (path, opts = {}) => {
  const h = { "content-type": "application/json" };
  if (token) h.authorization = `Bearer ${token}`;
  const r = await fetch(`${base}/api/v1${path}`, { method: opts.method || "GET", headers: h, body: opts.body ? JSON.stringify(opts.body) : undefined });
  return { status: r.status, body: await r.json() };
};

const axePath = createRequire(import.meta.url).resolve("axe-core/axe.min.js");
async function operatorTasks() {
  await operatorChecks({ page, base, api, ok, check, shot, axePath });
}

try {
  await page.goto(`${base}/`);
  if (token) {
    await page.waitForSelector("#token-form");
    ok("the page asks for the token");
    await page.fill("#token-form input[name=token]", token);
    await page.click("#token-form button");
  }

  // A run started elsewhere shows up in the list, live.
  await page.waitForSelector("#runs-list");
  const started = await api("/runs", { method: "POST", body: { template: "gate" } });
  check(started.status === 201, "a run is started through the API");
  const gate = started.body.id;
  await page.waitForSelector(`[data-run="${gate}"]`, { timeout: 10000 });
  ok("the runs list shows the new run without a reload");
  await shot("01-runs");

  // Start `approval` from its template's form.
  await page.goto(`${base}/#/templates/approval`);
  await page.waitForSelector("form#start");
  await page.waitForSelector("svg.dag [data-step=approve]");
  ok("the template page draws its graph");
  await page.click("form#start button[type=submit]");
  await page.waitForFunction(() => document.querySelector("#start-message")?.textContent.length > 0);
  const startError = await page.textContent("form#start [data-field=order]");
  check(startError.length > 0, `a missing input is shown at its field: ${startError}`);
  await page.fill("form#start input[name=order]", "A-7");
  await page.click("form#start button[type=submit]");
  await page.waitForFunction(() => location.hash.startsWith("#/runs/r_"));
  const id = (await page.evaluate(() => location.hash)).slice("#/runs/".length);
  ok(`the form started run ${id}`);

  // The run waits: its form comes from the wait's schema.
  await page.waitForSelector("form[data-wait=approve]", { timeout: 10000 });
  await page.waitForSelector('svg.dag [data-step=approve][data-state=waiting]');
  ok("the waiting step is drawn waiting, with its form");
  const preview = await page.textContent("form[data-wait=approve] .preview pre");
  check(JSON.parse(preview).order === "A-7", `the wait's preview is shown above its form: ${preview}`);
  await shot("02-waiting");

  // An answer that breaks the schema is refused at its field; the step still waits.
  await page.fill("form[data-wait=approve] input[name=by]", "x");
  await page.click("form[data-wait=approve] button[type=submit]");
  await page.waitForFunction(() => document.querySelector("form[data-wait=approve] [data-field=by]")?.textContent.length > 0);
  const byError = await page.textContent("form[data-wait=approve] [data-field=by]");
  ok(`a wrong answer is refused at its field: ${byError}`);
  await page.waitForSelector('svg.dag [data-step=approve][data-state=waiting]');
  ok("the step still waits");
  await shot("03-refused");

  // Answer with the form.
  await page.goto(`${base}/#/runs/${id}`);
  await page.waitForSelector("form[data-wait=approve]");
  await page.evaluate(() => {
    window.seen = [];
    const snap = () => {
      const s = [...document.querySelectorAll("svg.dag [data-step]")].map((g) => g.getAttribute("data-state")).join(",");
      if (window.seen[window.seen.length - 1] !== s) window.seen.push(s);
    };
    setInterval(snap, 20);
    snap();
  });
  await page.check("form[data-wait=approve] input[name=ok]");
  await page.fill("form[data-wait=approve] input[name=by]", "ada");
  await page.click("form[data-wait=approve] button[type=submit]");
  await page.waitForSelector("#run-state [data-state=completed]", { timeout: 20000 });
  ok("answered by the form, the run completed");
  const seen = await page.evaluate(() => window.seen);
  const greens = seen.map((s) => s.split(",").filter((x) => x === "succeeded").length);
  const rising = greens.every((g, i) => i === 0 || g >= greens[i - 1]);
  const distinct = new Set(greens).size;
  check(rising && distinct >= 3 && greens[greens.length - 1] === seen[0].split(",").length,
    `the DAG turned green step by step (${greens.join(" → ")})`);
  await shot("04-completed");
  const events = await page.$$eval("#events li", (li) => li.map((x) => x.textContent));
  check(events.some((e) => e.includes("run.completed")), "the event log shows the run's end");
  check(events.some((e) => e.includes('progress tally: part 1 of 1 {"done":1,"of":1}')),
    "the event log shows a step's progress with its data");

  // Cancel the waiting `gate` run from its page.
  await page.goto(`${base}/#/runs/${gate}`);
  await page.waitForSelector("#cancel:not([disabled])");
  // Cancel asks first: declined, nothing happens.
  page.once("dialog", (d) => d.dismiss());
  await page.click("#cancel");
  await page.waitForTimeout(300);
  check((await api(`/runs/${gate}`)).body.state === "input-required", "a declined cancel leaves the run as it was");
  page.once("dialog", (d) => d.accept());
  await page.click("#cancel");
  await page.waitForSelector("#run-state [data-state=canceled]", { timeout: 10000 });
  ok("cancel works");
  await shot("05-canceled");
  check(!(await page.textContent("#run-head")).includes("null"), "the run's head shows no stray `null`");

  // Retry it: a new run, linked to the one it retries.
  await page.click("#retry");
  await page.click("#retry-start");
  await page.waitForFunction((old) => location.hash.startsWith("#/runs/r_") && !location.hash.endsWith(old), gate);
  await page.waitForSelector(`#retry-of a[href="#/runs/${gate}"]`, { timeout: 10000 });
  ok("retry started a new run that links to the canceled one");
  await shot("06-retried");

  if (!token) await operatorTasks();

  const leaked = token ? urls.filter((u) => u.includes(token)) : [];
  check(leaked.length === 0, "the token never appears in a URL");
} catch (e) {
  await shot("failure").catch(() => {});
  fail(`unexpected: ${e.message}`);
} finally {
  await browser.close();
}
