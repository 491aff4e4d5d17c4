//! A tool result kept whole as a step's output: nothing it returned is
//! dropped without a word.
//!
//! - `structuredContent`, when the tool gives it, is the value (`@step`).
//! - A result of text blocks only is its text, parsed as JSON when it is
//!   JSON (what a step's output always was).
//! - A result with other blocks (images, audio, resource links, embedded
//!   resources) is `{"text": ..., "content": [...]}`: every block in order,
//!   binary data (images, audio, blob resources) as an artifact of the
//!   step — stored content-addressed like a guest's — named in the block.
//!
//! Binary data is kept as artifacts with `structuredContent` too; blocks
//! the structured value does not hold are listed in [`Kept::notes`] (the
//! runner logs them), so nothing vanishes silently.

use base64::Engine as _;
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

/// Bytes a result carried, to store as an artifact of the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binary {
    pub name: String,
    pub mime: String,
    pub data: Vec<u8>,
}

/// A result as a step's output.
#[derive(Debug, Clone, PartialEq)]
pub struct Kept {
    /// The step's output (see the module docs).
    pub value: Value,
    /// The artifacts to store with the step.
    pub binaries: Vec<Binary>,
    /// What the value does not show, one line each.
    pub notes: Vec<String>,
}

/// `result` as a step's output; artifact names start with `prefix`
/// (`render-` → `render-image-1.png`).
pub fn keep(result: &CallToolResult, prefix: &str) -> Kept {
    let blocks: Vec<Value> = result.content.iter().filter_map(|b| serde_json::to_value(b).ok()).collect();
    let kind = |b: &Value| b.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    let texts: Vec<&str> = blocks.iter().filter(|b| kind(b) == "text").filter_map(|b| b["text"].as_str()).collect();
    let text = (!texts.is_empty()).then(|| texts.join("\n"));
    let mut binaries = vec![];
    let mut views = vec![];
    for b in &blocks {
        views.push(view(b, prefix, &mut binaries));
    }
    let others: Vec<&Value> = views.iter().filter(|v| v["type"] != "text").collect();
    if let Some(v) = &result.structured_content {
        let notes = others
            .iter()
            .map(|o| {
                let what = o.get("uri").or_else(|| o.get("artifact")).map(|x| x.to_string()).unwrap_or_default();
                format!("the tool also returned a {} block ({what}) that `structuredContent` does not hold", o["type"])
            })
            .collect();
        return Kept { value: v.clone(), binaries, notes };
    }
    if others.is_empty() {
        let value = match text {
            Some(t) => serde_json::from_str(&t).unwrap_or(Value::String(t)),
            None => Value::Null,
        };
        return Kept { value, binaries, notes: vec![] };
    }
    let value = json!({"text": text, "content": views});
    Kept { value, binaries, notes: vec![] }
}

/// One block as the output shows it; its bytes, if any, into `binaries`.
fn view(b: &Value, prefix: &str, binaries: &mut Vec<Binary>) -> Value {
    let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
    let mut out = Map::new();
    out.insert("type".into(), Value::String(kind.to_string()));
    let mut keep_bytes = |data: &str, mime: &str, what: &str, out: &mut Map<String, Value>| {
        match base64::engine::general_purpose::STANDARD.decode(data.as_bytes()) {
            Ok(bytes) => {
                let name = format!("{prefix}{what}-{}.{}", binaries.len() + 1, extension(mime));
                out.insert("artifact".into(), Value::String(name.clone()));
                out.insert("bytes".into(), json!(bytes.len()));
                binaries.push(Binary { name, mime: mime.to_string(), data: bytes });
            }
            Err(e) => {
                out.insert("error".into(), Value::String(format!("its data is not base64: {e}")));
            }
        }
    };
    match kind {
        "text" => {
            out.insert("text".into(), b.get("text").cloned().unwrap_or(Value::Null));
        }
        "image" | "audio" => {
            let mime = b.get("mimeType").and_then(Value::as_str).unwrap_or("application/octet-stream");
            out.insert("mime".into(), Value::String(mime.to_string()));
            keep_bytes(b.get("data").and_then(Value::as_str).unwrap_or(""), mime, kind, &mut out);
        }
        "resource" => {
            let r = b.get("resource").cloned().unwrap_or(Value::Null);
            out.insert("uri".into(), r.get("uri").cloned().unwrap_or(Value::Null));
            let mime = r.get("mimeType").and_then(Value::as_str);
            if let Some(m) = mime {
                out.insert("mime".into(), Value::String(m.to_string()));
            }
            if let Some(t) = r.get("text") {
                out.insert("text".into(), t.clone());
            } else if let Some(blob) = r.get("blob").and_then(Value::as_str) {
                keep_bytes(blob, mime.unwrap_or("application/octet-stream"), "resource", &mut out);
            }
        }
        // A resource link, and any block type to come: as the tool sent it.
        _ => return b.clone(),
    }
    Value::Object(out)
}

/// A file extension for `mime`.
fn extension(mime: &str) -> &'static str {
    match mime.split(';').next().unwrap_or("").trim() {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        "image/svg+xml" => "svg",
        "audio/wav" | "audio/x-wav" | "audio/wave" => "wav",
        "audio/mpeg" => "mp3",
        "audio/ogg" => "ogg",
        "application/json" => "json",
        "application/pdf" => "pdf",
        m if m.starts_with("text/") => "txt",
        _ => "bin",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;

    fn result(blocks: Vec<ContentBlock>) -> CallToolResult {
        CallToolResult::success(blocks)
    }

    #[test]
    fn text_only_stays_text_or_json() {
        assert_eq!(keep(&result(vec![ContentBlock::text("{\"a\": 1}")]), "").value, json!({"a": 1}));
        assert_eq!(keep(&result(vec![ContentBlock::text("hi")]), "").value, json!("hi"));
        assert_eq!(keep(&result(vec![]), "").value, Value::Null);
    }

    #[test]
    fn an_image_is_an_artifact_named_in_the_output() {
        let png = base64::engine::general_purpose::STANDARD.encode(b"\x89PNG fake");
        let r = result(vec![ContentBlock::text("here"), ContentBlock::image(png, "image/png")]);
        let k = keep(&r, "shot-");
        assert_eq!(
            k.binaries,
            vec![Binary { name: "shot-image-1.png".into(), mime: "image/png".into(), data: b"\x89PNG fake".to_vec() }]
        );
        assert_eq!(k.value["text"], "here");
        assert_eq!(
            k.value["content"][1],
            json!({"type": "image", "mime": "image/png", "artifact": "shot-image-1.png", "bytes": 9})
        );
    }

    #[test]
    fn structured_content_wins_and_what_it_lacks_is_noted() {
        let png = base64::engine::general_purpose::STANDARD.encode(b"x");
        let mut r = result(vec![ContentBlock::image(png, "image/png")]);
        r.structured_content = Some(json!({"ok": true}));
        let k = keep(&r, "");
        assert_eq!(k.value, json!({"ok": true}));
        assert_eq!(k.binaries.len(), 1, "the image is kept anyway");
        assert!(k.notes[0].contains("image") && k.notes[0].contains("image-1.png"), "{:?}", k.notes);
    }
}
