//! `jq`: transform JSON with a jq filter — filter, map, count, group,
//! reshape in one step, in the language every LLM already knows.
//!
//! The filter runs in jaq (a maintained Rust implementation of jq's
//! language, with jq's standard library: `map`, `select`, `length`,
//! `group_by`, `sort_by`, `add`, `to_entries`, `test`, ...), compiled into
//! this guest, so it runs sandboxed like every code step: no files, no
//! network, bounded by the step's timeout and memory.
//!
//! Output: the one value the filter yields (`length` → `3`). A filter that
//! yields no value or several fails naming how many, unless `all` is set
//! (then the output is the array of every value): a stream is never cut
//! to its first value silently. A filter that does not parse or names an
//! unknown function fails `invalid_input` with the line and column and a
//! caret under the place; an error while running (`.a` of a number) fails
//! `filter_error` with jq's message.

use jaq_core::load::{Arena, File, Loader};
use jaq_core::{Compiler, Ctx, Vars, data, unwrap_valr};
use jaq_json::Val;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use weft_guest::{StepError, step};

/// Input of `jq`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The JSON the filter reads as `.` (any JSON value).
    pub data: Value,
    /// A jq filter: `map(select(.qty > 10)) | length`, `[.[] | .name]`,
    /// `group_by(.kind) | map({kind: .[0].kind, n: length})`.
    pub filter: String,
    /// Output every value the filter yields, as an array (default false:
    /// the filter must yield exactly one value, which is the output).
    #[serde(default)]
    pub all: bool,
}

/// Run a jq filter over `data` (jq's language and standard library via
/// jaq): the output is the one value it yields, or every value as an array
/// with `all: true`.
#[step(name = "jq")]
pub fn run(input: Input) -> Result<Value, StepError> {
    let mut values = evaluate(&input.data, &input.filter)?;
    if input.all {
        return Ok(Value::Array(values));
    }
    match values.len() {
        1 => Ok(values.remove(0)),
        n => Err(StepError::new(
            "filter_error",
            format!(
                "the filter yields {n} values, and the output is one value: wrap it in [ ... ] to collect them (`[.[] | ...]`), or set `all: true`"
            ),
        )),
    }
}

/// Whether `filter` is a valid jq filter: `Err` says where it is not (the
/// message of the step's `invalid_input`), so a definition can be checked
/// before it runs.
pub fn check(filter: &str) -> Result<(), String> {
    compile(filter).map(|_| ()).map_err(|e| e.message().to_string())
}

/// `filter` compiled, or `invalid_input` pointing into it.
fn compile(filter: &str) -> Result<jaq_core::Filter<data::JustLut<Val>>, StepError> {
    let program = File { code: filter, path: () };
    let defs = jaq_core::defs().chain(jaq_std::defs()).chain(jaq_json::defs());
    let funs = jaq_core::funs().chain(jaq_std::funs()).chain(jaq_json::funs());
    let loader = Loader::new(defs);
    let arena = Arena::default();
    let modules = loader.load(&arena, program).map_err(|errs| {
        let mut found = vec![];
        for (_, e) in errs {
            match e {
                jaq_core::load::Error::Io(io) => {
                    found.extend(io.into_iter().map(|(s, m)| (offset(filter, s), format!("cannot load: {m}"))))
                }
                jaq_core::load::Error::Lex(lex) => found.extend(
                    lex.into_iter().map(|(expect, s)| (offset(filter, s), format!("expected {}", expect.as_str()))),
                ),
                jaq_core::load::Error::Parse(parse) => found.extend(
                    parse.into_iter().map(|(expect, s)| (offset(filter, s), format!("expected {}", expect.as_str()))),
                ),
            }
        }
        located(filter, found)
    })?;
    let compiled = Compiler::default().with_funs(funs).compile(modules).map_err(|errs| {
        let found = errs
            .into_iter()
            .flat_map(|(_, es)| es)
            .map(|(s, undefined)| (offset(filter, s), format!("undefined {} `{s}`", undefined.as_str())))
            .collect();
        located(filter, found)
    })?;
    Ok(compiled)
}

