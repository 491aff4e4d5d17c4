//! Run views bounded for a reader who pays for every byte: an agent.
//!
//! A run of a 20,000-item `for_each` is half a megabyte as a whole
//! [`RunView`]; an agent reading it pays for all of it on every later turn.
//! [`bound`] shows such a run under a total budget: each value (the run's
//! input and output, each step's input and output, each try's input) that
//! is larger than it may be is replaced by a [`Trimmed`] marker — its size,
//! its length, its first items, and the exact call that pages it — and the
//! view lists every value it trimmed. Nothing is trimmed silently.
//!
//! [`page`] is that call's answer: one page of a stored value (items of an
//! array, entries of an object, characters of a string), at a JSON Pointer
//! into it, bounded the same way.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::view::RunView;

/// The most a bounded run view should take, serialized (bytes). An MCP
/// result carries it twice (as text and as `structuredContent`): under
/// 64 KB in all.
pub const VIEW_BUDGET: usize = 28 * 1024;

/// The most one page of [`page`] takes (bytes), unless `limit` asks less.
pub const PAGE_BUDGET: usize = 32 * 1024;

/// Per-value budgets tried in turn until the whole view fits [`VIEW_BUDGET`].
const VALUE_BUDGETS: [usize; 4] = [4096, 1024, 256, 64];

/// What stands in for a value too large to show: `{"trimmed": {...}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Trimmed {
    /// `array`, `object` or `string`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its size as compact JSON.
    pub bytes: usize,
    /// Its items (array), entries (object) or characters (string).
    pub length: usize,
    /// Its first items, entries or characters.
    pub head: Value,
    /// The call that reads it whole, page by page.
    pub read_with: ReadWith,
}

/// A tool call: `{"tool", "arguments"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ReadWith {
    pub tool: String,
    pub arguments: Value,
}

/// Where a trimmed value was, and how to read it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TrimmedAt {
    /// JSON Pointer into the view (`/steps/2/output`).
    pub at: String,
    /// Its size as compact JSON.
    pub bytes: usize,
    pub read_with: ReadWith,
}

/// Which stored value of a run: its own or a step's, input or output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueRef {
    /// `None`: the run's own.
    pub step: Option<String>,
    /// The input rather than the output.
    pub input: bool,
}

impl ValueRef {
    fn read_with(&self, tool: &str, run: &str) -> ReadWith {
        let mut a = Map::new();
        a.insert("run_id".into(), Value::String(run.to_string()));
        if let Some(s) = &self.step {
            a.insert("step".into(), Value::String(s.clone()));
        }
        if self.input {
            a.insert("of".into(), Value::String("input".into()));
        }
        ReadWith { tool: tool.to_string(), arguments: Value::Object(a) }
    }
}

/// `view` with every value larger than a per-value budget trimmed, the
/// largest budget (4 KB, then 1 KB, 256 B, 64 B) under which the whole view
/// fits [`VIEW_BUDGET`]; the list says what was trimmed and how to read it
/// with `tool`. A try's input is trimmed too, but only the latest attempt's
/// input of a step can be read back whole (the store keeps each, the tool
/// pages the step's).
pub fn bound(view: RunView, tool: &str) -> (RunView, Vec<TrimmedAt>) {
    let mut last = (view.clone(), vec![]);
    for budget in VALUE_BUDGETS {
        let mut v = view.clone();
        let trimmed = trim_all(&mut v, budget, tool);
        let fits = serde_json::to_vec(&v).map(|b| b.len()).unwrap_or(usize::MAX) <= VIEW_BUDGET;
        last = (v, trimmed);
        if fits {
            break;
        }
    }
    last
}

fn trim_all(v: &mut RunView, budget: usize, tool: &str) -> Vec<TrimmedAt> {
    let run = v.id.clone();
    let mut out = vec![];
    let mut capped = vec![];
    let mut one = |value: &mut Value, at: String, which: ValueRef| {
        if let Some(t) = trim(value, budget, which.read_with(tool, &run)) {
            out.push(TrimmedAt { at, bytes: t.bytes, read_with: t.read_with.clone() });
            *value = serde_json::json!({ "trimmed": t });
        }
    };
    one(&mut v.input, "/input".into(), ValueRef { step: None, input: true });
    if let Some(o) = v.output.as_mut() {
        one(o, "/output".into(), ValueRef { step: None, input: false });
    }
    for (i, s) in v.steps.iter_mut().enumerate() {
        let step = Some(s.name.clone());
        if let Some(o) = s.output.as_mut() {
            one(o, format!("/steps/{i}/output"), ValueRef { step: step.clone(), input: false });
        }
        if let Some(x) = s.input.as_mut() {
            one(x, format!("/steps/{i}/input"), ValueRef { step: step.clone(), input: true });
        }
        for (j, t) in s.tries.iter_mut().enumerate() {
            if let Some(x) = t.input.as_mut() {
                one(x, format!("/steps/{i}/tries/{j}/input"), ValueRef { step: step.clone(), input: true });
            }
        }
        // The view lists the first tries of a step only: say so, and how
        // to read an item past them.
        if s.tries.len() >= crate::view::MAX_TRIES_SHOWN && s.attempts as usize > s.tries.len() {
            let mut read_with = ValueRef { step: step.clone(), input: true }.read_with(tool, &run);
            read_with.arguments["item"] = Value::from(s.tries.len());
            capped.push(TrimmedAt { at: format!("/steps/{i}/tries"), bytes: 0, read_with });
        }
    }
    out.extend(capped);
    // The resume block repeats small results: capped alike (each step's
    // output above says how to read it whole).
    crate::resume::cap_all(&mut v.resume, budget);
    out
}

