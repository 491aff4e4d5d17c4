//! Set-based statements for a whole commit group. A group carries the
//! transitions of many runs: one statement per write would cost the
//! database a parse, a plan and an executor start per step transition
//! (~25 per trivial run). Here the hot writes (attempts started and
//! finished, step and run transitions) become one `UPDATE ... FROM
//! unnest(...)` / `INSERT ... SELECT FROM unnest(...)` per kind, whose row
//! count must be the number of writes it carries.
//!
//! Order is kept where it matters. Each write gets a *round* and a *slot*
//! (its kind's place in a round: runs created, attempts finished, attempts
//! started, steps, runs, then every other write in order); statements go
//! round by round, slot by slot. A write lands in the first round where
//! every earlier write it depends on comes before it:
//!
//! - writes of the same row (same run, step, item) keep their order, and
//!   two of them never share one set statement;
//! - a run's creation, and writes outside the hot kinds, keep their order
//!   against every write of the same run;
//! - writes outside the hot kinds keep their order among themselves.
//!
//! Statements only read rows of their own table or of the run's creation,
//! so that order gives what the writes one by one would give. When a count
//! is off, the group is rolled back and applied again one write at a time
//! (see `write`): the exact refusal comes from there, and a plan that
//! missed a dependency could only cost time, never a wrong commit.

use std::collections::HashMap;

use weft_engine::state::AttemptState;
use weft_engine::store::Write;

use crate::Me;
use crate::apply::{Stmt, Stmts, Which, err_json, item_col, opt_json, p};

/// A kind's place in a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    Create = 0,
    FinishAttempt = 1,
    StartAttempt = 2,
    Step = 3,
    Run = 4,
    Other = 5,
}

const SLOTS: usize = 6;

impl Slot {
    fn of(w: &Write) -> Slot {
        match w {
            Write::CreateRun { .. } => Slot::Create,
            // Never committed (refused one by one): keeps the plain path.
            Write::FinishAttempt { state: AttemptState::Running, .. } => Slot::Other,
            Write::FinishAttempt { .. } => Slot::FinishAttempt,
            Write::StartAttempt { .. } => Slot::StartAttempt,
            Write::StepState { .. } => Slot::Step,
            Write::RunState { .. } => Slot::Run,
            _ => Slot::Other,
        }
    }

    /// One set statement per round and slot (else statements in order).
    fn is_set(self) -> bool {
        matches!(self, Slot::FinishAttempt | Slot::StartAttempt | Slot::Step | Slot::Run)
    }
}

/// The latest round each slot was used in, for one key.
type Seen = [Option<usize>; SLOTS];

/// The first round where `slot` comes after everything in `seen`.
fn after(seen: Option<&Seen>, slot: Slot) -> usize {
    let Some(seen) = seen else { return 0 };
    let mut r = 0;
    for (s, round) in seen.iter().enumerate() {
        let Some(round) = *round else { continue };
        let needed = if s < slot as usize || (s == slot as usize && !slot.is_set()) { round } else { round + 1 };
        r = r.max(needed);
    }
    r
}

fn mark(seen: &mut Seen, slot: Slot, round: usize) {
    let s = &mut seen[slot as usize];
    *s = Some(s.map_or(round, |r| r.max(round)));
}

/// The row a hot write changes.
#[derive(Hash, PartialEq, Eq)]
struct Row<'a> {
    table: Slot,
    run: &'a str,
    step: &'a str,
    item: i32,
}

fn row(w: &Write) -> Option<Row<'_>> {
    let (table, run, step, item) = match w {
        Write::FinishAttempt { run, step, item, .. } | Write::StartAttempt { run, step, item, .. } => {
            // Both change the attempts of (run, step, item).
            (Slot::StartAttempt, run, step.as_str(), item_col(*item))
        }
        Write::StepState { run, step, .. } => (Slot::Step, run, step.as_str(), -1),
        Write::RunState { run, .. } => (Slot::Run, run, "", -1),
        _ => return None,
    };
    Some(Row { table, run: run.as_str(), step, item })
}

