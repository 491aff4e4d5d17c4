//! `scripts/beside-restate.sh`: weft served beside a real Restate 1.7.12
//! (its server and a service on its TypeScript SDK, from npm), three rounds
//! in the same minutes, each round's ratios printed, and Restate's journal
//! checked to hold every step of every completed call. A debug build's
//! figures mean nothing; what is asserted is that both sides ran and were
//! compared. Also: `--peer-restate` refused where it cannot apply.

use crate::common::{Weft, repo_root, weft_bin};

/// The number after `key` in a line of `k=v` fields.
fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        .parse()
        .unwrap_or_else(|e| panic!("{key} in {line}: {e}"))
}

#[test]
fn weft_and_restate_are_measured_round_by_round_and_restate_journaled_every_step() {
    let dir = tempfile::tempdir().unwrap();
    let json_file = dir.path().join("beside.json");
    let out = std::process::Command::new("bash")
        .arg(repo_root().join("scripts/beside-restate.sh"))
        .args(["--rounds", "1", "--json"])
        .arg(&json_file)
        .env("WEFT_BIN", weft_bin())
        .output()
        .expect("run scripts/beside-restate.sh");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the script failed:\n{stdout}\n{stderr}");

    let rounds: Vec<&str> = stdout.lines().filter(|l| l.starts_with("W9 beside restate round=")).collect();
    assert_eq!(rounds.len(), 3, "three rounds:\n{stdout}");
    for (i, line) in rounds.iter().enumerate() {
        let first = if i % 2 == 0 { "first=weft" } else { "first=restate" };
        assert!(line.contains(&format!("round={} {first}", i + 1)), "the order turns each round: {line}");
        for key in ["chain40_ratio=", "p50_ratio=", "throughput_ratio=", "server_cpu_ratio="] {
            let r = field(line, key);
            assert!(r.is_finite() && r > 0.0, "{key} in {line}");
        }
    }
    // Each round measured both sides, every figure of each.
    for via in ["mcp=http-2026-07-28", "restate=http"] {
        let lines: Vec<&str> = stdout.lines().filter(|l| l.starts_with("W9 served ") && l.contains(via)).collect();
        assert_eq!(lines.len(), 9, "three figures of {via} per round:\n{stdout}");
        for tput in lines.iter().filter(|l| l.contains("throughput")) {
            assert!(field(tput, "runs_per_s=") > 0.0 && field(tput, "server_cpu_us_per_run=") > 0.0, "{tput}");
        }
    }
    // Restate's own record: every completed call journaled its 40 or 3 steps.
    let checks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("# check restate ")).collect();
    assert_eq!(checks.len(), 2, "{stdout}");
    for c in checks {
        let (journaled, want) = (c.split(", ").nth(1).unwrap(), c.rsplit("want ").next().unwrap());
        assert_eq!(journaled.split(' ').next(), Some(want), "{c}");
    }
    let figures = std::fs::read_to_string(json_file).unwrap();
    assert!(figures.contains("\"beside\": \"restate\""), "{figures}");
}

#[test]
fn peer_restate_is_refused_where_it_cannot_apply() {
    let w = Weft::new();
    let out = w.run(&["bench", "w8", "--peer-restate", "http://127.0.0.1:8080"]);
    out.expect_code(2);
    assert!(out.stderr.contains("`--peer-restate` compares W9 only"), "{}", out.stderr);
    let out = w.run(&["bench", "w9", "--peer-restate", "127.0.0.1:8080"]);
    out.expect_code(2);
    assert!(out.stderr.contains("give Restate's ingress as an http:// URL"), "{}", out.stderr);
}
