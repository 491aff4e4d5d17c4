//! Validation rules (docs/workflow-format.md) that go beyond shape (which `decode`
//! checks): name patterns and uniqueness, ranges, refs and `after` naming
//! unknown steps, `@item`/`@index` outside `for_each`, field/action
//! combinations, cycles, JSON Schemas (meta-validated, see `json_schema`),
//! and literal inputs against the declared input schema of a plugin, tool
//! or template. Every problem is reported, each with a JSON Pointer.

use std::collections::{HashMap, HashSet};

use crate::decode::{DefFlags, StepMeta};
use crate::definition::{
    Action, CodeRef, Definition, MAX_ATTEMPTS, MAX_DURATION_MS, MAX_MEMORY_MB, MAX_NAME_CHARS, MAX_PRIORITY, SleepSpec,
    Step, StepPart,
};
use crate::graph::Graph;
use crate::json_schema::{SchemaLookup, check_literal_input, check_schema};
use crate::problem::{Problem, did_you_mean, range_msg, shown};

/// A duration out of `[min, MAX_DURATION_MS]`, as a problem.
fn duration(at: String, field: &str, min: u64, v: Option<u64>) -> Option<Problem> {
    let v = v?;
    (v < min || v > MAX_DURATION_MS).then(|| {
        Problem::new(at, range_msg(field, min, Some(MAX_DURATION_MS), &v.to_string()))
            .hint("durations are in milliseconds, at most a year")
    })
}

/// A name longer than [`MAX_NAME_CHARS`], as a problem.
fn too_long(at: String, what: &str, name: &str) -> Option<Problem> {
    let n = name.chars().count();
    (n > MAX_NAME_CHARS)
        .then(|| Problem::new(at, format!("{what} `{}` is {n} characters long; at most {MAX_NAME_CHARS}", shown(name))))
}
use crate::ref_schemas::{self, Walk};
use crate::refs::{RESERVED_ROOTS, RefRoot};

/// Whether `s` matches `[a-z0-9][a-z0-9_-]*` (definition and template names).
pub fn is_definition_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'_' || *c == b'-')
}

/// Whether `s` matches `[A-Za-z_][A-Za-z0-9_]*` (step names).
pub fn is_step_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && (b[0].is_ascii_alphabetic() || b[0] == b'_')
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'_')
}

/// Validate a typed definition (e.g. one built in code), reporting every problem.
pub fn validate(def: &Definition, lookup: &dyn SchemaLookup) -> Vec<Problem> {
    let metas: Vec<StepMeta> = def.steps.iter().enumerate().map(|(i, s)| StepMeta::of_step(i, s)).collect();
    let mut out = vec![];
    check(def, &metas, DefFlags { name_ok: true, steps_ok: true }, lookup, &mut out);
    out
}

pub(crate) fn part_base(meta: &StepMeta, part: StepPart) -> String {
    match part {
        StepPart::Input => meta.input_at.clone(),
        StepPart::WhenRef => format!("{}/when/ref", meta.at),
        StepPart::WhenOperand(op) => format!("{}/when/{}", meta.at, op.as_str()),
        StepPart::ForEach => format!("{}/for_each", meta.at),
        StepPart::WhereRef => format!("{}/where/ref", meta.at),
        StepPart::WhereOperand(op) => format!("{}/where/{}", meta.at, op.as_str()),
        StepPart::WaitPrompt => format!("{}/wait/prompt", meta.at),
        StepPart::WaitPreview => format!("{}/wait/preview", meta.at),
        StepPart::WaitMatch => format!("{}/wait/match", meta.at),
    }
}

