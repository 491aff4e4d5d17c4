//! `csv-to-json`: parse CSV text into JSON rows.
//!
//! Each row becomes an object keyed by column name (the header row, or
//! `column_1`, `column_2`... without one). With `infer_types` (the default)
//! cells become numbers, booleans or `null` when they look like one; a number
//! with a leading zero (`007`, a zip code) or an integer too big for 64 bits
//! (a long id) stays a string. Rows with a
//! different number of fields than the header are `invalid_input` naming
//! the line.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use weft_guest::{StepError, step};

/// Input of `csv-to-json`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Input {
    /// The CSV text (RFC 4180: fields with the delimiter, quotes or line
    /// breaks are quoted with `"`; `""` is a quote inside a quoted field).
    pub csv: String,
    /// The field separator, one ASCII character: `,` (default), `;`, `|`,
    /// or a tab (`"\t"`).
    #[serde(default = "comma")]
    pub delimiter: String,
    /// Whether the first row holds the column names (default true).
    #[serde(default = "yes")]
    pub header: bool,
    /// Turn cells that look like numbers, `true`/`false` or empty into JSON
    /// numbers, booleans and `null` (default true); otherwise every cell is
    /// a string.
    #[serde(default = "yes")]
    pub infer_types: bool,
}

fn comma() -> String {
    ",".to_string()
}

fn yes() -> bool {
    true
}

/// Output of `csv-to-json`.
#[derive(Debug, Serialize, JsonSchema)]
pub struct Output {
    /// One object per data row, keyed by column name.
    #[schemars(with = "Vec<Map<String, Value>>")]
    pub rows: Vec<Map<String, Value>>,
    /// The column names in order (a repeated header name gets `_2`, `_3`...).
    pub columns: Vec<String>,
}

/// Parse CSV text (a spreadsheet export, a report) into JSON rows keyed by
/// column name, with numbers and booleans recognised.
#[step(name = "csv-to-json")]
pub fn convert(input: Input) -> Result<Output, StepError> {
    let delimiter = match input.delimiter.as_bytes() {
        [b] if b.is_ascii() => *b,
        _ => {
            return Err(StepError::invalid_input(format!(
                "delimiter: expected one ASCII character, got {:?}",
                input.delimiter
            )));
        }
    };
    let mut reader =
        csv::ReaderBuilder::new().delimiter(delimiter).has_headers(false).from_reader(input.csv.as_bytes());
    let mut records = reader.records();
    let mut columns: Vec<String> = Vec::new();
    if input.header
        && let Some(first) = records.next()
    {
        columns = unique_names(first.map_err(csv_error)?.iter());
    }
    let mut rows = Vec::new();
    for record in records {
        let record = record.map_err(csv_error)?;
        if columns.is_empty() {
            columns = (1..=record.len()).map(|i| format!("column_{i}")).collect();
        }
        let row = columns
            .iter()
            .zip(record.iter())
            .map(|(name, cell)| {
                let value = if input.infer_types { infer(cell) } else { cell.into() };
                (name.clone(), value)
            })
            .collect();
        rows.push(row);
    }
    weft_guest::log!(debug: "parsed {} rows of {} columns", rows.len(), columns.len());
    Ok(Output { rows, columns })
}

fn csv_error(e: csv::Error) -> StepError {
    let at = e.position().map(|p| format!("line {}: ", p.line())).unwrap_or_default();
    match e.kind() {
        csv::ErrorKind::UnequalLengths { expected_len, len, .. } => {
            StepError::invalid_input(format!("csv: {at}found {len} fields, expected {expected_len} like the first row"))
        }
        _ => StepError::invalid_input(format!("csv: {at}{e}")),
    }
}

/// Header names with empties named `column_N` and repeats suffixed `_2`, `_3`...
fn unique_names<'a>(header: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for (i, raw) in header.enumerate() {
        let base = match raw.trim() {
            "" => format!("column_{}", i + 1),
            s => s.to_string(),
        };
        let mut name = base.clone();
        let mut n = 2;
        while names.contains(&name) {
            name = format!("{base}_{n}");
            n += 1;
        }
        names.push(name);
    }
    names
}