/// The marker for `value` when its compact JSON is over `budget` bytes
/// (numbers, booleans and null are never trimmed).
pub fn trim(value: &Value, budget: usize, read_with: ReadWith) -> Option<Trimmed> {
    let bytes = serde_json::to_vec(value).map(|b| b.len()).unwrap_or(0);
    if bytes <= budget {
        return None;
    }
    // The head takes at most a quarter of the budget.
    let room = budget / 4;
    let (kind, length, head) = match value {
        Value::Array(a) => ("array", a.len(), Value::Array(head_items(a.iter().cloned(), room))),
        Value::Object(o) => {
            // Every key it can show; a value too large for the head shows
            // as its type and size, so the keys are never hidden.
            let mut head = Map::new();
            let mut used = 0;
            for (k, v) in o {
                let n = serde_json::to_vec(v).map(|b| b.len()).unwrap_or(usize::MAX);
                let shown = if n + k.len() + 4 <= room.saturating_sub(used) {
                    v.clone()
                } else {
                    let kind = match v {
                        Value::Array(a) => format!("array of {} items", a.len()),
                        Value::Object(m) => format!("object of {} keys", m.len()),
                        Value::String(s) => format!("string of {} characters", s.chars().count()),
                        _ => "value".to_string(),
                    };
                    serde_json::json!({"trimmed": format!("{kind}, {n} bytes")})
                };
                let n = serde_json::to_vec(&shown).map(|b| b.len()).unwrap_or(0) + k.len() + 4;
                if used + n > room && !head.is_empty() {
                    break;
                }
                used += n;
                head.insert(k.clone(), shown);
            }
            ("object", o.len(), Value::Object(head))
        }
        Value::String(s) => ("string", s.chars().count(), Value::String(s.chars().take(room).collect())),
        _ => return None,
    };
    Some(Trimmed { kind: kind.into(), bytes, length, head, read_with })
}

/// The first items of `items` whose compact JSON together fits `room`.
fn head_items(items: impl Iterator<Item = Value>, room: usize) -> Vec<Value> {
    let mut used = 0;
    let mut out = vec![];
    for item in items {
        let n = serde_json::to_vec(&item).map(|b| b.len()).unwrap_or(usize::MAX) + 1;
        if used + n > room {
            break;
        }
        used += n;
        out.push(item);
    }
    out
}

/// One page of a stored value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Page {
    /// The JSON Pointer read (empty: the whole value).
    pub pointer: String,
    /// `array`, `object`, `string`, or the scalar's type (then `value` is it whole).
    #[serde(rename = "type")]
    pub kind: String,
    /// Items, entries or characters in all.
    pub total: usize,
    pub offset: usize,
    /// The page: an array's items, an object's entries (as an object), a
    /// string's characters, or a scalar. An item over the page budget is
    /// itself trimmed: read it with its pointer (`/<index>`).
    pub value: Value,
    /// Where the next page starts; absent after the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
}

/// Why a page cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageRefused {
    /// The pointer names nothing in the value.
    #[error("no value at `{0}` (a JSON Pointer: `/items/3`, `/name`)")]
    NoSuchPointer(String),
}

