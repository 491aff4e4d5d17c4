//! Decoding a definition's `notify` list: more methods of the decoder in
//! `decode` (every problem with its JSON Pointer).

use serde_json::Value;

use super::{D, opt};
use crate::definition::{Action, Step, ToolRef};
use crate::notify::{NOTIFY_STATES, Notify, NotifyOn, PushTarget};
use crate::problem::{Problem, did_you_mean, shown, type_name};

const EXAMPLE: &str = r#"{"on": ["completed", "failed"], "webhook": "ops"}"#;

impl D<'_> {
    pub(super) fn notify_list(&mut self, v: &Value, steps: &[Step]) -> Vec<Notify> {
        match v {
            Value::Array(a) => {
                a.iter().enumerate().filter_map(|(i, n)| self.notify(n, &format!("/notify/{i}"), steps)).collect()
            }
            other => {
                let p = Problem::new("/notify", format!("`notify` must be an array, got {}", type_name(other)));
                self.out.push(p.hint(format!("for example: [{EXAMPLE}]")));
                vec![]
            }
        }
    }

    fn notify(&mut self, v: &Value, at: &str, steps: &[Step]) -> Option<Notify> {
        let m = self.obj(v, at, "a notification")?;
        self.fields(m, at, &["on", "webhook", "tool", "push", "input", "key", "retry"], "notification");
        let f = |k: &str| format!("{at}/{k}");
        let on = match self.req(m, "on", at) {
            Some(Value::Array(a)) if !a.is_empty() => {
                a.iter().enumerate().filter_map(|(k, x)| self.notify_on(x, &format!("{at}/on/{k}"), steps)).collect()
            }
            Some(other) => {
                let p = Problem::new(
                    f("on"),
                    format!("`on` must be a non-empty array of events, got {}", shown_json(other)),
                );
                self.out.push(p.hint(on_hint()));
                vec![]
            }
            None => vec![],
        };
        let webhook = opt(m, "webhook").and_then(|x| self.string(x, &f("webhook"), "webhook"));
        let tool = opt(m, "tool").and_then(|x| self.notify_tool(x, &f("tool")));
        let push = opt(m, "push").and_then(|x| self.notify_push(x, &f("push")));
        let targets = [opt(m, "webhook"), opt(m, "tool"), opt(m, "push")].iter().filter(|t| t.is_some()).count();
        if targets != 1 {
            let p = Problem::new(at, "a notification needs exactly one of `webhook`, `tool` and `push`");
            self.out.push(p.hint(format!("for example: {EXAMPLE}")));
        }
        let input = opt(m, "input").map(|x| self.template(x, &f("input")));
        let key = opt(m, "key").map(|x| self.template(x, &f("key")));
        let retry = opt(m, "retry").and_then(|x| self.retry(x, &f("retry")));
        Some(Notify { on, webhook, tool, push, input, key, retry })
    }

    fn notify_on(&mut self, v: &Value, at: &str, steps: &[Step]) -> Option<NotifyOn> {
        let Some(s) = v.as_str() else {
            self.push(at, format!("an event must be a string, got {}", type_name(v)));
            return None;
        };
        match NotifyOn::parse(s) {
            Some(NotifyOn::Resolved(step)) => match steps.iter().find(|x| x.name == step) {
                None => {
                    let names: Vec<&str> = steps.iter().map(|x| x.name.as_str()).collect();
                    let mut p = Problem::new(at, format!("no step `{}` to be resolved", shown(&step)));
                    if let Some(d) = did_you_mean(&step, names.iter().copied()) {
                        p = p.hint(format!("did you mean `resolved:{d}`?"));
                    }
                    self.out.push(p);
                    None
                }
                Some(x) if !matches!(x.action, Action::Wait(_) | Action::Sleep(_) | Action::Workflow(_)) => {
                    self.push(
                        at,
                        format!("step `{step}` does not wait (`resolved:` names a wait, sleep or workflow step)"),
                    );
                    None
                }
                Some(_) => Some(NotifyOn::Resolved(step)),
            },
            Some(on) => Some(on),
            None => {
                let p = Problem::new(at, format!("unknown event `{}`", shown(s)));
                self.out.push(p.hint(on_hint()));
                None
            }
        }
    }

    fn notify_tool(&mut self, v: &Value, at: &str) -> Option<ToolRef> {
        let m = self.obj(v, at, "`tool`")?;
        self.fields(m, at, &["server", "name"], "tool");
        let server = self.req(m, "server", at).and_then(|x| self.string(x, &format!("{at}/server"), "server"));
        let name = self.req(m, "name", at).and_then(|x| self.string(x, &format!("{at}/name"), "name"));
        Some(ToolRef { server: server?, name: name? })
    }
}

impl D<'_> {
    fn notify_push(&mut self, v: &Value, at: &str) -> Option<PushTarget> {
        let m = self.obj(v, at, "`push`")?;
        self.fields(m, at, &["url", "id", "token", "authorization"], "push");
        let url = self.req(m, "url", at).and_then(|x| self.string(x, &format!("{at}/url"), "url"));
        let mut text = |k: &str| opt(m, k).and_then(|x| self.string(x, &format!("{at}/{k}"), k));
        let (id, token, authorization) = (text("id"), text("token"), text("authorization"));
        Some(PushTarget { url: url?, id, token, authorization })
    }
}

fn on_hint() -> String {
    let states: Vec<&str> = NOTIFY_STATES.iter().map(|s| s.as_str()).collect();
    format!("events are: {}, or resolved:STEP", states.join(", "))
}

fn shown_json(v: &Value) -> String {
    match v {
        Value::Array(_) => "an empty array".into(),
        other => type_name(other).to_string(),
    }
}
