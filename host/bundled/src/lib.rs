//! The ready-made plugins of `plugins/` (jq, json-select, text-template,
//! regex-extract, json-validate, csv-to-json...), compiled to wasm32-wasip2
//! components when this crate is built and embedded in it, so weft offers
//! them without any set-up.
//!
//! The build script compiles every `plugins/<name>` crate (package
//! `weft-plugin-<name>`) with the workspace's `guest` profile through
//! `weft-guest-build`; a new plugin folder is picked up automatically.
//!
//! ```
//! let select = weft_bundled::get("json-select").expect("bundled");
//! assert_eq!(&select.wasm[..4], b"\0asm");
//! ```

/// A plugin embedded in the binary.
#[derive(Debug, Clone, Copy)]
pub struct BundledPlugin {
    /// The plugin's name, the folder under `plugins/` (e.g. `json-select`),
    /// which is also the name its `describe` reports.
    pub name: &'static str,
    /// The WebAssembly component (targets the `step` world).
    pub wasm: &'static [u8],
}

include!(concat!(env!("OUT_DIR"), "/bundled.rs"));

/// Every bundled plugin, sorted by name.
pub fn all() -> &'static [BundledPlugin] {
    ALL
}

/// The bundled plugin called `name`, if any.
pub fn get(name: &str) -> Option<&'static BundledPlugin> {
    ALL.iter().find(|p| p.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_plugin_is_a_non_empty_component() {
        assert!(all().len() >= 5, "{:?}", all().iter().map(|p| p.name).collect::<Vec<_>>());
        for p in all() {
            assert!(p.wasm.len() > 1000, "{} is {} bytes", p.name, p.wasm.len());
            assert_eq!(&p.wasm[..4], b"\0asm", "{}", p.name);
            assert_eq!(&p.wasm[4..8], &[0x0d, 0x00, 0x01, 0x00], "{} is not a component", p.name);
        }
    }

    #[test]
    fn get_finds_by_name_and_names_are_sorted() {
        for name in ["json-select", "text-template", "regex-extract", "json-validate", "csv-to-json", "jq"] {
            assert_eq!(get(name).map(|p| p.name), Some(name));
        }
        assert!(get("nope").is_none());
        assert!(all().windows(2).all(|w| w[0].name < w[1].name));
    }
}
