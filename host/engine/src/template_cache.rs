//! Templates as a store last read them, kept while nothing in its
//! templates table changed.
//!
//! Why: a served `wf_<name>` call, an API or A2A start by template name
//! each read the template (its definition parsed from JSON) before the
//! pipeline finds it already validated: ~3% of the server's CPU per
//! trivial-3 run. A store keeps a number in the same transaction as every
//! change to its templates (a trigger, so another process's save, delete,
//! import or a hand edit counts too), reads that number first, and answers
//! from here while it is the one the record was read at.
//!
//! The number only grows, and a record is kept with the number read
//! *before* it: a change between the two reads leaves a record newer than
//! its number, which the next read finds stale and reads again. So a
//! cached answer is never older than the store.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::store::TemplateRecord;

/// Entries kept at most (then forgotten all at once).
const CAP: usize = 256;

/// What [`TemplateStore::template`](crate::store::TemplateStore::template)
/// answered, by (name, version asked), with the change number it was read at.
#[derive(Default)]
pub struct TemplateCache {
    map: Mutex<HashMap<Asked, (i64, TemplateRecord)>>,
}

/// A template's name and the version asked (`None`: its latest).
type Asked = (String, Option<u32>);

impl TemplateCache {
    /// The record read for `name` and `version` at change number `changes`,
    /// if that is still the store's number. With no number (its row
    /// deleted by hand), nothing is answered from here.
    pub fn get(&self, name: &str, version: Option<u32>, changes: Option<i64>) -> Option<TemplateRecord> {
        let changes = changes?;
        let map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        match map.get(&(name.to_string(), version)) {
            Some((at, t)) if *at == changes => Some(t.clone()),
            _ => None,
        }
    }

    /// Keeps `record`, read for `name` and `version` after the store's
    /// change number was `changes` (nothing is kept without a record or a
    /// number).
    pub fn put(&self, name: &str, version: Option<u32>, changes: Option<i64>, record: Option<&TemplateRecord>) {
        let (Some(changes), Some(record)) = (changes, record) else { return };
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= CAP {
            map.clear();
        }
        let key = (name.to_string(), version);
        // Two reads racing: the one at the later number stays.
        if map.get(&key).is_none_or(|(at, _)| *at <= changes) {
            map.insert(key, (changes, record.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(v: u32) -> TemplateRecord {
        TemplateRecord { name: "t".into(), version: v, definition: serde_json::json!({"v": v}), created_at: 1 }
    }

    #[test]
    fn a_record_is_answered_only_at_the_number_it_was_read_at() {
        let c = TemplateCache::default();
        assert!(c.get("t", None, Some(1)).is_none());
        c.put("t", None, Some(1), Some(&rec(1)));
        assert_eq!(c.get("t", None, Some(1)).map(|t| t.version), Some(1));
        assert!(c.get("t", None, None).is_none(), "no number (its row deleted): read each time");
        c.put("t", None, None, Some(&rec(9)));
        assert_eq!(c.get("t", None, Some(1)).map(|t| t.version), Some(1), "nothing kept without a number");
        assert!(c.get("t", None, Some(2)).is_none(), "a change since: read again");
        assert!(c.get("t", Some(1), Some(1)).is_none(), "another version asked");
        c.put("t", None, Some(2), Some(&rec(2)));
        assert_eq!(c.get("t", None, Some(2)).map(|t| t.version), Some(2));
        assert!(c.get("t", None, Some(1)).is_none());
        c.put("t", None, Some(1), Some(&rec(1)));
        assert_eq!(
            c.get("t", None, Some(2)).map(|t| t.version),
            Some(2),
            "a read at an older number does not replace it"
        );
    }

    #[test]
    fn past_its_cap_it_forgets_rather_than_grows() {
        let c = TemplateCache::default();
        for i in 0..CAP + 1 {
            c.put(&format!("t{i}"), None, Some(1), Some(&rec(1)));
        }
        assert!(c.map.lock().unwrap().len() <= CAP);
        assert!(c.get(&format!("t{CAP}"), None, Some(1)).is_some(), "the newest entry is kept");
    }
}
