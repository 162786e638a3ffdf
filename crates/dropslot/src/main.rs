//! The `dropslot` binary: the operator CLI (see `dropslot --help` and docs/operations.md).

fn main() -> std::process::ExitCode {
    dropslot::cli::main()
}
