//! The `weft` binary: argument parsing, terminal rendering and exit codes.
//! What it runs lives in `weft-runtime` (the pipeline, runners, the store
//! owner) and `weft-server` (`weft serve`); nothing imports this crate.

// The CLI's doc comments are its `--help` text, written for a terminal:
// `[limits] fuel` names a weft.toml section, not a Rust item.
#![allow(rustdoc::broken_intra_doc_links)]

mod cli;

fn main() -> std::process::ExitCode {
    weft_runtime::process::small_pages();
    cli::main()
}
