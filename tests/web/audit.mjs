// The checks every page of the web view passes, at 1300 and 390 px:
// axe-core (WCAG) finds nothing serious or critical, and the page itself
// never scrolls sideways (wide tables scroll in their own box). Takes a
// screenshot at each width.
import { readFileSync } from "node:fs";

export function auditor({ page, check, shot, axePath }) {
  const axe = readFileSync(axePath, "utf8");
  return async (name) => {
    for (const width of [1300, 390]) {
      await page.setViewportSize({ width, height: 900 });
      await page.waitForTimeout(150);
      await shot(`${name}-${width}`);
      await page.evaluate(axe);
      const found = await page.evaluate(async () => (await window.axe.run(document, { resultTypes: ["violations"] })).violations
        .filter((v) => v.impact === "serious" || v.impact === "critical")
        .map((v) => `${v.id} (${v.impact}): ${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(" | ")}`));
      check(found.length === 0, `axe-core: nothing serious on ${name} at ${width} px${found.length ? ": " + found.join("; ") : ""}`);
      const [sw, cw] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
      check(sw <= cw, `${name} fits ${width} px without scrolling sideways (${sw} ≤ ${cw})`);
    }
    await page.setViewportSize({ width: 1300, height: 900 });
  };
}
