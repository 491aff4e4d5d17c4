// weft's web view: routes the page's address (`#/…`) to its page. Every
// page reads /api/v1 and follows its server-sent-event streams (core.js).
//   #/                      runs (searchable, paged)
//   #/runs/ID[/steps/STEP]  one run (and a step's panel)
//   #/templates[/NAME]      templates, one template (?version=N)
//   #/templates/NAME/edit   the template editor; #/new a new template
//   #/recordings[/ID]       open recordings; one reviewed and saved
"use strict";

import { el, main, newPage, setOnToken, mayLeave } from "./core.js";
import { runsPage } from "./runs.js";
import { runPage } from "./run.js";
import { templatesPage, templatePage } from "./templates.js";
import { editorPage } from "./editor.js";
import { recordingsPage, recordingPage } from "./recordings.js";

let here = location.hash;

async function route() {
  if (location.hash !== here && !mayLeave()) { history.replaceState(null, "", here); return; }
  here = location.hash;
  newPage();
  const h = location.hash.slice(1) || "/";
  const [path, query] = h.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "runs" && parts[1]) await runPage(parts[1], parts[2] === "steps" ? parts[3] : null);
    else if (parts[0] === "templates" && parts[1] && parts[2] === "edit") await editorPage(parts[1]);
    else if (parts[0] === "templates" && parts[1]) await templatePage(parts[1], new URLSearchParams(query || ""));
    else if (parts[0] === "new") await editorPage(null);
    else if (parts[0] === "recordings" && parts[1]) await recordingPage(parts[1]);
    else if (parts[0] === "recordings") await recordingsPage();
    else if (parts[0] === "templates") await templatesPage();
    else await runsPage(new URLSearchParams(query || ""));
    document.title = "weft · " + (main.querySelector("h1")?.textContent || "");
  } catch (e) {
    if (e.message !== "unauthorized") main.replaceChildren(el("h1", {}, "Error"), el("p", { class: "error", role: "alert" }, e.message));
  }
}

setOnToken(route);
window.addEventListener("hashchange", route);
route();
