//! Compiles the guests the tests and benches run, from source, and writes
//! `$OUT_DIR/artifacts.rs` with one path constant per guest.

fn main() {
    let components = weft_guest_build::build_guests(&["weft-test-hostile", "weft-example-rust-guest"], "wasm32-wasip2");
    let commands = weft_guest_build::build_guests(&["weft-test-hostile-command"], "wasm32-wasip1");
    let mut out = String::new();
    for (package, path) in components.iter().chain(&commands) {
        let name = match package.as_str() {
            "weft-test-hostile" => "HOSTILE",
            "weft-example-rust-guest" => "EXAMPLE_RUST_GUEST",
            "weft-test-hostile-command" => "HOSTILE_COMMAND",
            other => panic!("unexpected guest package {other}"),
        };
        out += &format!(
            "/// Path of the compiled `{package}` guest.\npub const {name}: &str = {:?};\n",
            path.display().to_string()
        );
    }
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").unwrap()).join("artifacts.rs");
    std::fs::write(dest, out).unwrap();
}
