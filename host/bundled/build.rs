//! Compile every plugin under `plugins/` to a wasm32-wasip2 component and
//! write `$OUT_DIR/bundled.rs`, the table that `include_bytes!`s them.

use std::path::Path;

fn main() {
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let plugins_dir = Path::new(&manifest_dir).join("../../plugins");
    println!("cargo:rerun-if-changed={}", plugins_dir.display());

    // A plugin is a folder `plugins/<name>/` with the package `weft-plugin-<name>`.
    let mut names: Vec<String> = std::fs::read_dir(&plugins_dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", plugins_dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            path.join("Cargo.toml").is_file().then(|| path.file_name()?.to_str().map(String::from))?
        })
        .collect();
    names.sort();
    let packages: Vec<String> = names.iter().map(|n| format!("weft-plugin-{n}")).collect();
    let package_refs: Vec<&str> = packages.iter().map(String::as_str).collect();

    let built = weft_guest_build::build_guests(&package_refs, "wasm32-wasip2");

    let mut table = String::from("static ALL: &[BundledPlugin] = &[\n");
    for (package, wasm) in &built {
        let name = package.strip_prefix("weft-plugin-").expect("a weft-plugin-* package");
        table += &format!(
            "    BundledPlugin {{ name: {name:?}, wasm: include_bytes!({:?}) }},\n",
            wasm.display().to_string()
        );
    }
    table += "];\n";
    let out = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("bundled.rs");
    std::fs::write(&out, table).expect("write bundled.rs");
}
