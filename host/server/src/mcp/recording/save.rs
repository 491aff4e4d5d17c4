//! Saving a recording as a template, one plan for every front end: the
//! MCP tool `recording_save` and the page's review of a recording
//! (`/api/v1/recordings/{id}/review` and `/save`). A reviewer refuses
//! proposed refs, accepts candidates, frees steps from the kept order;
//! [`plan`] turns those choices into the definition and says what a
//! replay will do. Each front end validates and stores the definition
//! through its own pipeline and phrases [`PlanRefused`] in its reader's
//! terms.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Recording, Replacement};

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SaveParams {
    /// The template to save the recording as (a new version if it exists).
    pub template: String,
    /// Ids of proposed replacements (`r1`, ...) to refuse: those literals
    /// stay literal.
    #[serde(default)]
    pub refuse: Vec<String>,
    /// Ids of candidates (`c1`, ...) to apply: literals equal to an input
    /// value that were not proposed (small numbers, short strings,
    /// booleans) become refs to it.
    #[serde(default)]
    pub accept: Vec<String>,
    /// Chain every call (each step `after` the previous).
    #[serde(default)]
    pub keep_order: bool,
    /// Steps freed from the side-effect order (see `order`).
    #[serde(default)]
    pub parallel: Vec<String>,
    /// Only propose: return the definition and the replacements, store
    /// nothing, keep recording.
    #[serde(default)]
    pub dry_run: bool,
    /// A description for the template.
    #[serde(default)]
    pub description: Option<String>,
}

/// A proposed replacement and whether it was applied.
#[derive(Debug, Serialize, JsonSchema)]
pub struct ReplacementOut {
    /// `r1`, ...: pass to `refuse` to keep the literal.
    pub id: String,
    pub step: String,
    /// JSON Pointer into the step's input.
    pub path: String,
    /// The literal that was recorded.
    pub value: Value,
    /// What replaces it: a ref, or for an input value inside a longer
    /// string, that text with the ref in it.
    pub reference: String,
    pub applied: bool,
}

/// A saved (or proposed) template.
#[derive(Debug, Serialize, JsonSchema)]
pub struct SaveOut {
    pub template: String,
    /// The version saved (absent for a dry run).
    pub version: Option<u32>,
    /// The tool that replays it (absent for a dry run).
    pub tool: Option<String>,
    /// The recording's run (absent for a dry run).
    pub run_id: Option<String>,
    /// Every proposed replacement.
    pub replacements: Vec<ReplacementOut>,
    /// Literals equal to an input value that were not proposed (see
    /// `accept`); `applied` when accepted.
    pub candidates: Vec<ReplacementOut>,
    /// The input's fields no step uses: a replay with another value of one
    /// changes nothing.
    pub unused_input: Vec<String>,
    /// For each input field, what a replay with another value changes.
    pub replay: Vec<crate::mcp::recording::Effect>,
    /// Calls kept in order although no data passes (writes in order, a
    /// read after the write to its server), and why.
    pub order: Vec<crate::mcp::recording::Ordered>,
    /// What may make a replay repeat the recording instead of following
    /// its new input, and the template's validation warnings.
    pub warnings: Vec<String>,
    /// The template's definition.
    pub definition: Value,
}

/// Why a save's choices cannot be followed.
#[derive(Debug, thiserror::Error)]
pub enum PlanRefused {
    #[error("the recording has no steps yet")]
    Empty,
    /// `refuse` or `accept` names an id the recording did not propose.
    #[error("`{field}` names `{bad}`, which is not a {what}")]
    NotProposed { field: &'static str, what: &'static str, bad: String, known: Vec<String> },
    /// `parallel` names a step the recording does not have.
    #[error("`parallel` names `{bad}`, which is not a recorded step")]
    NotRecorded { bad: String, known: Vec<String> },
}

/// The template `recording` becomes with the choices `p` (the definition,
/// every proposal and whether it applies, what a replay changes, the
/// order kept): nothing is stored.
pub fn plan(recording: &Recording, p: &SaveParams) -> Result<SaveOut, PlanRefused> {
    if recording.steps.is_empty() {
        return Err(PlanRefused::Empty);
    }
    let proposals = recording.propose();
    let candidates = recording.candidates(&proposals);
    for (ids, list, what, field) in
        [(&p.refuse, &proposals, "proposed replacement", "refuse"), (&p.accept, &candidates, "candidate", "accept")]
    {
        if let Some(bad) = ids.iter().find(|id| !list.iter().any(|r| &r.id == *id)) {
            let known = list.iter().map(|r| r.id.clone()).collect();
            return Err(PlanRefused::NotProposed { field, what, bad: bad.clone(), known });
        }
    }
    let mut accepted: Vec<Replacement> = proposals.iter().filter(|r| !p.refuse.contains(&r.id)).cloned().collect();
    accepted.extend(candidates.iter().filter(|c| p.accept.contains(&c.id)).cloned());
    let open: Vec<Replacement> = candidates.iter().filter(|c| !p.accept.contains(&c.id)).cloned().collect();
    let review = recording.review(&accepted, &open);
    if let Some(bad) = p.parallel.iter().find(|n| !recording.steps.iter().any(|s| &s.name == *n)) {
        let known = recording.steps.iter().map(|s| s.name.clone()).collect();
        return Err(PlanRefused::NotRecorded { bad: bad.clone(), known });
    }
    let order = if p.keep_order { vec![] } else { recording.order(&p.parallel) };
    let mut definition = recording.definition(&p.template, &accepted, p.keep_order, &order);
    if let Some(d) = &p.description {
        definition["description"] = Value::String(d.clone());
    }
    let out = |r: &Replacement, applied: bool| ReplacementOut {
        id: r.id.clone(),
        step: r.step.clone(),
        path: r.path.clone(),
        value: r.value.clone(),
        reference: r.reference.clone(),
        applied,
    };
    Ok(SaveOut {
        template: p.template.clone(),
        version: None,
        tool: None,
        run_id: None,
        replacements: proposals.iter().map(|r| out(r, !p.refuse.contains(&r.id))).collect(),
        candidates: candidates.iter().map(|c| out(c, p.accept.contains(&c.id))).collect(),
        unused_input: review.unused_input,
        replay: review.effects,
        order,
        warnings: review.warnings,
        definition,
    })
}