pub(crate) fn check(
    def: &Definition,
    metas: &[StepMeta],
    flags: DefFlags,
    lookup: &dyn SchemaLookup,
    out: &mut Vec<Problem>,
) {
    let DefFlags { name_ok, steps_ok } = flags;
    let mut p = |path: String, msg: String, hint: Option<String>| out.push(Problem { path, message: msg, hint });
    if name_ok && !is_definition_name(&def.name) {
        p(
            "/name".into(),
            format!("invalid definition name `{}`", shown(&def.name)),
            Some("use lowercase letters, digits, `_` and `-`, starting with a letter or digit".into()),
        );
    } else if let Some(pr) = too_long("/name".into(), "the definition name", &def.name).filter(|_| name_ok) {
        p(pr.path, pr.message, None);
    }
    if def.version == 0 {
        p("/version".into(), range_msg("version", 1, None, "0"), None);
    }
    if let Some(pr) = duration("/timeout_ms".into(), "timeout_ms", 1, def.timeout_ms) {
        p(pr.path, pr.message, pr.hint);
    }
    if let Some(f) = def.limits.and_then(|l| l.run_fuel).filter(|f| *f == 0) {
        p("/limits/run_fuel".into(), range_msg("run_fuel", 1, None, &f.to_string()), None);
    }
    if def.max_step_failures == Some(0) {
        p("/max_step_failures".into(), range_msg("max_step_failures", 1, None, "0"), None);
    }
    if def.steps.is_empty() && steps_ok {
        p("/steps".into(), "a definition needs at least one step".into(), None);
    }
    if let Some(s) = &def.input_schema {
        out.extend(check_schema(s, "/input_schema"));
    }

    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, (s, m)) in def.steps.iter().zip(metas).enumerate() {
        if !m.name_ok {
            continue;
        }
        if let Some(pr) = too_long(format!("{}/name", m.at), "the step name", &s.name) {
            out.push(pr);
        } else if !is_step_name(&s.name) {
            out.push(
                Problem::new(format!("{}/name", m.at), format!("invalid step name `{}`", shown(&s.name)))
                    .hint("use letters, digits and `_`, not starting with a digit: [A-Za-z_][A-Za-z0-9_]*"),
            );
        } else if RESERVED_ROOTS.contains(&s.name.as_str()) {
            out.push(
                Problem::new(format!("{}/name", m.at), format!("step name `{}` is reserved", s.name))
                    .hint("`input`, `item`, `index` and `run` are ref roots; pick another name"),
            );
        }
        match first.get(s.name.as_str()) {
            Some(&j) => out.push(Problem::new(
                format!("{}/name", m.at),
                format!("duplicate step name `{}` (also /steps/{j})", shown(&s.name)),
            )),
            None => {
                first.insert(&s.name, i);
            }
        }
    }
    let known: Vec<&str> = first.keys().copied().collect();
    let unknown = |name: &str, at: String| {
        let pr = Problem::new(at, format!("unknown step `{}`", shown(name)));
        match did_you_mean(name, known.iter().copied()) {
            Some(h) => pr.hint(h),
            None => {
                let mut names: Vec<&str> = known.clone();
                names.sort_unstable();
                let more = names.len().saturating_sub(20);
                names.truncate(20);
                let list = names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
                let more = if more > 0 { format!(" and {more} more") } else { String::new() };
                pr.hint(format!("the steps are {list}{more}; `@input` is the run's input"))
            }
        }
    };

    for (s, m) in def.steps.iter().zip(metas) {
        step_rules(s, m, out);
        let mut seen_after = HashSet::new();
        for (k, e) in s.after.iter().enumerate() {
            let at = format!("{}/after/{k}", m.at);
            if !first.contains_key(e.step.as_str()) {
                out.push(unknown(&e.step, at.clone()));
            } else if !seen_after.insert(e.step.as_str()) {
                out.push(
                    Problem::new(at.clone(), format!("step `{}` is listed twice in `after`", shown(&e.step)))
                        .hint("keep one edge per step; use `on: always` for both outcomes"),
                );
            }
            // An edge's `when` reads what is known when the edge would
            // fire: the run's input and the steps this one depends on.
            let Some(c) = &e.when else { continue };
            let mut reads = vec![(&c.reference, format!("{at}/when/ref"))];
            if let Some(t) = &c.test {
                reads.extend(
                    t.operand
                        .sites()
                        .iter()
                        .map(|x| (&x.reference, format!("{at}/when/{}{}", t.op.as_str(), x.pointer))),
                );
            }
            for (r, rat) in reads {
                match &r.root {
                    RefRoot::Step(n) | RefRoot::StepStatus(n) if !first.contains_key(n.as_str()) => {
                        out.push(unknown(n, rat))
                    }
                    RefRoot::Step(n) | RefRoot::StepStatus(n) if !s.depends_on(n) => out.push(
                        Problem::new(
                            rat,
                            format!("this edge's `when` reads `@{n}`, a step `{}` does not depend on", s.name),
                        )
                        .hint(format!("add `{n}` to `after`, or test the edge's own step `@{}`", e.step)),
                    ),
                    RefRoot::Item | RefRoot::Index => out.push(Problem::new(
                        rat,
                        "`@item` and `@index` are only defined in the input of a for_each step",
                    )),
                    _ => {}
                }
            }
        }
        // What the step's action wants as input, when a schema says.
        let target = if m.action_ok {
            match &s.action {
                Action::Code(c) => lookup.code_input_schema(c).map(|x| (x, format!("plugin {}", c.shown()))),
                Action::Tool(t) => {
                    lookup.tool_input_schema(&t.server, &t.name).map(|x| (x, format!("tool {}.{}", t.server, t.name)))
                }
                Action::Workflow(w) => lookup
                    .template_input_schema(&w.template, w.version)
                    .map(|x| (x, format!("template {}", w.template))),
                _ => None,
            }
        } else {
            None
        };
        for r in s.refs() {
            let at = format!("{}{}", part_base(m, r.part), r.pointer);
            if let Some((schema, whose)) = ref_schemas::source_schema(def, lookup, r.reference) {
                match ref_schemas::walk(&schema, &whose, r.reference, &at) {
                    Walk::Wrong(p) => out.push(p),
                    Walk::Found(node) if r.exact && r.part == StepPart::Input => {
                        let wanted = target.as_ref().and_then(|(t, who)| {
                            ref_schemas::at_pointer(t, r.pointer).map(|t| (t, format!("{who}'s input schema")))
                        });
                        if let Some((t, wants)) = wanted
                            && let Some(p) = ref_schemas::type_mismatch(node, &whose, t, &wants, r.reference, &at)
                        {
                            out.push(p);
                        }
                    }
                    _ => {}
                }
            }
            match &r.reference.root {
                RefRoot::Step(n) | RefRoot::StepStatus(n) if !first.contains_key(n.as_str()) => {
                    out.push(unknown(n, at))
                }
                RefRoot::Item | RefRoot::Index => {
                    let allowed = s.for_each.is_some()
                        && matches!(
                            r.part,
                            StepPart::Input
                                | StepPart::WaitPrompt
                                | StepPart::WaitPreview
                                | StepPart::WaitMatch
                                | StepPart::WhereRef
                                | StepPart::WhereOperand(_)
                        );
                    if !allowed {
                        let what = if r.reference.root == RefRoot::Item { "@item" } else { "@index" };
                        let hint = if s.for_each.is_some() {
                            "`when` and `for_each` are evaluated once for the whole step, before any item (`where` is per item)"
                        } else {
                            "add `for_each` to this step, or read the value with a ref to a step or @input"
                        };
                        out.push(
                            Problem::new(at, format!("`{what}` is only defined in the input of a for_each step"))
                                .hint(hint),
                        );
                    }
                }
                _ => {}
            }
        }
        if let Some((schema, whose)) = &target {
            check_literal_input(schema, &s.input, &m.input_at, whose, out);
        }
    }
    // What a notification sends to a tool, literally, against its input schema.
    for (i, n) in def.notify.iter().enumerate() {
        if let (Some(t), Some(input)) = (&n.tool, &n.input)
            && let Some(schema) = lookup.tool_input_schema(&t.server, &t.name)
        {
            let whose = format!("tool {}.{}", t.server, t.name);
            check_literal_input(&schema, input, &format!("/notify/{i}/input"), &whose, out);
        }
    }
    // The run's output and summary, and what its notifications send.
    let mut whole_run: Vec<(String, &crate::template::Template)> = vec![];
    for (field, t) in [("/output", &def.output), ("/summary", &def.summary)] {
        whole_run.extend(t.as_ref().map(|t| (field.to_string(), t)));
    }
    for (i, n) in def.notify.iter().enumerate() {
        for (field, t) in [("input", &n.input), ("key", &n.key)] {
            whole_run.extend(t.as_ref().map(|t| (format!("/notify/{i}/{field}"), t)));
        }
    }
    for (field, o) in whole_run {
        for site in o.sites() {
            let at = format!("{field}{}", site.pointer);
            if let Some((schema, whose)) = ref_schemas::source_schema(def, lookup, &site.reference)
                && let Walk::Wrong(p) = ref_schemas::walk(&schema, &whose, &site.reference, &at)
            {
                out.push(p);
            }
            match &site.reference.root {
                RefRoot::Step(n) | RefRoot::StepStatus(n) if !first.contains_key(n.as_str()) => {
                    out.push(unknown(n, at))
                }
                RefRoot::Item | RefRoot::Index => {
                    out.push(Problem::new(at, "`@item` and `@index` are only defined in the input of a for_each step"))
                }
                _ => {}
            }
        }
    }

    let graph = Graph::build(def);
    for cycle in graph.cycles() {
        let (s, last) = (cycle[0], *cycle.last().expect("non-empty"));
        let step = &def.steps[s];
        let lname = graph.name(last);
        let at = if let Some(k) = step.after.iter().position(|e| e.step == lname) {
            format!("{}/after/{k}", metas[s].at)
        } else if let Some(r) = step.refs().into_iter().find(|r| r.reference.step() == Some(lname)) {
            format!("{}{}", part_base(&metas[s], r.part), r.pointer)
        } else {
            metas[s].at.clone()
        };
        out.push(
            Problem::new(at, format!("cycle: {}", graph.describe_cycle(&cycle)))
                .hint("a step cannot depend, directly or through others, on itself"),
        );
    }
}