/// A cell as the JSON value it looks like.
fn infer(cell: &str) -> Value {
    let t = cell.trim();
    let digits = t.strip_prefix(['-', '+']).unwrap_or(t);
    let leading_zero = digits.len() > 1 && digits.starts_with('0') && !digits.starts_with("0.");
    match t {
        "" => Value::Null,
        "true" | "TRUE" | "True" => Value::Bool(true),
        "false" | "FALSE" | "False" => Value::Bool(false),
        _ if leading_zero || !digits.starts_with(|c: char| c.is_ascii_digit()) => cell.into(),
        _ => {
            if digits.bytes().all(|b| b.is_ascii_digit()) {
                // An integer: exact, or kept as text when too big (long ids).
                t.parse::<i64>()
                    .map(Value::from)
                    .or_else(|_| t.parse::<u64>().map(Value::from))
                    .unwrap_or_else(|_| cell.into())
            } else if let Some(n) = t.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
                Value::Number(n)
            } else {
                cell.into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use weft_guest::Step;

    fn call(input: Value) -> Result<Value, StepError> {
        WeftStep::call_json(input)
    }

    #[test]
    fn header_rows_and_type_inference() {
        let csv = "name,age,score,active,zip,note\nAda,36,9.5,true,02139,\n\"Lovelace, A\",-4,1e3,FALSE,10001,\"said \"\"hi\"\"\"\n";
        let out = call(json!({"csv": csv})).unwrap();
        assert_eq!(out["columns"], json!(["name", "age", "score", "active", "zip", "note"]));
        assert_eq!(
            out["rows"][0],
            json!({"name": "Ada", "age": 36, "score": 9.5, "active": true, "zip": "02139", "note": null})
        );
        assert_eq!(out["rows"][1]["name"], "Lovelace, A");
        assert_eq!(out["rows"][1]["age"], -4);
        assert_eq!(out["rows"][1]["score"], 1000.0);
        assert_eq!(out["rows"][1]["note"], "said \"hi\"");
    }

    #[test]
    fn no_header_no_inference_other_delimiter() {
        let out = call(json!({"csv": "1;x\n2;y", "delimiter": ";", "header": false, "infer_types": false})).unwrap();
        assert_eq!(out["columns"], json!(["column_1", "column_2"]));
        assert_eq!(out["rows"], json!([{"column_1": "1", "column_2": "x"}, {"column_1": "2", "column_2": "y"}]));
        let out = call(json!({"csv": "a\tb\n1\t2", "delimiter": "\t"})).unwrap();
        assert_eq!(out["rows"], json!([{"a": 1, "b": 2}]));
    }

    #[test]
    fn duplicate_and_empty_headers_get_unique_names() {
        let out = call(json!({"csv": "a,a,,a\n1,2,3,4"})).unwrap();
        assert_eq!(out["columns"], json!(["a", "a_2", "column_3", "a_3"]));
        assert_eq!(call(json!({"csv": ""})).unwrap(), json!({"rows": [], "columns": []}));
    }

    #[test]
    fn ragged_rows_and_bad_delimiter_are_invalid_input() {
        let e = call(json!({"csv": "a,b\n1,2\n3"})).unwrap_err();
        assert_eq!(e.code(), "invalid_input");
        assert_eq!(e.message(), "csv: line 3: found 1 fields, expected 2 like the first row");
        let e = call(json!({"csv": "a", "delimiter": ";;"})).unwrap_err();
        assert!(e.message().starts_with("delimiter: expected one ASCII character"), "{e}");
    }

    #[test]
    fn infer_edge_cases() {
        assert_eq!(infer("0"), json!(0));
        assert_eq!(infer("0.5"), json!(0.5));
        assert_eq!(infer("-007"), json!("-007"));
        assert_eq!(infer("NaN"), json!("NaN"));
        assert_eq!(infer("inf"), json!("inf"));
        assert_eq!(infer("12abc"), json!("12abc"));
        assert_eq!(infer("99999999999999999999"), json!("99999999999999999999"));
        assert_eq!(infer("18446744073709551615"), json!(u64::MAX));
        assert_eq!(infer("+3"), json!(3));
    }
}
