//! The `weft` binary: argument parsing, terminal rendering and exit codes.
//! What it runs lives in `weft-runtime` (the pipeline, runners, the store
//! owner) and `weft-server` (`weft serve`); nothing imports this crate.

mod cli;

fn main() -> std::process::ExitCode {
    weft_runtime::process::small_pages();
    cli::main()
}
