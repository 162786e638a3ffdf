//! The `dropslot` binary: the operator CLI (see `dropslot --help` and docs/operations.md).

/// mimalloc instead of glibc's malloc: the request threads allocate and the `SQLite` writer
/// thread frees, and glibc's arenas took 15 % of the request threads' samples in a sync profile
/// (docs/performance.md, issue 13).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    dropslot::cli::main()
}
