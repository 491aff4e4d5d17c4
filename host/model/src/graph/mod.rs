//! The dependency graph of a definition: edges from refs (`on: success`, or
//! `always` for `$status`-only refs) and from `after` (which wins over refs
//! for the same pair), topological order, sinks, cycles, and rendering to
//! Mermaid and DOT for `weft graph`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::fmt::Write as _;

use crate::definition::{Action, CodeRef, Definition, EdgeOn, SleepSpec, StepState};
use crate::refs::RefRoot;

/// An edge: `to` depends on `from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GraphEdge {
    /// Index of the dependency.
    pub from: usize,
    /// Index of the dependent step.
    pub to: usize,
    pub on: EdgeOn,
    /// From `after` (true) or implied by refs (false).
    pub explicit: bool,
}

/// The dependency graph; nodes are step indexes in declaration order.
#[derive(Debug, Clone)]
pub struct Graph {
    names: Vec<String>,
    edges: Vec<GraphEdge>,
    incoming: Vec<Vec<usize>>,
    outgoing: Vec<Vec<usize>>,
}

impl Graph {
    /// Build from a definition. Names that match no step are ignored
    /// (validation reports them); with repeated names the first one counts.
    pub fn build(def: &Definition) -> Graph {
        let names: Vec<String> = def.steps.iter().map(|s| s.name.clone()).collect();
        let mut index: HashMap<&str, usize> = HashMap::new();
        for (i, n) in names.iter().enumerate() {
            index.entry(n.as_str()).or_insert(i);
        }
        let mut edges = vec![];
        for (to, step) in def.steps.iter().enumerate() {
            // dependency index -> (on, explicit); BTreeMap keeps a stable order
            let mut deps: BTreeMap<usize, (EdgeOn, bool)> = BTreeMap::new();
            for r in step.refs() {
                let (name, on) = match &r.reference.root {
                    RefRoot::Step(n) => (n, EdgeOn::Success),
                    RefRoot::StepStatus(n) => (n, EdgeOn::Always),
                    _ => continue,
                };
                if let Some(&from) = index.get(name.as_str()) {
                    let e = deps.entry(from).or_insert((on, false));
                    if on == EdgeOn::Success {
                        e.0 = EdgeOn::Success;
                    }
                }
            }
            for a in &step.after {
                if let Some(&from) = index.get(a.step.as_str()) {
                    deps.insert(from, (a.on, true));
                }
            }
            for (from, (on, explicit)) in deps {
                edges.push(GraphEdge { from, to, on, explicit });
            }
        }
        let mut incoming = vec![vec![]; names.len()];
        let mut outgoing = vec![vec![]; names.len()];
        for (k, e) in edges.iter().enumerate() {
            incoming[e.to].push(k);
            outgoing[e.from].push(k);
        }
        Graph { names, edges, incoming, outgoing }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
    pub fn name(&self, i: usize) -> &str {
        &self.names[i]
    }
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
    pub fn edges(&self) -> &[GraphEdge] {
        &self.edges
    }
    /// Edges into step `i` (its dependencies).
    pub fn dependencies(&self, i: usize) -> impl Iterator<Item = &GraphEdge> {
        self.incoming[i].iter().map(|&k| &self.edges[k])
    }
    /// Edges out of step `i` (steps that depend on it).
    pub fn dependents(&self, i: usize) -> impl Iterator<Item = &GraphEdge> {
        self.outgoing[i].iter().map(|&k| &self.edges[k])
    }
    /// Steps without dependencies.
    pub fn roots(&self) -> Vec<usize> {
        (0..self.len()).filter(|&i| self.incoming[i].is_empty()).collect()
    }
    /// Steps nothing depends on (their outputs form the default run output).
    pub fn sinks(&self) -> Vec<usize> {
        (0..self.len()).filter(|&i| self.outgoing[i].is_empty()).collect()
    }

    /// Topological order, ties broken by declaration order; `Err` with a
    /// cycle when there is one.
    pub fn topo_order(&self) -> Result<Vec<usize>, Vec<usize>> {
        let mut indeg: Vec<usize> = self.incoming.iter().map(Vec::len).collect();
        let mut ready: BinaryHeap<Reverse<usize>> = (0..self.len()).filter(|&i| indeg[i] == 0).map(Reverse).collect();
        let mut order = Vec::with_capacity(self.len());
        while let Some(Reverse(i)) = ready.pop() {
            order.push(i);
            for e in self.dependents(i) {
                indeg[e.to] -= 1;
                if indeg[e.to] == 0 {
                    ready.push(Reverse(e.to));
                }
            }
        }
        if order.len() == self.len() { Ok(order) } else { Err(self.cycles().into_iter().next().unwrap_or_default()) }
    }

    /// The layer of each step, for drawing: 0 for a step without
    /// dependencies, else one more than its deepest dependency (`None` with
    /// a cycle).
    pub fn layers(&self) -> Option<Vec<usize>> {
        let order = self.topo_order().ok()?;
        let mut layer = vec![0; self.len()];
        for i in order {
            layer[i] = self.dependencies(i).map(|e| layer[e.from] + 1).max().unwrap_or(0);
        }
        Some(layer)
    }

    /// One cycle per strongly connected component that has one, each
    /// starting (and implicitly ending) at its earliest-declared step and
    /// following dependency → dependent edges: `[a, b, c]` is a → b → c → a.
    pub fn cycles(&self) -> Vec<Vec<usize>> {
        let n = self.len();
        let comp = self.components();
        let mut seen = vec![false; n];
        let mut out = vec![];
        for s in 0..n {
            let c = comp[s];
            if seen[s] {
                continue;
            }
            for (i, flag) in seen.iter_mut().enumerate() {
                if comp[i] == c {
                    *flag = true;
                }
            }
            // shortest path from s back to s inside the component (BFS)
            let mut prev: Vec<Option<usize>> = vec![None; n];
            let mut queue = VecDeque::from([s]);
            let mut closing = None;
            'bfs: while let Some(u) = queue.pop_front() {
                for e in self.dependents(u) {
                    if comp[e.to] != c {
                        continue;
                    }
                    if e.to == s {
                        closing = Some(u);
                        break 'bfs;
                    }
                    if prev[e.to].is_none() {
                        prev[e.to] = Some(u);
                        queue.push_back(e.to);
                    }
                }
            }
            if let Some(mut u) = closing {
                let mut cycle = vec![u];
                while u != s {
                    u = prev[u].expect("bfs path");
                    cycle.push(u);
                }
                cycle.reverse();
                out.push(cycle);
            }
        }
        out
    }

