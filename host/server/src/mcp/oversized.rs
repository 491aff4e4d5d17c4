//! A message over the cap of one MCP message still gets an answer: a
//! JSON-RPC error (-32600) naming the cap, with the request's `id` when it
//! can be found, so the client is never left waiting and the session stays
//! usable. Over stdio (`stdio.rs`) the line is skipped to its end; over
//! HTTP the body is read to its end without keeping it (`http.rs`).
//!
//! The id is looked for without parsing the message (it is too large to
//! keep): the first top-level-looking `"id"` before any `"params"` in the
//! message's first bytes (clients write `jsonrpc`, `id`, `method`, then
//! `params`), else the last `"id"` in its last bytes (a client that writes
//! `params` first). A message whose id cannot be found is answered with
//! `"id": null`, as JSON-RPC says for a request whose id cannot be read.

use serde_json::{Value, json};

/// How much of a message's start and end is kept to find its id.
pub const KEPT: usize = 64 << 10;

/// What is kept of a message past the cap while the rest of it is read
/// and dropped: its size so far, its first and its last [`KEPT`] bytes.
#[derive(Debug, Default)]
pub struct Kept {
    pub size: usize,
    pub head: Vec<u8>,
    pub tail: Vec<u8>,
}

impl Kept {
    /// Starts from the bytes read before the cap was passed.
    pub fn of(read: &[u8]) -> Kept {
        let mut k = Kept::default();
        k.push(read);
        k
    }

    /// Counts `more`, keeping what the head still lacks and the last bytes.
    pub fn push(&mut self, more: &[u8]) {
        self.size += more.len();
        let room = KEPT.saturating_sub(self.head.len());
        self.head.extend_from_slice(&more[..room.min(more.len())]);
        self.tail.extend_from_slice(&more[more.len().saturating_sub(KEPT)..]);
        let cut = self.tail.len().saturating_sub(KEPT);
        self.tail.drain(..cut);
    }

    /// The JSON-RPC error for this message over `cap`.
    pub fn refusal(&self, cap: usize) -> Value {
        too_large(request_id(&self.head, &self.tail), self.size, cap)
    }
}

/// The `id` of a message of which `head` (its first bytes) and `tail` (its
/// last bytes) were kept, or `null`.
pub fn request_id(head: &[u8], tail: &[u8]) -> Value {
    let head = String::from_utf8_lossy(head);
    let params = head.find("\"params\"").unwrap_or(head.len());
    if let Some(id) = ids(&head).into_iter().find(|(at, _)| *at < params).map(|(_, id)| id) {
        return id;
    }
    let tail = String::from_utf8_lossy(tail);
    ids(&tail).pop().map(|(_, id)| id).unwrap_or(Value::Null)
}

/// Every `"id": <number or string>` in `text`, with where it starts.
fn ids(text: &str) -> Vec<(usize, Value)> {
    let mut found = vec![];
    let mut from = 0;
    while let Some(i) = text[from..].find("\"id\"") {
        let at = from + i;
        from = at + 4;
        let rest = text[from..].trim_start();
        let Some(rest) = rest.strip_prefix(':') else { continue };
        let rest = rest.trim_start();
        // A number or a string, read by the JSON parser itself.
        let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
        if let Some(Ok(v @ (Value::Number(_) | Value::String(_)))) = stream.next() {
            found.push((at, v));
        }
    }
    found
}

/// The JSON-RPC error for a message of `size` bytes (at least: over
/// HTTP a body past the cap may be counted only so far) over `cap`.
pub fn too_large(id: Value, size: usize, cap: usize) -> Value {
    let message = format!(
        "Invalid Request: the message is {size} bytes or more, over the {cap}-byte cap of one MCP message; nothing was done. Send large data by reference (a file or URL the workflow reads) or in smaller pieces"
    );
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": message, "data": {"max_bytes": cap}}})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_found_before_params_or_at_the_end() {
        let head = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"id":99,"data":"xxxx"#;
        assert_eq!(request_id(head, b"xxx\"}}}"), json!(7));
        let head = br#"{"jsonrpc": "2.0", "id" : "req-1", "method": "x""#;
        assert_eq!(request_id(head, b""), json!("req-1"));
        // params first: the id is the last one at the end
        let head = br#"{"params":{"arguments":{"id":99,"data":"xxxx"#;
        assert_eq!(request_id(head, br#"xxxx"}},"id":12,"method":"tools/call","jsonrpc":"2.0"}"#), json!(12));
        assert_eq!(request_id(br#"{"method":"notifications/x","params":{"a":"xx"#, b"xx\"}}"), Value::Null);
    }

    #[test]
    fn kept_holds_the_size_the_first_and_the_last_bytes() {
        let mut k = Kept::of(b"{\"id\":4,");
        k.push(&vec![b'x'; 3 * KEPT]);
        k.push(b"}");
        assert_eq!(k.size, 8 + 3 * KEPT + 1);
        assert_eq!((k.head.len(), k.tail.len()), (KEPT, KEPT));
        assert!(k.head.starts_with(b"{\"id\":4,") && k.tail.ends_with(b"x}"));
        assert_eq!(k.refusal(10)["id"], 4);
    }

    #[test]
    fn the_error_names_the_cap() {
        let e = too_large(json!(3), 20 << 20, 16 << 20);
        assert_eq!(e["id"], 3);
        assert_eq!(e["error"]["code"], -32600);
        assert_eq!(e["error"]["data"]["max_bytes"], 16 << 20);
        assert!(e["error"]["message"].as_str().unwrap().contains("16777216-byte cap"));
    }
}
