//! Secrets never reach the store, the output or the logs (docs/reliability.md,
//! promise 6): a `${VAR}` in a server's URL (query and `user:pass@`) and
//! headers, and one an upstream prints on stderr before it crashes. Their
//! values are grepped for in the SQLite file, `runs show --json`,
//! `weft tools list` and everything the commands printed.

use serde_json::json;

use crate::common::Weft;

const KEY: &str = "key-7c1e9b40d2";
const TOKEN: &str = "tok-5a8f3e61c9";
const PASS: &str = "pw-91d2e7b3a4";
const ENV_SECRET: &str = "env-2b6c0f8e17";

#[test]
fn secrets_are_redacted_everywhere() {
    let w = Weft::new();
    std::fs::write(
        w.dir.path().join("weft.toml"),
        format!(
            "[servers.crm]\nurl = \"http://ada:{PASS}@127.0.0.1:1/mcp?key=${{CRM_KEY}}\"\n\
             headers = {{ Authorization = \"Bearer ${{CRM_TOKEN}}\" }}\n\
             [servers.leaky]\ncommand = \"sh\"\nargs = [\"-c\", \"echo my secret is $SECRET_ENV >&2; exit 3\"]\n\
             env = {{ SECRET_ENV = \"${{LEAKY_SECRET}}\" }}\n"
        ),
    )
    .unwrap();
    let env = [("CRM_KEY", KEY), ("CRM_TOKEN", TOKEN), ("LEAKY_SECRET", ENV_SECRET)];
    let run = |args: &[&str]| {
        let mut cmd = w.cmd();
        cmd.args(args).envs(env);
        let out = cmd.output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
    };
    let mut printed = String::new();
    for server in ["crm", "leaky"] {
        let file = w.write_def(
            server,
            &json!({"name": server, "steps": [{"name": "call", "tool": {"server": server, "name": "anything"},
                "retry": {"max_attempts": 2, "initial_delay_ms": 10}}]}),
        );
        let (code, out) = run(&["run", file.to_str().unwrap(), "--json"]);
        assert_eq!(code, Some(1), "{out}");
        printed.push_str(&out);
    }
    assert!(printed.contains("${CRM_KEY}") || printed.contains("***"), "the error still says where: {printed}");
    assert!(printed.contains("my secret is ${LEAKY_SECRET}"), "the upstream's stderr is quoted, redacted: {printed}");
    let (_, out) = run(&["tools", "list"]);
    printed.push_str(&out);
    let (_, out) = run(&["runs", "list", "--json"]);
    for id in serde_json::from_str::<serde_json::Value>(&out).unwrap().as_array().unwrap() {
        let (_, shown) = run(&["runs", "show", id["id"].as_str().unwrap(), "--json"]);
        printed.push_str(&shown);
        let (_, events) = run(&["runs", "events", id["id"].as_str().unwrap()]);
        printed.push_str(&events);
    }
    let db = std::fs::read(w.data_dir().join("weft.db")).unwrap();
    let wal = std::fs::read(w.data_dir().join("weft.db-wal")).unwrap_or_default();
    for secret in [KEY, TOKEN, PASS, ENV_SECRET] {
        assert!(!printed.contains(secret), "`{secret}` was printed:\n{printed}");
        for (what, bytes) in [("weft.db", &db), ("weft.db-wal", &wal)] {
            assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "`{secret}` is in {what}");
        }
    }
}
