//! Giving freed heap memory back to the system after a crowd of connections has gone.
//!
//! Ten thousand sessions cost about 130 MiB of small allocations; when they close, glibc's
//! allocator keeps the freed pages in its arenas, so the process stays at its peak size, and
//! a few such crowds in a row leave it several times larger than what it uses. A worker whose
//! connections fall well below their peak asks the allocator to return what is free.

/// Connections a worker must have lost since its peak (and at least half of them) before it
/// trims: rare enough to cost nothing measurable, soon enough to matter.
pub(crate) const TRIM_AFTER_CLOSED: usize = 1024;

/// Returns free heap memory at the top of every arena to the system (`malloc_trim(0)`).
/// Takes the allocator's arena locks for a few milliseconds on a large heap: call it off the
/// workers (the blocking pool).
pub(crate) fn return_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: `malloc_trim` has no preconditions; it only walks glibc's own arenas under
    // their locks and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