    /// Strongly connected component id of each node (Tarjan, iterative).
    fn components(&self) -> Vec<usize> {
        let n = self.len();
        let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
        let mut comp = vec![usize::MAX; n];
        let (mut next, mut ncomp, mut stack) = (0, 0, vec![]);
        for root in 0..n {
            if index[root] != usize::MAX {
                continue;
            }
            let mut work: Vec<(usize, usize)> = vec![(root, 0)];
            while let Some(&mut (v, ref mut k)) = work.last_mut() {
                if *k == 0 && index[v] == usize::MAX {
                    index[v] = next;
                    low[v] = next;
                    next += 1;
                    stack.push(v);
                    on_stack[v] = true;
                }
                if let Some(&ek) = self.outgoing[v].get(*k) {
                    *k += 1;
                    let w = self.edges[ek].to;
                    if index[w] == usize::MAX {
                        work.push((w, 0));
                    } else if on_stack[w] {
                        low[v] = low[v].min(index[w]);
                    }
                    continue;
                }
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp[w] = ncomp;
                        if w == v {
                            break;
                        }
                    }
                    ncomp += 1;
                }
            }
        }
        comp
    }

    /// "a → b → c → a"
    pub fn describe_cycle(&self, cycle: &[usize]) -> String {
        let mut parts: Vec<&str> = cycle.iter().map(|&i| self.name(i)).collect();
        if let Some(&first) = cycle.first() {
            parts.push(self.name(first));
        }
        parts.join(" → ")
    }
}

/// A one-line summary of a step's action, for labels.
pub fn action_label(action: &Action) -> String {
    match action {
        Action::Code(CodeRef::Plugin(p)) => format!("code {p}"),
        Action::Code(CodeRef::Path(p)) => format!("code {p}"),
        Action::Code(CodeRef::Sha256(h)) => format!("code sha256:{}", &h[..h.len().min(12)]),
        Action::Tool(t) => format!("tool {}.{}", t.server, t.name),
        Action::Agent(a) => format!("agent {}", a.name),
        Action::Return => "return".into(),
        Action::Wait(w) => match &w.event {
            Some(e) => format!("wait event {e}"),
            None => "wait signal".into(),
        },
        Action::Sleep(SleepSpec::Ms(ms)) => format!("sleep {ms} ms"),
        Action::Sleep(SleepSpec::Until(t)) => format!("sleep until {t}"),
        Action::Workflow(w) => match w.version {
            Some(v) => format!("workflow {} v{v}", w.template),
            None => format!("workflow {}", w.template),
        },
    }
}

fn lines(def: &Definition, i: usize) -> Vec<String> {
    let s = &def.steps[i];
    let mut l = vec![s.name.clone(), action_label(&s.action)];
    if let Some(c) = &s.when {
        match &c.test {
            None => l.push(format!("when {}", c.ref_text)),
            Some(t) => l.push(format!("when {} {} {}", c.ref_text, t.op.as_str(), t.operand.raw())),
        }
    }
    if let Some(f) = &s.for_each {
        l.push(format!("for each {}", f.raw().as_str().map_or_else(|| f.raw().to_string(), str::to_owned)));
    }
    l
}

fn status_color(s: StepState) -> &'static str {
    match s {
        StepState::Succeeded => "#c8e6c9",
        StepState::Failed => "#ffcdd2",
        StepState::Skipped | StepState::Canceled => "#eeeeee",
        StepState::Running | StepState::Retrying => "#bbdefb",
        StepState::Waiting => "#fff9c4",
        StepState::Pending => "#ffffff",
    }
}

