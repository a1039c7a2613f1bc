//! The `cairn` binary: the command line the library `cairn_cli` holds.

fn main() -> std::process::ExitCode {
    cairn_cli::main()
}