/// Every value `filter` yields for `data`, in order.
pub fn evaluate(data: &Value, filter: &str) -> Result<Vec<Value>, StepError> {
    let compiled = compile(filter)?;
    let input = jaq_json::read::parse_single(data.to_string().as_bytes())
        .map_err(|e| StepError::invalid_input(format!("`data` cannot be read as JSON: {e}")))?;
    let ctx = Ctx::<data::JustLut<Val>>::new(&compiled.lut, Vars::new([]));
    let mut out = vec![];
    for v in compiled.id.run((ctx, input)).map(unwrap_valr) {
        let v = v.map_err(|e| StepError::new("filter_error", format!("the filter failed: {e}")))?;
        out.push(to_json(&v)?);
    }
    Ok(out)
}

/// A jq value as JSON (NaN and infinities, which JSON has not, are refused).
fn to_json(v: &Val) -> Result<Value, StepError> {
    let text = v.to_string();
    serde_json::from_str(&text)
        .map_err(|e| StepError::new("filter_error", format!("the filter yields `{text}`, which is not JSON ({e})")))
}

/// Where `part` (a slice of `code`) starts in `code`, in bytes.
fn offset(code: &str, part: &str) -> usize {
    let (start, at) = (code.as_ptr() as usize, part.as_ptr() as usize);
    if at >= start && at <= start + code.len() { at - start } else { code.len() }
}

/// `invalid_input` listing each problem at its line and column, with the
/// line and a caret under the place.
fn located(code: &str, mut found: Vec<(usize, String)>) -> StepError {
    found.sort();
    found.dedup();
    let lines: Vec<String> = found
        .iter()
        .map(|(at, what)| {
            let before = &code[..(*at).min(code.len())];
            let line = before.matches('\n').count() + 1;
            let line_start = before.rfind('\n').map_or(0, |i| i + 1);
            let col = before[line_start..].chars().count() + 1;
            let text = code[line_start..].lines().next().unwrap_or("");
            format!("filter {line}:{col}: {what}\n  {text}\n  {}^", " ".repeat(col - 1))
        })
        .collect();
    StepError::invalid_input(format!("the jq filter is not valid:\n{}", lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn orders() -> Value {
        json!([{"id": 1, "qty": 4}, {"id": 2, "qty": 12}, {"id": 3, "qty": 30}])
    }

    fn jq(data: Value, filter: &str, all: bool) -> Result<Value, StepError> {
        run(Input { data, filter: filter.into(), all })
    }

    #[test]
    fn filter_then_count_is_one_filter_and_the_count_is_a_number() {
        assert_eq!(jq(orders(), "map(select(.qty > 10)) | length", false).unwrap(), json!(2));
        assert_eq!(jq(orders(), "[.[] | select(.qty > 10) | .id]", false).unwrap(), json!([2, 3]));
        assert_eq!(jq(orders(), "map(.qty) | add", false).unwrap(), json!(46));
        let grouped =
            jq(json!([{"k": "a"}, {"k": "b"}, {"k": "a"}]), "group_by(.k) | map({k: .[0].k, n: length})", false);
        assert_eq!(grouped.unwrap(), json!([{"k": "a", "n": 2}, {"k": "b", "n": 1}]));
    }

    #[test]
    fn a_stream_is_never_cut_to_its_first_value() {
        let e = jq(orders(), ".[] | .id", false).unwrap_err();
        assert!(e.message().contains("yields 3 values"), "{}", e.message());
        assert_eq!(jq(orders(), ".[] | .id", true).unwrap(), json!([1, 2, 3]));
        assert!(jq(orders(), "empty", false).unwrap_err().message().contains("yields 0 values"));
        assert_eq!(jq(orders(), "empty", true).unwrap(), json!([]));
    }

    #[test]
    fn errors_point_into_the_filter() {
        let e = jq(orders(), "map(select(.qty > 10)", false).unwrap_err();
        assert_eq!(e.code(), "invalid_input");
        assert!(e.message().contains("filter 1:"), "{}", e.message());
        let e = jq(orders(), "map(selekt(.qty > 10))", false).unwrap_err();
        assert!(
            e.message().contains("undefined filter `selekt`") && e.message().contains("filter 1:5"),
            "{}",
            e.message()
        );
        assert!(e.message().contains("\n      ^"), "a caret under `selekt`: {}", e.message());
        let e = jq(json!(5), ".a", false).unwrap_err();
        assert_eq!(e.code(), "filter_error");
        assert!(e.message().contains("cannot") || e.message().contains("index"), "{}", e.message());
    }
}