/// The writes of a group, placed in rounds and slots.
#[derive(Default)]
struct Plan<'a> {
    /// `rounds[r][slot]`: the writes there, in their order.
    rounds: Vec<[Vec<&'a Write>; SLOTS]>,
    rows: HashMap<Row<'a>, Seen>,
    /// Per run: every write of it, and its creation and other writes.
    all: HashMap<&'a str, Seen>,
    strong: HashMap<&'a str, Seen>,
    /// The round of the last write outside the hot kinds.
    other: usize,
}

impl<'a> Plan<'a> {
    fn place(&mut self, w: &'a Write) {
        let slot = Slot::of(w);
        let run = w.run_id().map(|r| r.as_str());
        let round = match (slot.is_set(), row(w)) {
            (true, Some(key)) => {
                let r = after(self.rows.get(&key), slot).max(after(run.and_then(|id| self.strong.get(id)), slot));
                mark(self.rows.entry(key).or_default(), slot, r);
                r
            }
            _ => {
                let mut r = after(run.and_then(|id| self.all.get(id)), slot);
                if slot == Slot::Other {
                    r = r.max(self.other);
                    self.other = r;
                }
                if let Some(id) = run {
                    mark(self.strong.entry(id).or_default(), slot, r);
                }
                r
            }
        };
        if let Some(id) = run {
            mark(self.all.entry(id).or_default(), slot, round);
        }
        while self.rounds.len() <= round {
            self.rounds.push(Default::default());
        }
        self.rounds[round][slot as usize].push(w);
    }
}

/// The slots, in a round's order (`Slot as usize` is the index).
const ORDER: [Slot; SLOTS] =
    [Slot::Create, Slot::FinishAttempt, Slot::StartAttempt, Slot::Step, Slot::Run, Slot::Other];

impl Stmts {
    /// The statements of a group's batches (their writes in `batches`
    /// order), set-based where a round and slot holds more than one write.
    pub fn writes_in_sets<'a>(&mut self, writes: impl Iterator<Item = &'a Write>, me: &Me) {
        let mut plan = Plan::default();
        for w in writes {
            match w {
                // Events are written by one statement at the end.
                Write::Event(_) => self.write(w, me),
                _ => plan.place(w),
            }
        }
        for round in &plan.rounds {
            for (slot, ws) in ORDER.into_iter().zip(round) {
                if ws.len() < 2 || !slot.is_set() {
                    ws.iter().for_each(|w| self.write(w, me));
                    continue;
                }
                self.in_sets += ws.len() as u64;
                self.push(match slot {
                    Slot::FinishAttempt => finish_attempts(ws),
                    Slot::StartAttempt => start_attempts(ws),
                    Slot::Step => step_states(ws),
                    _ => run_states(ws),
                });
            }
        }
    }
}

fn finish_attempts(ws: &[&Write]) -> Stmt {
    let mut c = Columns::new(10);
    for w in ws {
        let Write::FinishAttempt { run, step, item, attempt, state, output, error, fuel, blame, at } = w else {
            unreachable!("a finished attempt")
        };
        c.text(0, run.as_str());
        c.text(1, step);
        c.int(2, item_col(*item));
        c.int(3, attempt.get() as i32);
        c.text(4, state.as_str());
        c.opt_text(5, opt_json(output));
        c.opt_text(6, err_json(error));
        c.big(7, Some(*at));
        c.big(8, fuel.map(|f| f.min(i64::MAX as u64) as i64));
        c.int(9, *blame as i32);
    }
    c.stmt(Which::finish_attempts, ws.len(), "attempts finished")
}

fn start_attempts(ws: &[&Write]) -> Stmt {
    let mut c = Columns::new(7);
    for w in ws {
        let Write::StartAttempt { run, step, item, attempt, lease_until, at, input } = w else {
            unreachable!("a started attempt")
        };
        c.text(0, run.as_str());
        c.text(1, step);
        c.int(2, item_col(*item));
        c.int(3, attempt.get() as i32);
        c.big(4, Some(*lease_until));
        c.big(5, Some(*at));
        c.opt_text(6, opt_json(input));
    }
    c.stmt(Which::start_attempts, ws.len(), "attempts started")
}

