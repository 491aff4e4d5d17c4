//! The `weft` binary: parse arguments, run the command, exit with its code.

fn main() -> std::process::ExitCode {
    weft::small_pages();
    weft::cli::main()
}
