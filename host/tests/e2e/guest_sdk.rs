//! The guest SDKs and `weft guest new | build | test`, through the real
//! `weft` binary: a TypeScript and a Python step go from `weft guest new`
//! to a workflow run with their schemas shown by `weft plugin inspect`; the
//! JavaScript, Rust and C templates generate, test and build; the SDKs' own
//! native unit tests (node:test in guest-sdk/js, unittest in
//! guest-sdk/python) pass; a JavaScript SDK step costs no more per call
//! than the same step written by hand.
//!
//! A test whose toolchain is missing (node/npm, python3, clang-19) prints
//! `SKIPPED` loudly; `scripts/setup.sh` installs them. The toolchains
//! `weft guest build` fetches go to weft's default cache
//! (`~/.cache/weft/toolchains`), installed by the first build of a suite run.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::common::{Outcome, Weft, repo_root};

/// Says loudly that a test is skipped (straight to stderr: not captured).
fn skip(what: &str, reason: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n*** SKIPPED: {what}: {reason} ***\n");
}

fn missing(tools: &[&str]) -> Option<String> {
    tools
        .iter()
        .find(|t| Command::new(t).arg("--version").output().is_err())
        .map(|t| format!("`{t}` is not on PATH (run scripts/setup.sh)"))
}

/// `weft ARGS...` run in `dir`, with the test toolchain cache.
fn weft_in(w: &Weft, dir: &Path, args: &[&str]) -> Outcome {
    let out = w
        .cmd()
        .args(args)
        .current_dir(dir)
        // Rust projects: one target folder for every run of the suite (the
        // README's quick start uses it too).
        .env("CARGO_TARGET_DIR", repo_root().join("target/guest-projects"))
        .output()
        .expect("start weft");
    Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `weft guest new --lang LANG NAME` in the test's folder; the project folder.
fn new(w: &Weft, lang: &str, name: &str) -> PathBuf {
    let out = weft_in(w, w.dir.path(), &["guest", "new", "--lang", lang, name]);
    out.expect_code(0);
    let dir = PathBuf::from(out.stdout.trim());
    assert_eq!(dir, w.dir.path().canonicalize().unwrap().join(name), "{}", out.stderr);
    assert!(out.stderr.contains("next: cd"), "{}", out.stderr);
    dir
}

/// `weft guest test` in `dir`, which must pass.
fn native_tests(w: &Weft, dir: &Path) {
    let out = weft_in(w, dir, &["guest", "test"]);
    assert_eq!(
        out.code,
        0,
        "weft guest test failed in {}\n--- stdout\n{}\n--- stderr\n{}",
        dir.display(),
        out.stdout,
        out.stderr
    );
}

/// `weft guest build` in `dir`; the built file it printed.
fn build(w: &Weft, dir: &Path) -> PathBuf {
    let out = weft_in(w, dir, &["guest", "build"]);
    out.expect_code(0);
    let built = PathBuf::from(out.stdout.trim());
    assert!(built.is_absolute() && built.is_file(), "`weft guest build` printed {:?}\n{}", out.stdout, out.stderr);
    built
}

/// Registers `wasm` as plugin `name`, checks `plugin inspect` shows the
/// hello step's schemas, runs it in a workflow and with a wrong input.
fn hello_in_a_workflow(w: &Weft, wasm: &Path, name: &str) {
    w.run(&["plugin", "add", wasm.to_str().unwrap()]).expect_code(0);
    let out = w.run(&["plugin", "inspect", name]);
    out.expect_code(0);
    let info = out.json();
    assert_eq!((info["name"].as_str(), info["kind"].as_str()), (Some(name), Some("component")), "{info}");
    assert_eq!(info["description"], "Greet someone by name.", "{info}");
    assert_eq!(info["version"], "0.1.0", "{info}");
    let input = &info["input_schema"];
    assert_eq!(input["type"], "object", "{info}");
    assert_eq!(input["required"], json!(["name"]), "{info}");
    assert_eq!(input["properties"]["name"]["type"], "string", "{info}");
    assert_eq!(input["properties"]["name"]["description"], "Who to greet", "{info}");
    assert_eq!(input["properties"]["times"]["type"], "integer", "{info}");
    assert_eq!(
        (input["properties"]["times"]["minimum"].as_i64(), input["properties"]["times"]["maximum"].as_i64()),
        (Some(1), Some(10))
    );
    assert_eq!(info["output_schema"]["properties"]["greeting"]["type"], "string", "{info}");

    let def = json!({
        "name": format!("greet-with-{name}"),
        "input_schema": {"type": "object", "required": ["who"], "properties": {"who": {"type": "string"}}},
        "steps": [
            {"name": "greet", "code": {"plugin": name}, "input": {"name": "@input.who", "times": 2}},
            {"name": "again", "code": {"plugin": name}, "input": {"name": "@greet.greeting"}},
        ],
        "output": {"first": "@greet.greeting", "second": "@again.greeting"},
    });
    let file = w.write_def(&format!("flow-{name}"), &def);
    let out = w.run(&["run", file.to_str().unwrap(), "--input", r#"{"who": "Ada"}"#]);
    out.expect_code(0);
    assert_eq!(
        out.json(),
        json!({"first": "Hello, Ada! Hello, Ada!", "second": "Hello, Hello, Ada! Hello, Ada!!"}),
        "{}",
        out.stderr
    );

    // The step's status update carries its data into the run's events.
    let runs = w.runs();
    let run = runs.iter().find(|r| r["template"] == format!("greet-with-{name}")).expect("the run");
    let events = w.run(&["runs", "events", run["id"].as_str().unwrap(), "--json"]);
    events.expect_code(0);
    let progress: Vec<Value> = events
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "progress" && e["step"] == "greet")
        .collect();
    assert_eq!(progress.len(), 1, "{}", events.stdout);
    assert_eq!(progress[0]["data"], json!({"message": "greeted", "data": {"times": 2}}), "{}", events.stdout);

    // A wrong input is the SDK's invalid_input naming the field.
    let out = w.step_run(Path::new(name), &json!({"name": 5}), &[]);
    out.expect_code(1);
    let err = out.json();
    assert_eq!((err["kind"].as_str(), err["code"].as_str()), (Some("guest_error"), Some("invalid_input")), "{err}");
    assert!(err["message"].as_str().is_some_and(|m| m.contains("input.name")), "{err}");
    let out = w.step_run(Path::new(name), &json!({"name": "Ada", "times": 11}), &[]);
    out.expect_code(1);
    assert!(out.json()["message"].as_str().is_some_and(|m| m.contains("input.times")), "{}", out.stdout);
}

#[test]
fn a_typescript_step_goes_from_new_to_a_workflow_run() {
    if let Some(why) = missing(&["node", "npm"]) {
        return skip("weft guest new --lang ts", &why);
    }
    let w = Weft::new();
    let dir = new(&w, "ts", "hello");
    for file in ["package.json", ".npmrc", "tsconfig.json", "src/step.ts", "src/step.test.ts", "README.md"] {
        assert!(dir.join(file).is_file(), "{file} is missing");
    }
    // What the developer edits: nothing about WIT.
    let step = std::fs::read_to_string(dir.join("src/step.ts")).unwrap();
    assert!(!step.contains("tag") && !step.contains("wit"), "{step}");
    native_tests(&w, &dir);
    let wasm = build(&w, &dir);
    assert_eq!(wasm, dir.join("build/hello.wasm"));
    hello_in_a_workflow(&w, &wasm, "hello");
}

#[test]
fn a_python_step_goes_from_new_to_a_workflow_run() {
    if let Some(why) = missing(&["python3"]) {
        return skip("weft guest new --lang python", &why);
    }
    let w = Weft::new();
    let dir = new(&w, "python", "hello-py");
    for file in ["pyproject.toml", "hello_py.py", "test_hello_py.py", "README.md"] {
        assert!(dir.join(file).is_file(), "{file} is missing");
    }
    native_tests(&w, &dir);
    let wasm = build(&w, &dir);
    assert_eq!(wasm, dir.join("build/hello-py.wasm"));
    hello_in_a_workflow(&w, &wasm, "hello-py");
}

#[test]
fn javascript_rust_and_c_templates_test_and_build() {
    let w = Weft::new();
    let mut built: Vec<(String, PathBuf)> = Vec::new();
    match missing(&["node", "npm"]) {
        Some(why) => skip("weft guest new --lang js", &why),
        None => {
            let dir = new(&w, "js", "hello-js");
            native_tests(&w, &dir);
            built.push(("hello-js".into(), build(&w, &dir)));
        }
    }
    match missing(&["cargo"]) {
        Some(why) => skip("weft guest new --lang rust", &why),
        None => {
            let dir = new(&w, "rust", "hello-rs");
            assert!(dir.join("rust-toolchain.toml").is_file() && dir.join("Cargo.lock").is_file());
            native_tests(&w, &dir);
            let wasm = build(&w, &dir);
            assert!(wasm.ends_with("wasm32-wasip2/release/hello_rs.wasm"), "{}", wasm.display());
            built.push(("hello-rs".into(), wasm));
        }
    }
    for (name, wasm) in &built {
        let out = w.step_run(wasm, &json!({"name": "Ada", "times": 2}), &[]);
        out.expect_code(0);
        assert_eq!(out.json(), json!({"greeting": "Hello, Ada! Hello, Ada!"}), "{name}");
        assert!(out.stderr.contains(r#"[guest progress] greeted {"times":2}"#), "{name}: {}", out.stderr);
        let info = w.run(&["step", "inspect", wasm.to_str().unwrap()]);
        info.expect_code(0);
        assert_eq!(info.json()["name"], name.as_str());
        assert_eq!(info.json()["input_schema"]["properties"]["times"]["type"], "integer", "{name}");
    }
    match missing(&["clang-19", "cc"]) {
        Some(why) => skip("weft guest new --lang c", &why),
        None => {
            let dir = new(&w, "c", "hello-c");
            native_tests(&w, &dir);
            let wasm = build(&w, &dir);
            let out = w.step_run(&wasm, &json!({"name": "Ada"}), &[]);
            out.expect_code(0);
            assert_eq!(out.json(), json!({"greeting": "Hello, Ada!"}));
            let info = w.run(&["step", "inspect", wasm.to_str().unwrap()]);
            assert_eq!(info.json()["kind"], "command", "{}", info.stdout);
        }
    }
}

#[test]
fn guest_commands_refuse_mistakes_and_change_nothing() {
    let w = Weft::new();
    // A name that is not a step name.
    let out = weft_in(&w, w.dir.path(), &["guest", "new", "--lang", "ts", "Bad_Name"]);
    out.expect_code(2);
    assert!(out.stderr.contains("not a step name"), "{}", out.stderr);
    // An existing folder.
    std::fs::create_dir(w.dir.path().join("taken")).unwrap();
    let out = weft_in(&w, w.dir.path(), &["guest", "new", "--lang", "python", "taken"]);
    out.expect_code(2);
    assert!(out.stderr.contains("already exists"), "{}", out.stderr);
    assert_eq!(std::fs::read_dir(w.dir.path().join("taken")).unwrap().count(), 0);
    // A folder that is no project.
    let empty = w.dir.path().join("taken");
    let out = weft_in(&w, &empty, &["guest", "build"]);
    out.expect_code(2);
    assert!(out.stderr.contains("is it a step project?"), "{}", out.stderr);
    // An SDK folder that is no weft checkout.
    let out = weft_in(&w, w.dir.path(), &["guest", "new", "--lang", "ts", "x", "--sdk", empty.to_str().unwrap()]);
    out.expect_code(2);
    assert!(out.stderr.contains("is not a weft checkout"), "{}", out.stderr);
    assert!(!w.dir.path().join("x").exists());
    // A package.json whose main is missing.
    let js = w.dir.path().join("js");
    std::fs::create_dir(&js).unwrap();
    std::fs::write(js.join("package.json"), r#"{"name": "js", "main": "nope.js"}"#).unwrap();
    if missing(&["node", "npm"]).is_none() {
        let out = weft_in(&w, &js, &["guest", "build"]);
        assert_ne!(out.code, 0);
        assert!(out.stderr.contains("\"main\" must name the step module"), "{}", out.stderr);
    }
}

/// The SDKs' own unit tests, and the examples' native tests, as a
/// developer runs them.
#[test]
fn the_sdks_and_the_examples_pass_their_native_unit_tests() {
    let root = repo_root();
    let w = Weft::new();
    match missing(&["node", "npm"]) {
        Some(why) => skip("guest-sdk/js unit tests", &why),
        None => {
            let js = root.join("guest-sdk/js");
            if !js.join("node_modules/zod/package.json").is_file() {
                let ci = Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(&js).output().unwrap();
                assert!(ci.status.success(), "npm ci in guest-sdk/js: {}", String::from_utf8_lossy(&ci.stderr));
            }
            let out = Command::new("node").arg("--test").current_dir(&js).output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "node --test in guest-sdk/js failed:\n{text}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(text.contains("# fail 0") && !text.contains("# pass 0"), "{text}");
            native_tests(&w, &root.join("examples/js-guest"));
        }
    }
    match missing(&["python3"]) {
        Some(why) => skip("guest-sdk/python unit tests", &why),
        None => {
            let py = root.join("guest-sdk/python");
            let out = Command::new("python3")
                .args(["-m", "unittest", "discover", "-s", "tests", "-v"])
                .current_dir(&py)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "python3 -m unittest in guest-sdk/python failed:\n{text}");
            assert!(text.contains("\nOK") && text.contains("Ran "), "{text}");
            native_tests(&w, &root.join("examples/python-guest"));
        }
    }
}

/// A JavaScript step that uses, at run time, the parts of zod a component
/// keeps as text until first use (guest-sdk/js/lazy-build.mjs): the JSON
/// Schema generator (which reads the `.describe` text zod's registry holds
/// in the bundle), the JSON Schema reader, messages in another language,
/// the schema compiler, and `instanceof z.ZodError`.
const ZOD_TEXT_STEP: &str = r#"
import { step, z } from 'weft-guest';

const Item = z.object({ name: z.string().min(1).describe('What it is'), qty: z.number().int().min(0) });

export default step(
  { name: 'zod-text', input: z.object({ lang: z.string(), item: z.unknown() }) },
  ({ lang, item }) => {
    const schema = z.toJSONSchema(Item);
    const back = z.fromJSONSchema(schema).safeParse(item);
    const local = Item.safeParse(item, { error: z.locales[lang]().localeError });
    const compiled = z.compile(Item).safeParse(item);
    return {
      schema,
      back: back.success ? back.data : back.error.issues.map((i) => i.message),
      local: local.success ? 'ok' : local.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`),
      localIsZodError: !local.success && local.error instanceof z.ZodError,
      compiled: compiled.success ? compiled.data : compiled.error.issues.length,
    };
  },
);
"#;

/// The zod kept as text answers inside the component exactly as zod does
/// natively in Node.
#[test]
fn zod_kept_as_text_answers_inside_the_component_as_in_node() {
    if let Some(why) = missing(&["node", "npm"]) {
        return skip("zod kept as text", &why);
    }
    let w = Weft::new();
    let dir = new(&w, "js", "zod-text");
    std::fs::write(dir.join("src/step.js"), ZOD_TEXT_STEP).unwrap();
    std::fs::remove_file(dir.join("src/step.test.js")).unwrap();
    let out = weft_in(&w, &dir, &["guest", "build"]);
    out.expect_code(0);
    let wasm = PathBuf::from(out.stdout.trim());
    // The build says how much of zod it kept out of the snapshot's code
    // (`bundled src/step.js (505 kB, 335 kB of it zod kept as text ...)`).
    let kept = out.stderr.split(" kB of it zod kept as text").next().and_then(|s| s.rsplit(", ").next());
    assert!(kept.and_then(|k| k.parse::<u32>().ok()).is_some_and(|k| k >= 100), "{}", out.stderr);
    let inputs = [
        json!({"lang": "de", "item": {"name": "", "qty": 1.5}}),
        json!({"lang": "fr", "item": {"name": "x", "qty": 2}}),
    ];
    for input in inputs {
        let native = Command::new("node")
            .args([
                "--input-type=module",
                "-e",
                "import s from './src/step.js'; process.stdout.write(JSON.stringify(s.callJson(JSON.parse(process.argv[1]))))",
            ])
            .arg(input.to_string())
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(native.status.success(), "node: {}", String::from_utf8_lossy(&native.stderr));
        let native: serde_json::Value = serde_json::from_slice(&native.stdout).unwrap();
        let out = w.step_run(&wasm, &input, &[]);
        out.expect_code(0);
        assert_eq!(out.json(), native, "inside the component vs in Node, for {input}\n{}", out.stderr);
    }
    // What was compared is zod's work, not two empty answers.
    let out = w.step_run(&wasm, &json!({"lang": "de", "item": {"name": "", "qty": 1.5}}), &[]);
    let got = out.json();
    assert_eq!(got["schema"]["properties"]["name"]["description"], "What it is", "{got}");
    assert_eq!(got["local"][0], "name: Zu klein: erwartet, dass string >=1 Zeichen hat", "{got}");
    assert_eq!((got["localIsZodError"].as_bool(), got["compiled"].as_i64()), (Some(true), Some(2)), "{got}");
    assert_eq!(got["back"].as_array().map(Vec::len), Some(2), "{got}");
}

/// The pinned JavaScript toolchain `weft guest build` installed: the cached
/// folder whose lock file is `guest-sdk/js/toolchain`'s.
fn js_toolchain() -> PathBuf {
    let lock = std::fs::read(repo_root().join("guest-sdk/js/toolchain/package-lock.json")).unwrap();
    let root = match (std::env::var_os("WEFT_TOOLCHAIN_DIR"), std::env::var_os("XDG_CACHE_HOME")) {
        (Some(dir), _) => PathBuf::from(dir),
        (None, Some(cache)) if !cache.is_empty() => PathBuf::from(cache).join("weft/toolchains"),
        _ => PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/weft/toolchains"),
    };
    std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|d| {
            d.join(".weft-ready").is_file() && std::fs::read(d.join("package-lock.json")).ok().as_ref() == Some(&lock)
        })
        .unwrap_or_else(|| panic!("no installed JavaScript toolchain in {}", root.display()))
}

/// The fuel one call of the component at `wasm` burns (deterministic).
fn fuel_per_call(wasm: &Path, input: &serde_json::Value) -> u64 {
    use weft_sandbox::{Invocation, Sandbox, SandboxConfig};
    // A metered engine from the start: one compile instead of two.
    let config = SandboxConfig { max_concurrent: 1, fuel_metering: true, ..SandboxConfig::default() };
    let sandbox = Sandbox::new(config, None).unwrap();
    let guest = sandbox.load(&std::fs::read(wasm).unwrap()).unwrap();
    let mut inv = Invocation::new(input.to_string());
    inv.limits.fuel = Some(u64::MAX / 4);
    let result = sandbox.invoke(&guest, &inv);
    assert!(result.outcome.is_ok(), "{}: {:?}", wasm.display(), result.outcome);
    result.fuel_used.expect("metered")
}

/// The SDK costs a JavaScript step nothing per call: the template's step
/// burns less fuel than the same step written by hand against the world
/// (`tests/data/hand-written-js`), built with the same componentize-js.
/// Fuel is deterministic, unlike time: the figure that can be compared in
/// a test. (The SDK's build warms up the realm componentize-js's bindings
/// call `run` from; without that it burnt ~1% more than by hand, and this
/// test fails.)
#[test]
fn a_javascript_sdk_step_burns_less_fuel_per_call_than_the_same_step_by_hand() {
    if let Some(why) = missing(&["node", "npm"]) {
        return skip("SDK against hand-written fuel", &why);
    }
    let w = Weft::new();
    let dir = new(&w, "js", "greet");
    let sdk = build(&w, &dir);

    let hand = w.dir.path().join("hand.wasm");
    let script = "
        import { readFileSync, writeFileSync } from 'node:fs';
        import { join } from 'node:path';
        import { pathToFileURL } from 'node:url';
        const [toolchain, sourcePath, witPath, out] = process.argv.slice(1);
        const dir = join(toolchain, 'node_modules/@bytecodealliance/componentize-js');
        const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
        const { componentize } = await import(pathToFileURL(join(dir, pkg.exports.import)).href);
        const { component } = await componentize({ sourcePath, witPath, worldName: 'step', disableFeatures: ['http', 'fetch-event'] });
        writeFileSync(out, component);
    ";
    let built = Command::new("node")
        .args(["--input-type=module", "-e", script])
        .arg(js_toolchain())
        .arg(repo_root().join("tests/data/hand-written-js/step.js"))
        .arg(repo_root().join("wit"))
        .arg(&hand)
        .output()
        .unwrap();
    assert!(built.status.success(), "componentize: {}", String::from_utf8_lossy(&built.stderr));

    // Both do the same work: the same greeting, and the same refusal.
    let input = json!({"name": "Ada", "times": 2});
    for wasm in [&sdk, &hand] {
        let out = w.step_run(wasm, &input, &[]);
        out.expect_code(0);
        assert_eq!(out.json(), json!({"greeting": "Hello, Ada! Hello, Ada!"}), "{}", wasm.display());
        let out = w.step_run(wasm, &json!({"name": "Ada", "times": 11}), &[]);
        out.expect_code(1);
        assert!(out.json()["message"].as_str().is_some_and(|m| m.contains("input.times")), "{}", out.stdout);
    }
    let (sdk_fuel, hand_fuel) = (fuel_per_call(&sdk, &input), fuel_per_call(&hand, &input));
    assert!(
        sdk_fuel < hand_fuel,
        "one call of the SDK-built step burnt {sdk_fuel} fuel, the hand-written one {hand_fuel}"
    );
    eprintln!("fuel per call: SDK {sdk_fuel}, by hand {hand_fuel}");
}
