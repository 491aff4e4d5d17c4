//! Every bundled plugin really runs: instantiate it in wasmtime with the
//! `step` world, check `describe`, run a good and a bad input.

use serde_json::{Value, json};
use wasmtime::component::{Component, HasSelf, Linker, ResourceTable, bindgen};
use wasmtime::{Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

bindgen!({ path: "../../wit", world: "weft:step/step" });

use weft::step::host::Level;

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    logs: Vec<(Level, String)>,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl weft::step::types::Host for State {}

impl weft::step::host::Host for State {
    fn log(&mut self, level: Level, message: String) {
        self.logs.push((level, message));
    }
    fn progress(&mut self, message: String) {
        self.logs.push((Level::Info, format!("progress: {message}")));
    }
    fn progress_data(&mut self, message: String, data: String) {
        self.logs.push((Level::Info, format!("progress: {message} {data}")));
    }
    fn artifact(&mut self, name: String, _mime: String, _data: Vec<u8>) {
        self.logs.push((Level::Info, format!("artifact: {name}")));
    }
}

struct Guest {
    store: Store<State>,
    step: Step,
}

fn instantiate(engine: &Engine, wasm: &[u8]) -> Guest {
    let component = Component::new(engine, wasm).expect("a valid component");
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker).unwrap();
    Step::add_to_linker::<_, HasSelf<State>>(&mut linker, |s| s).unwrap();
    let state = State { wasi: WasiCtx::builder().build(), table: ResourceTable::new(), logs: Vec::new() };
    let mut store = Store::new(engine, state);
    let step = Step::instantiate(&mut store, &component, &linker).expect("instantiate");
    Guest { store, step }
}

fn ctx() -> Context {
    Context {
        run_id: "r_test".into(),
        step: "s".into(),
        attempt: 1,
        idempotency_key: "r_test/s/1".into(),
        deadline_ms: u64::MAX,
    }
}

fn run(g: &mut Guest, input: Value) -> Result<Value, StepError> {
    match g.step.call_run(&mut g.store, &ctx(), &input.to_string()).expect("no trap")? {
        Outcome::Done(text) => Ok(serde_json::from_str(&text).expect("output is JSON")),
        Outcome::Reject(reason) => panic!("rejected: {reason}"),
    }
}

/// (plugin, good input, expected output, bad input)
fn cases() -> Vec<(&'static str, Value, Value, Value)> {
    vec![
        ("json-select", json!({"data": {"a": [1, {"b": 2}]}, "path": "a.1.b"}), json!(2), json!({"data": 1})),
        (
            "jq",
            json!({"data": [{"qty": 4}, {"qty": 12}, {"qty": 30}], "filter": "map(select(.qty > 10)) | length"}),
            json!(2),
            json!({"data": [], "filter": "map(selekt(.qty))"}),
        ),
        (
            "text-template",
            json!({"template": "Hi {{who}}", "values": {"who": "Ada"}}),
            json!({"text": "Hi Ada", "missing": []}),
            json!({"template": 1}),
        ),
        (
            "regex-extract",
            json!({"text": "id=42", "pattern": r"id=(?P<id>\d+)"}),
            json!({"matches": [{"match": "id=42", "groups": {"id": "42"}, "start": 0, "end": 5}]}),
            json!({"text": "x", "pattern": "("}),
        ),
        (
            "json-validate",
            json!({"schema": {"type": "object", "required": ["a"]}, "data": {}}),
            json!({"valid": false, "errors": [{"path": "", "message": "\"a\" is a required property", "schema_path": "/required"}]}),
            json!({"schema": {"type": 7}, "data": {}}),
        ),
        (
            "csv-to-json",
            json!({"csv": "a,b\n1,x"}),
            json!({"rows": [{"a": 1, "b": "x"}], "columns": ["a", "b"]}),
            json!({"csv": "a,b\n1"}),
        ),
    ]
}

#[test]
fn bundled_plugins_describe_and_run() {
    let engine = Engine::default();
    let cases = cases();
    assert_eq!(cases.len(), weft_bundled::all().len(), "a bundled plugin has no case here");
    for (name, good, expected, bad) in cases {
        let plugin = weft_bundled::get(name).expect(name);
        let mut g = instantiate(&engine, plugin.wasm);

        let meta = g.step.call_describe(&mut g.store).unwrap();
        assert_eq!(meta.name, name);
        assert_eq!(meta.version, env!("CARGO_PKG_VERSION"));
        assert!(meta.description.len() > 20, "{name}: {:?}", meta.description);
        for schema in [&meta.input_schema, &meta.output_schema] {
            let schema: Value = serde_json::from_str(schema.as_deref().expect("a schema")).unwrap();
            assert!(schema.get("$schema").is_some(), "{name}: {schema}");
        }

        assert_eq!(run(&mut g, good).unwrap(), expected, "{name}");
        let e = run(&mut g, bad).unwrap_err();
        assert_eq!(e.code, "invalid_input", "{name}: {}", e.message);
        assert!(!e.retryable);
        assert!(!e.message.is_empty());
    }
}

#[test]
fn serde_errors_name_the_field() {
    let engine = Engine::default();
    let mut g = instantiate(&engine, weft_bundled::get("text-template").unwrap().wasm);
    let e = run(&mut g, json!({"template": "x", "strict": "yes"})).unwrap_err();
    assert!(e.message.starts_with("input.strict: invalid type: string \"yes\", expected a boolean"), "{}", e.message);
    let e = g.step.call_run(&mut g.store, &ctx(), "{not json").unwrap().unwrap_err();
    assert_eq!(e.code, "invalid_input");
    assert!(e.message.contains("line 1, column 2"), "{}", e.message);
}

#[test]
fn guest_logs_reach_the_host() {
    let engine = Engine::default();
    let mut g = instantiate(&engine, weft_bundled::get("csv-to-json").unwrap().wasm);
    run(&mut g, json!({"csv": "a\n1\n2"})).unwrap();
    assert_eq!(g.store.data().logs, [(Level::Debug, "parsed 2 rows of 1 columns".to_string())]);
}