/// The page of `value` at `pointer` from item `offset`: at most `limit`
/// items (entries, characters), at most [`PAGE_BUDGET`] bytes. An item
/// larger than the page alone is shown trimmed, to be read by its pointer.
pub fn page(
    value: &Value,
    pointer: &str,
    offset: usize,
    limit: Option<usize>,
    read_with: impl Fn(String) -> ReadWith,
) -> Result<Page, PageRefused> {
    let at = value.pointer(pointer).ok_or_else(|| PageRefused::NoSuchPointer(pointer.to_string()))?;
    let limit = limit.unwrap_or(usize::MAX).max(1);
    let fit = |items: Vec<(String, Value)>| -> (Vec<(String, Value)>, usize) {
        let mut used = 0;
        let mut out = vec![];
        for (key, item) in items.into_iter().take(limit) {
            let inner = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
            let item = match trim(&item, PAGE_BUDGET / 2, read_with(inner)) {
                Some(t) => serde_json::json!({ "trimmed": t }),
                None => item,
            };
            let n = serde_json::to_vec(&item).map(|b| b.len()).unwrap_or(0) + key.len() + 4;
            if used + n > PAGE_BUDGET && !out.is_empty() {
                break;
            }
            used += n;
            out.push((key, item));
        }
        let n = out.len();
        (out, n)
    };
    let (kind, total, value, count) = match at {
        Value::Array(a) => {
            let items = a.iter().enumerate().skip(offset).map(|(i, v)| (i.to_string(), v.clone())).collect();
            let (kept, n) = fit(items);
            ("array", a.len(), Value::Array(kept.into_iter().map(|(_, v)| v).collect()), n)
        }
        Value::Object(o) => {
            let items = o.iter().skip(offset).map(|(k, v)| (k.clone(), v.clone())).collect();
            let (kept, n) = fit(items);
            ("object", o.len(), Value::Object(kept.into_iter().collect()), n)
        }
        Value::String(s) => {
            let total = s.chars().count();
            let take = limit.min(PAGE_BUDGET / 2);
            let text: String = s.chars().skip(offset).take(take).collect();
            let n = text.chars().count();
            ("string", total, Value::String(text), n)
        }
        scalar => {
            let kind = match scalar {
                Value::Null => "null",
                Value::Bool(_) => "boolean",
                Value::Number(_) => "number",
                _ => "string",
            };
            return Ok(Page {
                pointer: pointer.to_string(),
                kind: kind.into(),
                total: 1,
                offset: 0,
                value: scalar.clone(),
                next_offset: None,
            });
        }
    };
    let end = offset.saturating_add(count);
    Ok(Page {
        pointer: pointer.to_string(),
        kind: kind.into(),
        total,
        offset,
        value,
        next_offset: (end < total).then_some(end),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rw(p: String) -> ReadWith {
        ReadWith { tool: "run_value".into(), arguments: json!({"pointer": p}) }
    }

    #[test]
    fn a_large_array_is_trimmed_with_its_length_head_and_call() {
        let big: Vec<Value> = (0..20_000).map(|i| json!({"n": i})).collect();
        let t = trim(&Value::Array(big), 4096, rw(String::new())).unwrap();
        assert_eq!((t.kind.as_str(), t.length), ("array", 20_000));
        let head = t.head.as_array().unwrap();
        assert!(!head.is_empty() && head.len() < 200, "{}", head.len());
        assert_eq!(head[0], json!({"n": 0}));
        assert!(trim(&json!([1, 2, 3]), 4096, rw(String::new())).is_none(), "small values stay");
        assert!(trim(&json!(12345), 1, rw(String::new())).is_none(), "scalars stay");
    }

    #[test]
    fn a_large_objects_keys_all_show_in_its_head() {
        let big: Vec<Value> = (0..3000).map(|i| json!({"n": i})).collect();
        let t = trim(&json!({"rows": big, "count": 3000}), 4096, rw(String::new())).unwrap();
        assert_eq!(t.head["count"], 3000);
        assert!(t.head["rows"]["trimmed"].as_str().unwrap().starts_with("array of 3000 items"), "{}", t.head);
    }

    #[test]
    fn pages_cover_every_item_once_in_order() {
        let big: Vec<Value> = (0..5000).map(|i| json!({"n": i, "pad": "x".repeat(20)})).collect();
        let v = json!({"rows": big});
        let mut seen = vec![];
        let mut offset = 0;
        loop {
            let p = page(&v, "/rows", offset, None, rw).unwrap();
            assert!(serde_json::to_vec(&p).unwrap().len() <= PAGE_BUDGET + 512);
            seen.extend(p.value.as_array().unwrap().iter().map(|x| x["n"].as_i64().unwrap()));
            match p.next_offset {
                Some(n) => offset = n,
                None => break,
            }
        }
        assert_eq!(seen, (0..5000).collect::<Vec<i64>>());
        let p = page(&v, "/rows/7/n", 0, None, rw).unwrap();
        assert_eq!((p.kind.as_str(), &p.value), ("number", &json!(7)));
        assert_eq!(page(&v, "/nope", 0, None, rw), Err(PageRefused::NoSuchPointer("/nope".into())));
        let p = page(&v, "/rows", 10, Some(3), rw).unwrap();
        assert_eq!((p.value.as_array().unwrap().len(), p.next_offset), (3, Some(13)));
    }

    #[test]
    fn an_item_larger_than_a_page_is_trimmed_with_its_pointer() {
        let v = json!(["small", "y".repeat(PAGE_BUDGET)]);
        let p = page(&v, "", 0, None, rw).unwrap();
        assert_eq!(p.value[0], "small");
        assert_eq!(p.value[1]["trimmed"]["read_with"]["arguments"]["pointer"], "/1");
    }
}
