//! The `dropslot` binary: the operator CLI (see `dropslot --help` and docs/operations.md).

/// mimalloc instead of glibc's malloc: the request threads allocate and the `SQLite` writer
/// thread frees, and glibc's arenas took 15 % of the request threads' samples in a sync profile
/// (docs/performance.md, "What bounds the SQLite writer"). Built without transparent huge pages
/// (`no_thp`): with them, every 2 MiB mimalloc touched counted whole, and the peak RSS of a load
/// run was 87 MB.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    dropslot::cli::main()
}