/// Mermaid flowchart. `when` steps are hexagons, `for_each` steps are
/// subroutine boxes; failure edges are dotted, always edges thick. `states`
/// (may be empty) colours steps of a run.
pub fn to_mermaid(def: &Definition, states: &HashMap<String, StepState>) -> String {
    let g = Graph::build(def);
    let mut o = String::from("flowchart TD\n");
    for (i, s) in def.steps.iter().enumerate() {
        let label = lines(def, i).join("<br/>").replace('"', "#quot;");
        let (open, close) = match (&s.when, &s.for_each) {
            (Some(_), _) => ("{{", "}}"),
            (None, Some(_)) => ("[[", "]]"),
            _ => ("[", "]"),
        };
        let _ = writeln!(o, "  s_{}{open}\"{label}\"{close}", s.name);
    }
    for e in g.edges() {
        let (a, b) = (g.name(e.from), g.name(e.to));
        let arrow = match e.on {
            EdgeOn::Success => "-->",
            EdgeOn::Always => "==>",
            EdgeOn::Failure | EdgeOn::Skipped => "-.->",
        };
        let _ = match def.steps[e.to].edge_when(&def.steps[e.from].name) {
            // A condition's text may hold anything: quoted in the label.
            Some(_) => {
                let l = edge_label(def, e).unwrap_or_default().replace('"', "#quot;");
                writeln!(o, "  s_{a} {arrow}|\"{l}\"| s_{b}")
            }
            None => match e.on {
                EdgeOn::Success => writeln!(o, "  s_{a} --> s_{b}"),
                EdgeOn::Always => writeln!(o, "  s_{a} == always ==> s_{b}"),
                on => writeln!(o, "  s_{a} -. {} .-> s_{b}", on.as_str()),
            },
        };
    }
    let mut used: Vec<StepState> = vec![];
    for s in &def.steps {
        if let Some(st) = states.get(&s.name) {
            if !used.contains(st) {
                used.push(*st);
                let _ = writeln!(o, "  classDef {} fill:{}", st.as_str(), status_color(*st));
            }
            let _ = writeln!(o, "  class s_{} {}", s.name, st.as_str());
        }
    }
    o
}

/// What an edge says besides "on success": its `on` and its `when`
/// (`failure`, `skipped`, `when @check.ok`); `None` for a plain edge.
pub fn edge_label(def: &Definition, e: &GraphEdge) -> Option<String> {
    let when = def.steps[e.to].edge_when(&def.steps[e.from].name).map(|c| format!("when {}", c.shown()));
    let on = (e.on != EdgeOn::Success).then(|| e.on.as_str().to_string());
    match (on, when) {
        (None, None) => None,
        (Some(x), None) | (None, Some(x)) => Some(x),
        (Some(o), Some(w)) => Some(format!("{o} {w}")),
    }
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// Graphviz DOT. `when` steps are dashed, `for_each` steps have a double
/// border; failure edges are red and dashed, always edges bold. `states`
/// (may be empty) fills steps of a run.
pub fn to_dot(def: &Definition, states: &HashMap<String, StepState>) -> String {
    let g = Graph::build(def);
    let mut o =
        format!("digraph \"{}\" {{\n  rankdir=TB;\n  node [shape=box, style=rounded];\n", dot_escape(&def.name));
    for (i, s) in def.steps.iter().enumerate() {
        let label = lines(def, i).iter().map(|l| dot_escape(l)).collect::<Vec<_>>().join("\\n");
        let mut style = vec!["rounded"];
        let mut attrs = format!("label=\"{label}\"");
        if s.when.is_some() {
            style.push("dashed");
        }
        if s.for_each.is_some() {
            attrs.push_str(", peripheries=2");
        }
        if let Some(st) = states.get(&s.name) {
            style.push("filled");
            let _ = write!(attrs, ", fillcolor=\"{}\", tooltip=\"{}\"", status_color(*st), st.as_str());
        }
        let _ = writeln!(o, "  \"{}\" [{attrs}, style=\"{}\"];", s.name, style.join(","));
    }
    for e in g.edges() {
        let (a, b) = (g.name(e.from), g.name(e.to));
        let mut attrs = match e.on {
            EdgeOn::Success => vec![],
            EdgeOn::Failure => vec!["style=dashed".to_string(), "color=red".to_string()],
            EdgeOn::Always => vec!["style=bold".to_string()],
            EdgeOn::Skipped => vec!["style=dotted".to_string()],
        };
        if let Some(l) = edge_label(def, e) {
            attrs.insert(0, format!("label=\"{}\"", dot_escape(&l)));
        }
        let _ = match attrs.is_empty() {
            true => writeln!(o, "  \"{a}\" -> \"{b}\";"),
            false => writeln!(o, "  \"{a}\" -> \"{b}\" [{}];", attrs.join(", ")),
        };
    }
    o.push_str("}\n");
    o
}

#[cfg(test)]
mod tests;
