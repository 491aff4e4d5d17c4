//! Parsed run plans, shared: runs whose stored definitions are equal (the
//! same template version, typically) get one `Arc<Definition>` instead of
//! a parse and a copy each. A driver that wakes from hibernation finds its
//! plan here rather than parsing it again.
//!
//! Keyed by template name and version, and compared by the whole stored
//! JSON (two ad-hoc definitions may share a name and version). Bounded: when
//! it holds more than [`CAP`] plans it starts over.
//!
//! The other way round, the JSON of the plan last submitted is kept, so
//! that the runs of one shared plan share its JSON too (one serialisation,
//! not one per run, and a reference rather than a copy in each record).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::model_glue::{Definition, Problems, parse_definition};
use crate::store::RunRecord;

/// Plans kept at most.
const CAP: usize = 256;

/// Template name and version.
type Key = (String, Option<u32>);
/// Plans of one key: the stored JSON and its parse.
type Same = Vec<(Arc<Value>, Arc<Definition>)>;

#[derive(Default)]
pub(super) struct Plans {
    /// The plans and how many there are.
    map: Mutex<(HashMap<Key, Same>, usize)>,
    /// The plan last serialised, and its JSON.
    last: Mutex<Option<(Arc<Definition>, Arc<Value>)>>,
}

/// The same stored definition: the same one, or an equal one.
fn same(a: &Arc<Value>, b: &Arc<Value>) -> bool {
    Arc::ptr_eq(a, b) || a == b
}

impl Plans {
    /// The JSON of `def` (shared with the runs of the same `Arc`).
    pub fn json(&self, def: &Arc<Definition>) -> Result<Arc<Value>, serde_json::Error> {
        let mut last = self.last.lock().unwrap();
        if let Some((d, j)) = last.as_ref()
            && Arc::ptr_eq(d, def)
        {
            return Ok(j.clone());
        }
        let j = Arc::new(serde_json::to_value(&**def)?);
        *last = Some((def.clone(), j.clone()));
        Ok(j)
    }

    /// The parsed plan of `rec` (shared with every run of an equal one).
    pub fn get(&self, rec: &RunRecord) -> Result<Arc<Definition>, Problems> {
        let key = (rec.template.clone(), rec.version);
        {
            let map = self.map.lock().unwrap();
            if let Some(d) = map.0.get(&key).and_then(|v| v.iter().find(|(j, _)| same(j, &rec.definition))) {
                return Ok(d.1.clone());
            }
        }
        let def = Arc::new(parse_definition(&rec.definition)?);
        let mut map = self.map.lock().unwrap();
        let (plans, len) = &mut *map;
        if *len >= CAP {
            plans.clear();
            *len = 0;
        }
        let same = plans.entry(key).or_default();
        match same.iter().find(|(j, _)| self::same(j, &rec.definition)) {
            Some((_, d)) => Ok(d.clone()),
            None => {
                same.push((rec.definition.clone(), def.clone()));
                *len += 1;
                Ok(def)
            }
        }
    }
}
