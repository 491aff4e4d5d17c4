// Reviewing a recording in the web view, in Debian's headless Chromium:
//
//   node tests/web/review.mjs BASE_URL SCREENSHOT_DIR RUN
//
// RUN is an open recording (tests/mcp-clients/recordings_check.py --phase
// start: input {msg: "hello there"}, a proxied `echo` of "hello there" and
// a preset). The page lists it and shows its calls; when the script prints
// `waiting for a call`, the caller adds one through MCP, and the page must
// show it without a reload. Then the proposed ref of the first call is
// refused (it stays a literal in the definition, and the input field it
// used is said unused by that call), and the recording is saved as
// template `greeting` from the page. Prints one line per check; exits 1 at
// the first that fails.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { auditor } from "./audit.mjs";

const [base, shots, run] = process.argv.slice(2);
mkdirSync(shots, { recursive: true });
let n = 0;
const ok = (what) => console.log(`ok ${++n} - ${what}`);
const fail = (what) => { console.log(`not ok ${++n} - ${what}`); process.exit(1); };
const check = (cond, what) => (cond ? ok(what) : fail(what));
const api = async (path) => (await fetch(`${base}/api/v1${path}`)).json();

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", args: ["--no-sandbox"] });
const page = await browser.newPage({ viewport: { width: 1300, height: 900 } });
const shot = (name) => page.screenshot({ path: `${shots}/${name}.png`, fullPage: true });
const audit = auditor({ page, check, shot, axePath: createRequire(import.meta.url).resolve("axe-core/axe.min.js") });
const definition = async () => JSON.parse(await page.textContent("#proposal details pre, #proposal .value pre"));

try {
  await page.goto(`${base}/#/recordings`);
  await page.waitForSelector(`[data-recording="${run}"]`);
  ok("the open recording is listed");
  await audit("recordings");
  await page.click(`[data-recording="${run}"] a`);
  await page.waitForSelector("[data-recorded=echo_1]");
  await page.waitForSelector("[data-proposal-row]");
  check((await page.$$("[data-recorded]")).length === 2, "its two calls are shown");
  await audit("recording-review");

  console.log("waiting for a call");
  await page.waitForSelector("[data-recorded=echo_2]", { timeout: 30000 });
  ok("a call made through MCP appears without a reload");

  // Refuse the ref proposed for the first call's message.
  const rows = await page.$$eval("[data-proposal-row]", (rs) => rs.map((r) => [r.dataset.proposalRow, r.textContent]));
  const first = rows.find(([, t]) => t.includes("echo_1") && t.includes("@input.msg"));
  check(first, `a ref to @input.msg is proposed for echo_1: ${JSON.stringify(rows)}`);
  check((await definition()).steps[0].input.message === "@input.msg", "applied, the definition reads the input");
  await page.uncheck(`input[data-proposal="${first[0]}"]`);
  await page.waitForFunction(() => {
    const pre = document.querySelector("#proposal details pre, #proposal .value pre");
    try { return JSON.parse(pre.textContent).steps[0].input.message === "hello there"; } catch (_) { return false; }
  });
  ok("refused, the definition keeps the literal");
  await shot("recording-refused");
  await page.fill("#template-name", "greeting");
  await page.click("#save-recording");
  await page.waitForFunction(() => location.hash.startsWith("#/templates/greeting"));
  await page.waitForSelector("#saved");
  const saved = await api("/templates/greeting");
  const message = Object.fromEntries(saved.definition.steps.filter((s) => s.input).map((s) => [s.name, s.input.message]));
  check(message.echo_1 === "hello there" && saved.definition.steps.some((s) => s.name === "echo_2"),
    `saved from the page with the refusal kept: ${JSON.stringify(message)}`);
  check((await api(`/runs/${run}`)).state === "completed", "the recording ended as a completed run");
  const left = (await api("/recordings")).recordings.map((r) => r.run_id);
  check(!left.includes(run), "it is no longer an open recording");
} catch (e) {
  await shot("failure").catch(() => {});
  fail(`unexpected: ${e.message}`);
} finally {
  await browser.close();
}