fn code_ref_rules(c: &CodeRef, at: &str, out: &mut Vec<Problem>) {
    match c {
        CodeRef::Plugin(s) if s.is_empty() => {
            out.push(Problem::new(format!("{at}/plugin"), "`plugin` must not be empty"))
        }
        CodeRef::Path(s) if s.is_empty() => out.push(Problem::new(format!("{at}/path"), "`path` must not be empty")),
        CodeRef::Sha256(h) if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) => {
            out.push(Problem::new(format!("{at}/sha256"), "`sha256` must be 64 hexadecimal digits"))
        }
        _ => {}
    }
}

/// Ranges and field/action combinations of one step.
fn step_rules(s: &Step, m: &StepMeta, out: &mut Vec<Problem>) {
    let at = &m.at;
    let f = |k: &str| format!("{at}/{k}");
    if m.action_ok {
        // A sleep's time does not depend on its item: once per item would
        // be the same timer n times, so it is refused rather than run once.
        if s.for_each.is_some() && matches!(s.action, Action::Sleep(_)) {
            out.push(
                Problem::new(
                    f("for_each"),
                    "a `sleep` step cannot have `for_each`: its time is the same for every item",
                )
                .hint("sleep once, before or after the for_each step that does the per-item work"),
            );
        }
        match &s.action {
            Action::Code(c) => code_ref_rules(c, &f("code"), out),
            Action::Tool(t) => {
                for (k, v) in [("server", &t.server), ("name", &t.name)] {
                    if v.is_empty() {
                        out.push(Problem::new(format!("{at}/tool/{k}"), format!("`{k}` must not be empty")));
                    }
                    out.extend(too_long(format!("{at}/tool/{k}"), &format!("the tool's {k}"), v));
                }
            }
            Action::Agent(a) => {
                if a.name.is_empty() {
                    out.push(Problem::new(format!("{at}/agent/name"), "`name` must not be empty"));
                }
                out.extend(too_long(format!("{at}/agent/name"), "the agent's name", &a.name));
            }
            Action::Return => {
                if s.for_each.is_some() {
                    out.push(
                        Problem::new(f("for_each"), "a `return` step cannot have `for_each`")
                            .hint("the run ends at the first return; collect items in another step first"),
                    );
                }
            }
            Action::Wait(w) => {
                let w_at = f("wait");
                out.extend(duration(format!("{w_at}/timeout_ms"), "timeout_ms", 1, w.timeout_ms));
                if let Some(schema) = &w.schema {
                    out.extend(check_schema(schema, &format!("{w_at}/schema")));
                }
                match &w.event {
                    Some(e) => {
                        if e.is_empty() {
                            out.push(Problem::new(format!("{w_at}/event"), "`event` must not be empty"));
                        }
                        out.extend(too_long(format!("{w_at}/event"), "the event name", e));
                        for (k, set) in [
                            ("prompt", w.prompt.is_some()),
                            ("preview", w.preview.is_some()),
                            ("schema", w.schema.is_some()),
                        ] {
                            if set {
                                out.push(
                                    Problem::new(
                                        format!("{w_at}/{k}"),
                                        format!("`{k}` applies to signals, not to an `event` wait"),
                                    )
                                    .hint("a wait has either `event` (+ `match`) or `prompt`/`schema`/`reason`"),
                                );
                            }
                        }
                    }
                    None => {
                        if w.matches.is_some() {
                            out.push(
                                Problem::new(format!("{w_at}/match"), "`match` needs `event`")
                                    .hint("add `\"event\": \"NAME\"`, or remove `match` to wait for a signal"),
                            );
                        }
                    }
                }
            }
            Action::Sleep(SleepSpec::Ms(ms)) => out.extend(duration(format!("{}/ms", f("sleep")), "ms", 0, Some(*ms))),
            Action::Sleep(_) => {}
            Action::Workflow(w) => {
                if let Some(pr) = too_long(format!("{at}/workflow/template"), "the template name", &w.template) {
                    out.push(pr);
                } else if !is_definition_name(&w.template) {
                    out.push(
                        Problem::new(
                            format!("{at}/workflow/template"),
                            format!("invalid template name `{}`", shown(&w.template)),
                        )
                        .hint("template names use lowercase letters, digits, `_` and `-`"),
                    );
                }
                if w.version == Some(0) {
                    out.push(Problem::new(format!("{at}/workflow/version"), range_msg("version", 1, None, "0")));
                }
            }
        }
    }
    match s.concurrency {
        Some(0) => out.push(Problem::new(f("concurrency"), range_msg("concurrency", 1, None, "0"))),
        Some(_) if s.for_each.is_none() => out.push(
            Problem::new(f("concurrency"), "`concurrency` needs `for_each`")
                .hint("concurrency caps the parallel items of a for_each step"),
        ),
        Some(_) if matches!(s.action, Action::Wait(_)) => out.push(
            Problem::new(f("concurrency"), "`concurrency` does not apply to a `wait` step: every item waits at once")
                .hint("remove `concurrency`; it caps the items of code, tool and workflow steps"),
        ),
        _ => {}
    }
    out.extend(duration(f("timeout_ms"), "timeout_ms", 1, s.timeout_ms));
    if s.priority.unsigned_abs() > MAX_PRIORITY.unsigned_abs() {
        out.push(Problem::new(
            f("priority"),
            format!("`priority` must be an integer from -{MAX_PRIORITY} to {MAX_PRIORITY}, got {}", s.priority),
        ));
    }
    if let Some(r) = &s.retry {
        if r.max_attempts == 0 || r.max_attempts > MAX_ATTEMPTS {
            out.push(Problem::new(
                format!("{at}/retry/max_attempts"),
                range_msg("max_attempts", 1, Some(u64::from(MAX_ATTEMPTS)), &r.max_attempts.to_string()),
            ));
        }
        out.extend(duration(format!("{at}/retry/initial_delay_ms"), "initial_delay_ms", 0, Some(r.initial_delay_ms)));
        out.extend(duration(format!("{at}/retry/max_delay_ms"), "max_delay_ms", 0, Some(r.max_delay_ms)));
        if r.max_delay_ms < r.initial_delay_ms {
            out.push(Problem::new(
                format!("{at}/retry/max_delay_ms"),
                format!("`max_delay_ms` ({}) is less than `initial_delay_ms` ({})", r.max_delay_ms, r.initial_delay_ms),
            ));
        }
    }
    if let Some(l) = &s.limits {
        if m.action_ok && !matches!(s.action, Action::Code(_)) {
            out.push(Problem::new(f("limits"), "`limits` applies to code steps only"));
        }
        if l.fuel == Some(0) {
            out.push(Problem::new(format!("{at}/limits/fuel"), range_msg("fuel", 1, None, "0")));
        }
        if let Some(mb) = l.memory_mb.filter(|mb| *mb == 0 || u64::from(*mb) > MAX_MEMORY_MB) {
            out.push(Problem::new(
                format!("{at}/limits/memory_mb"),
                range_msg("memory_mb", 1, Some(MAX_MEMORY_MB), &mb.to_string()),
            ));
        }
    }
    if let Some(t) = &s.transform {
        if m.action_ok && !matches!(s.action, Action::Tool(_)) {
            out.push(
                Problem::new(f("transform"), "`transform` applies to tool steps only")
                    .hint("a transform is a code step applied to a tool's output"),
            );
        }
        code_ref_rules(t, &f("transform"), out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_patterns() {
        for ok in ["a", "onboard-user", "0day", "a_b-c9"] {
            assert!(is_definition_name(ok), "{ok}");
        }
        for bad in ["", "A", "-a", "_a", "a b", "é"] {
            assert!(!is_definition_name(bad), "{bad}");
        }
        for ok in ["a", "A1", "_x", "get_user_1"] {
            assert!(is_step_name(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "a.b", "a b"] {
            assert!(!is_step_name(bad), "{bad}");
        }
    }
}

#[cfg(test)]
mod range_tests {
    use serde_json::json;

    use crate::{NoSchemas, from_value};

    fn problems(v: serde_json::Value) -> Vec<String> {
        match from_value(&v, &NoSchemas) {
            Ok(_) => vec![],
            Err(ps) => ps.iter().map(|p| p.to_string()).collect(),
        }
    }

    /// Every number is range-checked with the limits the engine uses;
    /// names have a length cap; user text reaches no terminal raw.
    #[test]
    fn numbers_names_and_control_characters() {
        let step = |extra: serde_json::Value| {
            let mut s = json!({"name": "a", "code": {"plugin": "p"}});
            s.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            json!({"name": "w", "steps": [s]})
        };
        let year = crate::definition::MAX_DURATION_MS;
        let cases = [
            (step(json!({"timeout_ms": u64::MAX})), "/steps/0/timeout_ms: `timeout_ms` must be an integer from 1 to"),
            (step(json!({"timeout_ms": year + 1})), "/steps/0/timeout_ms"),
            (step(json!({"retry": {"max_attempts": 1_000_000}})), "/steps/0/retry/max_attempts"),
            (
                step(json!({"retry": {"initial_delay_ms": u64::MAX, "max_delay_ms": u64::MAX}})),
                "/steps/0/retry/initial_delay_ms",
            ),
            (json!({"name": "w", "timeout_ms": u64::MAX, "steps": [{"name": "a", "return": {}}]}), "/timeout_ms"),
            (
                json!({"name": "w", "limits": {"run_fuel": 0}, "steps": [{"name": "a", "return": {}}]}),
                "/limits/run_fuel",
            ),
            (json!({"name": "w", "steps": [{"name": "a", "sleep": {"ms": u64::MAX}}]}), "/steps/0/sleep/ms"),
            (
                json!({"name": "w", "steps": [{"name": "a", "wait": {"prompt": "ok?", "timeout_ms": u64::MAX}}]}),
                "/steps/0/wait/timeout_ms",
            ),
            (step(json!({"timeout_ms": 0})), "/steps/0/timeout_ms"),
            (step(json!({"retry": {"max_attempts": 0}})), "/steps/0/retry/max_attempts"),
            (step(json!({"retry": {"max_delay_ms": year + 1}})), "/steps/0/retry/max_delay_ms"),
            (step(json!({"limits": {"memory_mb": 4097}})), "/steps/0/limits/memory_mb"),
            (step(json!({"limits": {"memory_mb": 0}})), "/steps/0/limits/memory_mb"),
            (step(json!({"limits": {"fuel": 0}})), "/steps/0/limits/fuel"),
            (step(json!({"priority": i64::MIN})), "/steps/0/priority: `priority` must be an integer from -1000000"),
            (step(json!({"priority": 1_000_001})), "/steps/0/priority"),
            (step(json!({"for_each": [1], "concurrency": 0})), "/steps/0/concurrency"),
            (
                json!({"name": "w", "max_step_failures": 0, "steps": [{"name": "a", "return": {}}]}),
                "/max_step_failures",
            ),
            (json!({"name": "w", "steps": [{"name": "a", "sleep": {"ms": year + 1}}]}), "/steps/0/sleep/ms"),
            (
                json!({"name": "w", "steps": [{"name": "a", "for_each": [1], "sleep": {"ms": 5}}]}),
                "/steps/0/for_each: a `sleep` step cannot have `for_each`",
            ),
            (
                json!({"name": "w", "steps": [{"name": "a", "workflow": {"template": "t".repeat(129)}}]}),
                "/steps/0/workflow/template: the template name `ttt",
            ),
            (
                json!({"name": "w", "steps": [{"name": "a", "wait": {"event": "e".repeat(200)}}]}),
                "/steps/0/wait/event: the event name",
            ),
            (
                json!({"name": "w", "steps": [{"name": "a", "tool": {"server": "s", "name": "n".repeat(129)}}]}),
                "/steps/0/tool/name: the tool's name",
            ),
        ];
        for (def, want) in cases {
            let ps = problems(def.clone());
            assert!(ps.iter().any(|p| p.contains(want)), "{def}: {ps:?}");
        }
        assert!(problems(step(json!({"timeout_ms": year}))).is_empty(), "a year is allowed");
        let edges = json!({"priority": -1_000_000, "retry": {"max_attempts": 10_000, "max_delay_ms": year},
            "limits": {"memory_mb": 4096, "fuel": u64::MAX}});
        assert!(problems(step(edges)).is_empty(), "every limit itself is allowed");
        let name = "n".repeat(128);
        let ok = json!({"name": "t".repeat(128), "steps": [{"name": name, "return": {}}]});
        assert!(problems(ok).is_empty(), "128 characters are allowed");

        let long = "a".repeat(100_000);
        let ps = problems(json!({"name": "w", "steps": [{"name": long, "return": {}}]}));
        assert!(ps.iter().any(|p| p.contains("100000 characters long; at most 128")), "{ps:?}");
        assert!(ps.iter().all(|p| p.len() < 400), "the name is not echoed whole: {ps:?}");
        let ps = problems(json!({"name": "t".repeat(5000), "steps": [{"name": "a", "return": {}}]}));
        assert!(ps.iter().any(|p| p.starts_with("/name") && p.contains("5000 characters")), "{ps:?}");

        let ps = problems(json!({"name": "w", "steps": [{"name": "a\u{1b}[31mred", "return": {}}]}));
        assert!(!ps.is_empty() && ps.iter().all(|p| !p.contains('\u{1b}')), "{ps:?}");
        assert!(ps.iter().any(|p| p.contains("\\u{1b}")), "shown escaped: {ps:?}");

        // User text in every other message: escaped and cut short.
        let esc = format!("x\u{1b}]0;{}", "y".repeat(10_000));
        let defs = [
            json!({"name": "w", "steps": [{"name": "a", "return": {}, &esc: 1}]}),
            json!({"name": "w", "steps": [{"name": "a", "return": true, "input": {"v": format!("@{esc}")}}]}),
            json!({"name": "w", "steps": [{"name": "a", "return": {}, "when": {"ref": "@input.x", &esc: 1}}]}),
            json!({"name": "w", "steps": [{"name": "a", "sleep": {"until": esc}}]}),
            json!({"name": "w", "steps": [{"name": "a", "return": {}, "after": [esc]}]}),
            json!({"name": "w", "steps": [{"name": "a", "return": {}, "join": esc}]}),
            json!({"name": "w", "steps": [{"name": "a", "return": {}, "priority": esc}]}),
            json!({"name": "w", "steps": [{"name": "a", "workflow": {"template": "T\u{1b}"}}]}),
        ];
        for def in defs {
            let ps = problems(def.clone());
            assert!(!ps.is_empty(), "{def}");
            for p in &ps {
                // The path stays an exact JSON Pointer (escaped); the message is cut.
                let msg = p.split_once(": ").map_or(p.as_str(), |(_, m)| m);
                assert!(!p.contains('\u{1b}') && msg.len() < 600, "raw or whole: {}", &p[..p.len().min(300)]);
            }
        }
    }

    #[test]
    fn for_each_waits_and_children_take_their_item() {
        let each = [
            json!({"name": "w", "steps": [{"name": "a", "for_each": [1, 2], "wait": {"prompt": "item @item (@index)?"}}]}),
            json!({"name": "w", "steps": [{"name": "a", "for_each": [1], "wait": {"event": "paid", "match": {"order": "@item"}}}]}),
            json!({"name": "w", "steps": [{"name": "a", "for_each": [1], "workflow": {"template": "t"}, "input": {"x": "@item"}}]}),
        ];
        for def in each {
            assert_eq!(problems(def.clone()), Vec::<String>::new(), "{def}");
        }
        let capped = json!({"name": "w", "steps": [{"name": "a", "for_each": [1], "concurrency": 2, "wait": {}}]});
        assert!(problems(capped).iter().any(|p| p.contains("/steps/0/concurrency: `concurrency` does not apply")));
        let wrong = json!({"name": "w", "steps": [{"name": "a", "wait": {"prompt": "item @item?"}}]});
        assert!(problems(wrong).iter().any(|p| p.contains("`@item` is only defined")));
    }

    #[test]
    fn an_input_ref_the_input_schema_rules_out_is_refused() {
        let schema = serde_json::json!({
            "type": "object", "additionalProperties": false,
            "properties": {"who": {"type": "string"}, "address": {"type": "object", "additionalProperties": false,
                "properties": {"city": {"type": "string"}}}, "tags": {"type": "array"}}
        });
        let def = |r: &str| serde_json::json!({"name": "w", "input_schema": schema, "steps": [{"name": "a", "return": {"x": r}}]});
        let problems = |r: &str| match crate::parse_and_validate(&def(r).to_string(), &crate::NoSchemas) {
            Ok(_) => vec![],
            Err(p) => p,
        };
        let p = problems("@input.whom");
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].path, "/steps/0/return/x");
        assert!(p[0].message.contains("`@input.whom` can never have a value"), "{}", p[0].message);
        assert!(p[0].hint.as_deref().unwrap().contains("did you mean `who`?"), "{:?}", p[0].hint);
        let p = problems("@input.address.town");
        assert!(p[0].message.contains("`@input.address.town`"), "{p:?}");
        assert!(p[0].hint.as_deref().unwrap().contains("`city`"), "{:?}", p[0].hint);
        // Listed, optional, open or deeper than the schema says: no problem.
        for ok in ["@input.who", "@input.whom?", "@input.address.city", "@input.tags.3.name", "@input"] {
            assert!(problems(ok).is_empty(), "{ok}: {:?}", problems(ok));
        }
        let open = serde_json::json!({"name": "w", "input_schema": {"type": "object", "properties": {"who": {}}},
            "steps": [{"name": "a", "return": {"x": "@input.whom"}}]});
        assert!(crate::parse_and_validate(&open.to_string(), &crate::NoSchemas).is_ok());
    }
}