fn step_states(ws: &[&Write]) -> Stmt {
    let mut c = Columns::new(9);
    for w in ws {
        let Write::StepState { run, step, from, to, output, error, next_attempt_at, at } = w else {
            unreachable!("a step transition")
        };
        c.text(0, run.as_str());
        c.text(1, step);
        c.text(2, from.as_str());
        c.text(3, to.as_str());
        c.opt_text(4, opt_json(output));
        c.opt_text(5, err_json(error));
        c.big(6, *next_attempt_at);
        c.big(7, Some(*at));
        c.bool(8, to.is_terminal());
    }
    c.stmt(Which::step_states, ws.len(), "step transitions")
}

fn run_states(ws: &[&Write]) -> Stmt {
    let mut c = Columns::new(6);
    for w in ws {
        let Write::RunState { run, from, to, output, error, at } = w else { unreachable!("a run transition") };
        c.text(0, run.as_str());
        c.text(1, from.as_str());
        c.text(2, to.as_str());
        c.opt_text(3, opt_json(output));
        c.opt_text(4, err_json(error));
        c.big(5, Some(*at));
    }
    c.stmt(Which::run_states, ws.len(), "run transitions")
}

/// The array parameters of a set statement, column by column.
struct Columns {
    cols: Vec<Col>,
}

enum Col {
    /// No value yet: the first one gives the column its type.
    Unset,
    Text(Vec<Option<String>>),
    Int(Vec<i32>),
    Big(Vec<Option<i64>>),
    Bool(Vec<bool>),
}

impl Columns {
    fn new(n: usize) -> Columns {
        Columns { cols: (0..n).map(|_| Col::Unset).collect() }
    }

    fn col(&mut self, i: usize, empty: impl FnOnce() -> Col) -> &mut Col {
        if matches!(self.cols[i], Col::Unset) {
            self.cols[i] = empty();
        }
        &mut self.cols[i]
    }

    fn text(&mut self, i: usize, v: &str) {
        self.opt_text(i, Some(v.to_string()));
    }

    fn opt_text(&mut self, i: usize, v: Option<String>) {
        let Col::Text(c) = self.col(i, || Col::Text(vec![])) else { unreachable!("a text column") };
        c.push(v);
    }

    fn int(&mut self, i: usize, v: i32) {
        let Col::Int(c) = self.col(i, || Col::Int(vec![])) else { unreachable!("an int column") };
        c.push(v);
    }

    fn big(&mut self, i: usize, v: Option<i64>) {
        let Col::Big(c) = self.col(i, || Col::Big(vec![])) else { unreachable!("a bigint column") };
        c.push(v);
    }

    fn bool(&mut self, i: usize, v: bool) {
        let Col::Bool(c) = self.col(i, || Col::Bool(vec![])) else { unreachable!("a bool column") };
        c.push(v);
    }

