//! The README's "Write a code step in Rust" section, done as a new user
//! would: the crate is written from the README's own code blocks, built for
//! wasm32-wasip2 with cargo, and run with `weft step run`.

use std::process::Command;

use serde_json::json;

use crate::common::{Weft, repo_root};

/// The fenced block that follows `<!-- quickstart:NAME -->`.
fn block(readme: &str, name: &str) -> String {
    let marker = format!("<!-- quickstart:{name} -->");
    let after = readme.split_once(&marker).unwrap_or_else(|| panic!("README lacks {marker}")).1;
    let fence_start = after.find("```").expect("a code block after the marker");
    let body = &after[fence_start..];
    let body = &body[body.find('\n').expect("fence line") + 1..];
    body[..body.find("```").expect("closing fence")].to_string()
}

#[test]
fn the_readme_quick_start_builds_and_runs() {
    let root = repo_root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let w = Weft::new();
    // The README puts the crate next to a checkout called `weft/`.
    let base = w.dir.path();
    std::os::unix::fs::symlink(&root, base.join("weft")).unwrap();
    let krate = base.join("greet");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::write(krate.join("Cargo.toml"), block(&readme, "Cargo.toml")).unwrap();
    std::fs::write(krate.join("src/lib.rs"), block(&readme, "src/lib.rs")).unwrap();
    // Same toolchain and (where they apply) the same dependency versions as
    // the repository, so the build is reproducible and mostly cached.
    std::fs::copy(root.join("rust-toolchain.toml"), krate.join("rust-toolchain.toml")).unwrap();
    std::fs::copy(root.join("Cargo.lock"), krate.join("Cargo.lock")).unwrap();

    let target_dir = root.join("target/guest-projects");
    let status = Command::new("cargo")
        .args(["build", "--release", "--target", "wasm32-wasip2"])
        .current_dir(&krate)
        .env("CARGO_TARGET_DIR", &target_dir)
        .env_remove("RUSTUP_TOOLCHAIN")
        .env_remove("CARGO")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "the README's crate must build");
    let wasm = target_dir.join("wasm32-wasip2/release/greet.wasm");

    let out = w.step_run(&wasm, &json!({"name": "Ada"}), &[]);
    out.expect_code(0);
    assert_eq!(out.json(), json!({"greeting": "Hello, Ada!"}));
    assert!(out.stderr.contains("greeting Ada (attempt 1)"), "{}", out.stderr);

    let out = w.step_run(&wasm, &json!({"name": ""}), &[]);
    out.expect_code(1);
    assert_eq!(out.json()["kind"], "guest_error");

    let out = w.run(&["plugin", "add", wasm.to_str().unwrap()]);
    out.expect_code(0);
    let out = w.run(&["plugin", "inspect", "greet"]);
    out.expect_code(0);
    let v = out.json();
    assert_eq!(v["input_schema"]["required"], json!(["name"]));
    assert_eq!(v["description"], "Greet someone by name");
    let out = w.run(&["step", "run", "greet", "--input", r#"{"name": "Bo"}"#]);
    out.expect_code(0);
    assert_eq!(out.json()["greeting"], "Hello, Bo!");
}
