//! A hostile component guest, written against the raw WIT bindings (not the
//! SDK) so the sandbox is tested independently of it. The input's `mode`
//! picks the misbehaviour; `fib`, `sieve` and `json` are honest workloads for
//! benchmarks (W2's kernels, shared with the bench's native baseline), and
//! `busy` computes for `n` ms.

// wit-bindgen's generated export glue passes every field as an argument.
#![allow(clippy::too_many_arguments)]

wit_bindgen::generate!({ path: "../../../wit", world: "weft:step/step" });

use serde_json::{Value, json};
use weft::step::host::{Level, artifact, log, progress, progress_data};

struct Hostile;

fn done(v: Value) -> Result<Outcome, StepError> {
    Ok(Outcome::Done(v.to_string()))
}

fn err(code: &str, message: String) -> Result<Outcome, StepError> {
    Err(StepError { code: code.into(), message, retryable: false })
}

/// memory.grow by `pages` (64 KiB each): the old size in pages, or
/// `usize::MAX` when memory cannot grow (always, outside wasm).
fn grow_memory(pages: usize) -> usize {
    #[cfg(target_arch = "wasm32")]
    return core::arch::wasm32::memory_grow(0, pages);
    #[cfg(not(target_arch = "wasm32"))]
    return {
        let _ = pages;
        usize::MAX
    };
}

fn recurse(n: u64) -> u64 {
    if n == 0 { 0 } else { 1 + recurse(std::hint::black_box(n - 1)) }
}

impl Guest for Hostile {
    fn describe() -> Metadata {
        Metadata {
            name: "hostile".into(),
            description: "misbehaves on request".into(),
            version: "0.1.0".into(),
            input_schema: Some(r#"{"type":"object","required":["mode"]}"#.into()),
            output_schema: None,
        }
    }

    fn run(ctx: Context, input: String) -> Result<Outcome, StepError> {
        let input: Value = match serde_json::from_str(&input) {
            Ok(v) => v,
            Err(e) => return err("invalid_input", e.to_string()),
        };
        let n = input["n"].as_u64().unwrap_or(10);
        match input["mode"].as_str().unwrap_or("") {
            "ok" => done(json!({"ok": true, "step": ctx.step, "attempt": ctx.attempt,
                                "key": ctx.idempotency_key, "echo": input["echo"]})),
            "fib" => done(json!(weft_test_kernels::fib(n))),
            "sieve" => done(json!(weft_test_kernels::sieve(n))),
            "json" => done(json!(weft_test_kernels::json(n))),
            // Two artifacts, a text and a binary one.
            "artifact" => {
                artifact("report.txt", "text/plain", format!("report of {}", ctx.step).as_bytes());
                artifact("data.bin", "application/octet-stream", &[0, 1, 2, 255]);
                done(json!({"artifacts": 2}))
            }
            // Blocks in a host call (a WASI sleep) for `n` seconds.
            "sleep" => {
                std::thread::sleep(std::time::Duration::from_secs(n));
                done(json!({"slept_s": n}))
            }
            // Computes for `n` ms of wall time (CPU-bound: the clock is
            // read once per million iterations), then returns the count.
            "busy" => {
                let start = std::time::Instant::now();
                let mut i: u64 = 0;
                while start.elapsed() < std::time::Duration::from_millis(n) {
                    for _ in 0..1_000_000 {
                        i = std::hint::black_box(i.wrapping_add(1));
                    }
                }
                done(json!({"iterations": i}))
            }
            "loop" => {
                let mut i: u64 = 0;
                loop {
                    i = std::hint::black_box(i.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "recurse" => done(json!(recurse(u64::MAX))),
            "big_output" => done(Value::String("a".repeat((n as usize) << 20))),
            "read_file" => match std::fs::read_to_string("/etc/passwd") {
                Ok(text) => done(json!({"read": text})),
                Err(e) => err("io", format!("cannot read /etc/passwd: {e}")),
            },
            "env" => done(json!({"env": std::env::vars().collect::<Vec<_>>()})),
            "socket" => {
                let addr = input["addr"].as_str().unwrap_or("127.0.0.1:9");
                match std::net::TcpStream::connect(addr) {
                    Ok(_) => done(json!({"connected": addr})),
                    Err(e) => err("net", format!("cannot connect to {addr}: {e}")),
                }
            }
            // Grows memory by `n` MiB and writes one byte in every 128 KiB
            // of it: pages scattered wider than one pass of the pooled
            // reset's scan. `stale` counts the bytes that were not zero
            // before the write, memory left over from an earlier invocation.
            "scribble" => {
                let mib = n as usize;
                let old = grow_memory(mib * 16);
                if old == usize::MAX {
                    return err("oom", format!("cannot grow memory by {mib} MiB"));
                }
                let mut stale = 0;
                for i in 0..mib * 8 {
                    let byte = (old * 65536 + i * 131072) as *mut u8;
                    // SAFETY: the page was just added to linear memory by
                    // memory.grow; nothing else uses it.
                    unsafe {
                        if byte.read_volatile() != 0 {
                            stale += 1;
                        }
                        byte.write_volatile(1);
                    }
                }
                done(json!({"stale": stale, "touched": mib * 8}))
            }
            "trap" => panic!("the hostile guest panics on purpose"),
            "invalid_json" => Ok(Outcome::Done("{this is not json".into())),
            // JSON nested `n` levels deep: [[[...1...]]].
            "deep" => Ok(Outcome::Done(format!("{}1{}", "[".repeat(n as usize), "]".repeat(n as usize)))),
            "reject" => Ok(Outcome::Reject("rejected on purpose".into())),
            "error" => Err(StepError { code: "flaky".into(), message: "try again".into(), retryable: true }),
            "log_flood" => {
                let line = "x".repeat(1000);
                for _ in 0..3000 {
                    log(Level::Info, &line);
                }
                progress("flooded");
                done(json!({"logged": 3000}))
            }
            // `n` status updates with data, 100 ms apart.
            "updates" => {
                for k in 1..=n {
                    progress_data(&format!("part {k} of {n}"), &json!({"done": k, "of": n}).to_string());
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                done(json!({"updates": n}))
            }
            other => err("invalid_input", format!("unknown mode `{other}`")),
        }
    }
}

export!(Hostile);