    /// The statement, refused unless it changes one row per write.
    fn stmt(self, which: Which, n: usize, what: &str) -> Stmt {
        let params = self
            .cols
            .into_iter()
            .map(|c| match c {
                Col::Text(v) => p(v),
                Col::Int(v) => p(v),
                Col::Big(v) => p(v),
                Col::Bool(v) => p(v),
                Col::Unset => unreachable!("every column has a value per write"),
            })
            .collect();
        Stmt::rows(which, params, n as u64, format!("one of {n} {what} found its row in another state"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weft_engine::state::{RunState, StepState};
    use weft_engine::{AttemptNo, RunId};

    fn step(run: &str, step: &str, from: StepState, to: StepState) -> Write {
        Write::StepState {
            run: RunId::derive(0, run),
            step: step.into(),
            from,
            to,
            output: None,
            error: None,
            next_attempt_at: None,
            at: 0,
        }
    }

    fn start(run: &str, step: &str, n: u32) -> Write {
        Write::StartAttempt {
            run: RunId::derive(0, run),
            step: step.into(),
            item: None,
            attempt: AttemptNo::new(n).unwrap(),
            lease_until: 0,
            at: 0,
            input: None,
        }
    }

    fn finish(run: &str, step: &str, n: u32) -> Write {
        Write::FinishAttempt {
            run: RunId::derive(0, run),
            step: step.into(),
            item: None,
            attempt: AttemptNo::new(n).unwrap(),
            state: AttemptState::Succeeded,
            output: None,
            error: None,
            fuel: None,
            blame: 0,
            at: 0,
        }
    }

    fn run(run: &str, from: RunState, to: RunState) -> Write {
        Write::RunState { run: RunId::derive(0, run), from, to, output: None, error: None, at: 0 }
    }

    /// (round, slot) of each write, in the order given.
    fn places(ws: &[Write]) -> Vec<(usize, usize)> {
        let mut plan = Plan::default();
        ws.iter().for_each(|w| plan.place(w));
        ws.iter()
            .map(|w| {
                plan.rounds
                    .iter()
                    .enumerate()
                    .find_map(|(r, round)| {
                        round
                            .iter()
                            .enumerate()
                            .find_map(|(s, v)| v.iter().any(|x| std::ptr::eq(*x, w)).then_some((r, s)))
                    })
                    .expect("placed")
            })
            .collect()
    }

    #[test]
    fn many_runs_one_transition_each_share_one_round() {
        let ws: Vec<Write> =
            (0..5).map(|i| step(&format!("r{i}"), "a", StepState::Pending, StepState::Running)).collect();
        assert!(places(&ws).iter().all(|p| *p == (0, Slot::Step as usize)));
    }

    #[test]
    fn the_same_row_twice_goes_to_the_next_round() {
        let ws = [
            step("r", "a", StepState::Pending, StepState::Running),
            start("r", "a", 1),
            finish("r", "a", 1),
            step("r", "a", StepState::Running, StepState::Succeeded),
            // another step of the same run: no dependency on the first
            step("r", "b", StepState::Pending, StepState::Running),
        ];
        assert_eq!(
            places(&ws),
            vec![
                (0, Slot::Step as usize),
                (0, Slot::StartAttempt as usize),
                (1, Slot::FinishAttempt as usize),
                (1, Slot::Step as usize),
                (0, Slot::Step as usize),
            ]
        );
    }

    #[test]
    fn a_retry_after_a_finish_stays_in_the_round() {
        // Finished attempts come before started ones within a round.
        let ws = [finish("r", "a", 1), start("r", "a", 2), run("r", RunState::Working, RunState::Completed)];
        assert_eq!(
            places(&ws),
            vec![(0, Slot::FinishAttempt as usize), (0, Slot::StartAttempt as usize), (0, Slot::Run as usize)]
        );
        // A start before a finish of the same attempts must not move up.
        let ws = [start("r", "a", 1), finish("r", "a", 1), start("r", "a", 2)];
        assert_eq!(
            places(&ws),
            vec![(0, Slot::StartAttempt as usize), (1, Slot::FinishAttempt as usize), (1, Slot::StartAttempt as usize)]
        );
    }

    #[test]
    fn other_writes_keep_their_order_against_the_run_and_each_other() {
        let close = |r: &str| Write::CloseWait { run: RunId::derive(0, r), step: "a".into() };
        let take = |id: &str| Write::InboxTake { id: id.into() };
        let ws = [
            close("r"),
            run("r", RunState::Working, RunState::Completed),
            run("r2", RunState::Working, RunState::Completed),
            step("r", "a", StepState::Waiting, StepState::Succeeded),
            take("m"),
            close("r"),
            take("n"),
        ];
        let got = places(&ws);
        assert_eq!(got[0], (0, Slot::Other as usize));
        assert_eq!(got[1], (1, Slot::Run as usize), "runs come before others in a round: the next one");
        assert_eq!(got[2], (0, Slot::Run as usize), "another run: no dependency");
        assert_eq!(got[3], (1, Slot::Step as usize), "after the close");
        assert_eq!(got[4], (0, Slot::Other as usize), "no run: only after the others before it");
        assert_eq!(got[5], (1, Slot::Other as usize), "after the run's transition");
        assert_eq!(got[6], (1, Slot::Other as usize), "others keep their order");
    }
}
