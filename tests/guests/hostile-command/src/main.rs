//! A hostile WASI-command guest: reads `{"mode": ...}` on stdin.

use std::io::{Read, Write};

use serde_json::{Value, json};

fn main() {
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text).expect("stdin");
    let input: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    let mut out = std::io::stdout().lock();
    match input["mode"].as_str().unwrap_or("") {
        "ok" => {
            eprintln!("hello from the command guest");
            let env: Vec<(String, String)> = std::env::vars().collect();
            writeln!(out, "{}", json!({"echo": input["echo"], "env": env})).unwrap();
        }
        "flood" => {
            // 100 MB in 64 KiB writes.
            let chunk = vec![b'a'; 64 * 1024];
            for _ in 0..1600 {
                if out.write_all(&chunk).is_err() {
                    break;
                }
            }
        }
        "read_file" => match std::fs::read_to_string("/etc/passwd") {
            Ok(t) => writeln!(out, "{}", json!({"read": t})).unwrap(),
            Err(e) => {
                eprintln!("cannot read /etc/passwd: {e}");
                std::process::exit(4);
            }
        },
        "sleep" => {
            // Blocks in a host call (WASI poll_oneoff) for `n` seconds.
            let n = input["n"].as_u64().unwrap_or(3600);
            std::thread::sleep(std::time::Duration::from_secs(n));
            writeln!(out, "{}", json!({"slept_s": n})).unwrap();
        }
        "flaky" => {
            // Fails its first attempt (a retry policy retries an exit 1).
            if std::env::var("WEFT_ATTEMPT").as_deref() == Ok("1") {
                eprintln!("flaking on attempt 1");
                std::process::exit(1);
            }
            writeln!(out, "{}", json!({"attempt": std::env::var("WEFT_ATTEMPT").unwrap_or_default()})).unwrap();
        }
        "permanent" => {
            eprintln!("this input can never work");
            std::process::exit(65);
        }
        "exit" => {
            eprintln!("failing on purpose");
            std::process::exit(7);
        }
        _ => {
            eprintln!("unknown mode");
            std::process::exit(2);
        }
    }
}
