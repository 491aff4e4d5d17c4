//! A run's events as PostgreSQL stores them: one row per run and
//! transaction (`event_batches`; up to [`MAX_EVENTS_PER_ROW`] events, a
//! JSON array in it). A row per event was the largest cost of the database
//! per run (W10: 21% of its statements' time, ~9 rows per trivial-3 run);
//! a run's events of one transaction are written together and read in
//! order, so they are kept together. The `events` view lists them one per
//! row, for ad-hoc SQL.
//!
//! A row holds `[[seq, at, kind, step, item, data], ...]`, consecutive
//! seqs in order, with its first and last seq and the last event's time as
//! columns: the reads that need only the run's latest event read no JSON.

use std::io::Write as _;

use serde_json::Value;
use weft_engine::store::{EventRecord, NewEvent};
use weft_engine::{ItemIndex, RunId, Seq, StoreError};

/// The events of one run in one transaction, as a row's columns.
pub(crate) struct EventRow {
    pub run: String,
    pub first_seq: i64,
    pub last_seq: i64,
    pub last_at: i64,
    pub events: String,
}

/// The most events a row holds. A fan-out writes thousands of events of
/// one run in one transaction; a reader paging through them (`runs events`,
/// the page) decodes whole rows, so a row stays small: a page of `limit`
/// events decodes at most this many more.
pub(crate) const MAX_EVENTS_PER_ROW: usize = 32;

/// `events` as rows: one per run, or more when a run's seqs have gaps
/// (the engine's never do; the store's contract allows them) or it has more
/// than [`MAX_EVENTS_PER_ROW`]. A row holds every seq from its first to its
/// last, so two rows share a seq exactly when their ranges overlap, which
/// the insert checks with one index probe.
pub(crate) fn rows_of(events: &[NewEvent]) -> Vec<EventRow> {
    let mut at: std::collections::HashMap<&RunId, usize> = std::collections::HashMap::new();
    let mut runs: Vec<Vec<&NewEvent>> = vec![];
    for e in events {
        let i = *at.entry(&e.run).or_insert_with(|| {
            runs.push(vec![]);
            runs.len() - 1
        });
        runs[i].push(e);
    }
    let mut rows = vec![];
    for mut list in runs {
        list.sort_by_key(|e| e.seq);
        let mut start = 0;
        for i in 1..=list.len() {
            if i == list.len() || list[i].seq.0 != list[i - 1].seq.0 + 1 || i - start == MAX_EVENTS_PER_ROW {
                rows.push(row(&list[start..i]));
                start = i;
            }
        }
    }
    rows
}

/// One row of events of one run with consecutive seqs; `list` is not empty.
fn row(list: &[&NewEvent]) -> EventRow {
    let last = list[list.len() - 1];
    let mut text = Vec::with_capacity(64 * list.len());
    text.push(b'[');
    for (i, e) in list.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        // Writing to a Vec cannot fail, nor can serialising strings,
        // integers and a Value.
        let _ = write!(text, "[{},{},", e.seq.0, e.at);
        let _ = serde_json::to_writer(&mut text, &e.kind);
        text.push(b',');
        let _ = serde_json::to_writer(&mut text, &e.step);
        let _ = match e.item {
            Some(i) => write!(text, ",{},", i.0),
            None => write!(text, ",null,"),
        };
        let _ = serde_json::to_writer(&mut text, &e.data);
        text.push(b']');
    }
    text.push(b']');
    EventRow {
        run: last.run.as_str().to_string(),
        first_seq: list[0].seq.0 as i64,
        last_seq: last.seq.0 as i64,
        last_at: last.at,
        events: String::from_utf8(text).expect("serde_json writes UTF-8"),
    }
}

/// The events of a stored row, in seq order.
pub(crate) fn decode(run: &RunId, text: &str) -> Result<Vec<EventRecord>, StoreError> {
    let bad = |why: &str| StoreError::Corrupt(format!("an event row of run {run}: {why}"));
    let Value::Array(list) = weft_engine::stored::value(text)? else {
        return Err(bad("not an array"));
    };
    list.into_iter()
        .map(|e| {
            let Value::Array(f) = e else { return Err(bad("an event is not an array")) };
            let Ok::<[Value; 6], _>([seq, at, kind, step, item, data]) = f.try_into() else {
                return Err(bad("an event has not 6 fields"));
            };
            Ok(NewEvent {
                run: run.clone(),
                seq: Seq(seq.as_u64().ok_or_else(|| bad("seq"))?),
                at: at.as_i64().ok_or_else(|| bad("at"))?,
                kind: match kind {
                    Value::String(k) => k,
                    _ => return Err(bad("kind")),
                },
                step: match step {
                    Value::String(s) => Some(s),
                    Value::Null => None,
                    _ => return Err(bad("step")),
                },
                item: match item {
                    Value::Null => None,
                    i => Some(ItemIndex(i.as_u64().and_then(|i| u32::try_from(i).ok()).ok_or_else(|| bad("item"))?)),
                },
                data,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn event(run: &RunId, seq: u64, step: Option<&str>, item: Option<u32>, data: Value) -> NewEvent {
        NewEvent {
            run: run.clone(),
            seq: Seq(seq),
            at: 1_000 + seq as i64,
            kind: "step.succeeded".into(),
            step: step.map(str::to_string),
            item: item.map(ItemIndex),
            data,
        }
    }

    /// Events of two runs, interleaved, become one row per run that reads
    /// back as they were written, whatever their data holds.
    #[test]
    fn a_runs_events_round_trip_through_its_row() {
        let (a, b) = (RunId::derive(1, "a"), RunId::derive(1, "b"));
        let events = vec![
            event(&a, 4, Some("x"), None, json!({"out": "qu\"ote", "n": [1, 2]})),
            event(&b, 1, None, None, json!(null)),
            event(&a, 5, Some("y"), Some(7), json!("é\n")),
        ];
        let rows = rows_of(&events);
        assert_eq!(rows.len(), 2);
        // A gap in a run's seqs splits its row; a seq twice gives two rows
        // that start at it (the insert refuses the second).
        let gaps = rows_of(&[event(&a, 2, None, None, json!(1)), event(&a, 9, None, None, json!(2))]);
        assert_eq!(gaps.iter().map(|r| (r.first_seq, r.last_seq)).collect::<Vec<_>>(), [(2, 2), (9, 9)]);
        let twice = rows_of(&[event(&a, 3, None, None, json!(1)), event(&a, 3, None, None, json!(2))]);
        assert_eq!(twice.iter().map(|r| r.first_seq).collect::<Vec<_>>(), [3, 3]);
        // A fan-out's many events of one run: rows of at most 32.
        let many: Vec<NewEvent> = (1..=70).map(|i| event(&a, i, Some("x"), Some(i as u32), json!(i))).collect();
        let ranges: Vec<(i64, i64)> = rows_of(&many).iter().map(|r| (r.first_seq, r.last_seq)).collect();
        assert_eq!(ranges, [(1, 32), (33, 64), (65, 70)]);
        assert_eq!((rows[0].first_seq, rows[0].last_seq, rows[0].last_at), (4, 5, 1_005));
        assert_eq!(rows[0].run, a.as_str());
        assert_eq!(decode(&a, &rows[0].events).unwrap(), vec![events[0].clone(), events[2].clone()]);
        assert_eq!(decode(&b, &rows[1].events).unwrap(), vec![events[1].clone()]);
        assert!(decode(&a, "[[1, 2]]").is_err(), "a damaged row is reported");
    }
}
