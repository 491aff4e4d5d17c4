//! What saving a recording says about the template it makes, so a replay
//! with new input flows through or the caller learns why it would not:
//!
//! - **candidates**: literal arguments equal to a value of the recording's
//!   input that were not proposed as refs (small numbers, short strings,
//!   booleans: the value rules make them coincidences), each with an id
//!   (`c1`, ...) the caller may accept;
//! - **unused input**: the input's fields no step uses — a replay with
//!   another value of one changes nothing;
//! - **effects**: for each input field, the steps whose input it changes
//!   directly and those it reaches through them.

use std::collections::{BTreeMap, BTreeSet};

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;
use weft_model::{RefRoot, Segment, Template};

use super::{Recording, Replacement, leaves, literals};

/// What a replay with another value of one input field changes.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
pub struct Effect {
    /// The input field (`a`).
    pub field: String,
    /// Steps whose input refers to it.
    pub changes: Vec<String>,
    /// Steps that depend on those (their input may change in turn).
    pub through: Vec<String>,
}

/// What a save says (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Review {
    /// Input fields no step uses.
    pub unused_input: Vec<String>,
    /// Per input field.
    pub effects: Vec<Effect>,
    /// Sentences for the caller.
    pub warnings: Vec<String>,
}

/// The top-level fields of the recording input that the arguments `args`
/// (refs applied) use; a ref to the whole `@input` uses every field.
pub(super) fn used_inputs(args: &[(String, Value)]) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for (_, v) in args {
        for site in Template::compile_lenient(v.clone()).0.sites() {
            if site.reference.root != RefRoot::Input {
                continue;
            }
            match site.reference.path.first() {
                Some(Segment::Key(k)) => {
                    used.insert(k.clone());
                }
                Some(Segment::Index(i)) => {
                    used.insert(i.to_string());
                }
                None => {
                    used.insert(String::new());
                }
            }
        }
    }
    used
}

impl Recording {
    /// Literal arguments equal to a value of the input that `proposals`
    /// do not cover (see the module docs), as replacements `c1`, `c2`, ...
    pub fn candidates(&self, proposals: &[Replacement]) -> Vec<Replacement> {
        let mut sources = vec![];
        leaves("@input", &self.input, &mut sources);
        sources.retain(|(r, v)| r != "@input" && !v.is_null() && v != &Value::Object(Default::default()));
        let mut out = vec![];
        for step in &self.steps {
            let mut found = vec![];
            literals("", &step.arguments, &mut found);
            for (path, value) in found {
                let covered = proposals
                    .iter()
                    .any(|p| p.step == step.name && (p.path == path || path.starts_with(&format!("{}/", p.path))));
                let empty = matches!(&value, Value::Array(a) if a.is_empty());
                if covered || empty {
                    continue;
                }
                if let Some((reference, _)) = sources.iter().find(|(_, v)| v == &value) {
                    out.push(Replacement {
                        id: format!("c{}", out.len() + 1),
                        step: step.name.clone(),
                        path,
                        value,
                        reference: reference.clone(),
                    });
                }
            }
        }
        out
    }

    /// What the template made with `accepted` says (see the module docs);
    /// `open` are the candidates not accepted.
    pub fn review(&self, accepted: &[Replacement], open: &[Replacement]) -> Review {
        let args = self.arguments(accepted);
        let used = used_inputs(&args);
        let whole = used.contains("");
        let fields: Vec<String> = match &self.input {
            Value::Object(m) => m.keys().cloned().collect(),
            _ => vec![],
        };
        // Which steps each step's arguments refer to.
        let deps: BTreeMap<&str, BTreeSet<String>> = args
            .iter()
            .map(|(n, v)| {
                let t = Template::compile_lenient(v.clone()).0;
                (n.as_str(), t.step_deps().into_iter().map(String::from).collect())
            })
            .collect();
        let mut review = Review::default();
        for field in &fields {
            let direct: Vec<String> = args
                .iter()
                .filter(|(_, v)| {
                    let u = used_inputs(&[(String::new(), v.clone())]);
                    u.contains(field) || u.contains("")
                })
                .map(|(n, _)| n.clone())
                .collect();
            let mut reached: BTreeSet<String> = direct.iter().cloned().collect();
            let mut through = vec![];
            // Steps are in call order: a dependent comes after what it uses.
            for (n, _) in &args {
                if !reached.contains(n) && deps[n.as_str()].iter().any(|d| reached.contains(d)) {
                    reached.insert(n.clone());
                    through.push(n.clone());
                }
            }
            if !whole && !used.contains(field) {
                review.unused_input.push(field.clone());
                let mut w = format!(
                    "input field `{field}` is used by no step: a replay with another `{field}` repeats the recorded calls unchanged"
                );
                let near: Vec<String> = open
                    .iter()
                    .filter(|c| {
                        c.reference == format!("@input.{field}") || c.reference.starts_with(&format!("@input.{field}."))
                    })
                    .map(|c| format!("{} (`{}` at {}{})", c.id, c.value, c.step, c.path))
                    .collect();
                if !near.is_empty() {
                    w.push_str(&format!("; literals equal to it that `accept` turns into refs: {}", near.join(", ")));
                }
                review.warnings.push(w);
            }
            review.effects.push(Effect { field: field.clone(), changes: direct, through });
        }
        if !fields.is_empty() && used.is_empty() {
            review.warnings.push(
                "no step uses the recording's input: every replay repeats the recorded calls, whatever its input"
                    .into(),
            );
        }
        review
    }
}
