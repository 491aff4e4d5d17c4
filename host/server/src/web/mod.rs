//! The web view at `/`: one page and its scripts and style, embedded in
//! the binary (no CDN; works offline). It holds no data itself: everything
//! it shows comes from the API (`/api/v1`) with the bearer token the
//! operator typed (kept in the tab's session storage, sent as a header,
//! never in a URL), and it updates from the API's event streams, not by
//! reloading.
//!
//! What it shows: runs, searchable and paged, with durations, errors and
//! parents; a run's DAG (laid out by the vendored dagre, zoomable, steps
//! clickable) coloured live by step state, a panel per step (input, output,
//! attempts, items, log, artifacts), its event log in pages, child runs,
//! cancel (confirmed) and retry, and a form generated from a waiting
//! step's JSON Schema that answers it; templates with their graphs, their
//! versions and what changed between two, a form from `input_schema` that
//! starts a run of a version, and an editor (steps as forms beside the
//! JSON, checked by `POST /validate` as you type, saved as a new version);
//! open recordings, and one reviewed (its calls as they arrive, the refs a
//! save proposes, each refused or accepted) and saved as a template.
//!
//! The scripts are ES modules, one per part of the page (`js/`): `core`
//! (API calls, streams, the connection indicator), `forms`, `dag`, `runs`,
//! `run`, `steps`, `templates`, `editor`, `recordings`, and `app` (the
//! routes).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

const INDEX: &str = include_str!("index.html");

/// Every asset: its name under `/assets/`, its media type, its bytes.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.css", "text/css; charset=utf-8", include_str!("app.css")),
    ("app.js", JS, include_str!("js/app.js")),
    ("core.js", JS, include_str!("js/core.js")),
    ("forms.js", JS, include_str!("js/forms.js")),
    ("dag.js", JS, include_str!("js/dag.js")),
    ("runs.js", JS, include_str!("js/runs.js")),
    ("run.js", JS, include_str!("js/run.js")),
    ("steps.js", JS, include_str!("js/steps.js")),
    ("templates.js", JS, include_str!("js/templates.js")),
    ("editor.js", JS, include_str!("js/editor.js")),
    ("recordings.js", JS, include_str!("js/recordings.js")),
    ("dagre.min.js", JS, include_str!("vendor/dagre.min.js")),
];
const JS: &str = "text/javascript; charset=utf-8";

/// The page and its assets (outside the token check: they carry no data).
pub fn router() -> axum::Router {
    axum::Router::new()
        .route("/", get(|| async { ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response() }))
        .route("/assets/{name}", get(asset))
}

async fn asset(Path(name): Path<String>) -> axum::response::Response {
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, mime, body)) => ([(header::CONTENT_TYPE, *mime)], *body).into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    /// The vendored dagre is the file vendor/README.md names, unchanged.
    #[test]
    fn vendored_dagre_is_the_release_named() {
        let readme = include_str!("vendor/README.md");
        let (_, _, body) = super::ASSETS.iter().find(|(n, _, _)| *n == "dagre.min.js").unwrap();
        let hash: String = Sha256::digest(body.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert!(readme.contains(&hash), "vendor/README.md does not name sha256 {hash}");
    }

    /// Every module a script imports is served.
    #[test]
    fn every_import_is_an_asset() {
        for (name, _, body) in super::ASSETS {
            for part in body.split("from \"./").skip(1) {
                let file = part.split('"').next().unwrap();
                assert!(super::ASSETS.iter().any(|(n, _, _)| *n == file), "{name} imports {file}, not served");
            }
        }
    }
}
