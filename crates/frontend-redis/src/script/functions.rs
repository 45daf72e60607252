//! Redis 7.0 functions: the libraries `FUNCTION LOAD` makes and what `FCALL` runs of them
//! ([`super::function_command`] answers the commands).
//!
//! - `FUNCTION LOAD` runs the library's code once in a fresh, bounded Lua state of its own
//!   (only `redis.register_function` and the table, string and math libraries; a memory and
//!   an instruction bound), on a blocking thread, to learn its functions and their flags,
//!   as Redis does.
//! - `FCALL` is a script run: the library's one script is its code, run with a read-only
//!   `redis` whose `register_function` collects the callbacks, then the call of the one
//!   `FCALL` names with its keys and arguments.
//! - Libraries are kept in `redis_function` (one row each: name, code, functions), so they
//!   outlive a restart and every manifold on the door's tables has the same. A change
//!   (`LOAD`, `DELETE`, `FLUSH`) locks and bumps `functions_version` in `redis_meta`, reads
//!   the table, checks and writes in one transaction, so changes through several
//!   manifolds apply one at a time. Each manifold keeps the libraries in memory and reads
//!   them again when the version moved: every [`REFRESH`], before `FUNCTION LIST|STATS`,
//!   and before an `FCALL` of a function it does not know.
//! - Bounds: [`LIBRARIES_MAX`] libraries, [`CODE_MAX`] bytes of code each and
//!   [`ALL_CODE_MAX`] in all, `FUNCTION RESTORE`'s too.
//! - `FUNCTION DUMP|RESTORE`'s payload is redis-server's ([`crate::cmd::keys::rdb`]):
//!   each library's code goes through `FUNCTION LOAD`'s checks ([`restored`]), then the
//!   whole payload is one change ([`Change::Restore`]), kept or refused whole.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use manifold_backend::Param;

use crate::store::{bytes, StoreError, Tx, TxHost};

pub use super::function_load::{checked_name, register};

/// Most libraries one manifold keeps.
pub const LIBRARIES_MAX: usize = 1000;
/// Most bytes of one library's code (Redis's `proto-max-bulk-len` is larger; a library is
/// run on every `FCALL` here, so it is kept small).
pub const CODE_MAX: usize = 1 << 20;
/// How often each manifold reads the libraries' version, to learn another's changes.
pub const REFRESH: std::time::Duration = std::time::Duration::from_secs(1);
/// Most bytes of all libraries' code: every manifold keeps them all in memory.
pub const ALL_CODE_MAX: usize = 64 << 20;
/// Longest library name (`redis_function.name`).
pub const NAME_MAX: usize = 255;
pub const HELP: &[&str] = &[
    "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
    "HELP",
    "    Prints this help.",
];

/// A registered function.
#[derive(Debug, Clone)]
pub struct Function {
    pub name: String,
    pub no_writes: bool,
}

/// A loaded library.
#[derive(Debug)]
pub struct Library {
    pub code: Arc<Vec<u8>>,
    pub functions: Vec<Function>,
    /// The script every `FCALL` of its functions runs ([`wrapper`]) and its SHA1, made
    /// once, so a call neither copies nor hashes the library.
    script: Arc<Vec<u8>>,
    sha: String,
    /// The SHA1 of `code` (`redis_function.code_sha`): a library whose hash did not move
    /// is not read again.
    code_sha: String,
}

impl Library {
    fn new(code: Vec<u8>, functions: Vec<Function>) -> Self {
        let script = wrapper(&code);
        Self {
            sha: super::lua::sha1hex(&script),
            code_sha: super::lua::sha1hex(&code),
            script: Arc::new(script),
            code: Arc::new(code),
            functions,
        }
    }
}

/// What `FCALL` runs for a function.
#[derive(Debug)]
pub struct Found {
    pub script: Arc<Vec<u8>>,
    pub sha: String,
    pub no_writes: bool,
}

/// The libraries, by name.
pub type Map = BTreeMap<String, Arc<Library>>;

/// The libraries as this manifold last read or wrote them in `redis_function`.
#[derive(Debug, Default)]
pub struct Libraries {
    loaded: Mutex<Loaded>,
}

#[derive(Debug, Default, Clone)]
struct Loaded {
    /// The `functions_version` of `redis_meta` they are at (`None`: never read).
    version: Option<i64>,
    libs: Map,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What `FUNCTION LOAD|DELETE|FLUSH` does to the libraries.
#[derive(Debug)]
pub enum Change {
    /// A library's code and the functions it registered (`replace`: it may exist).
    Load {
        name: String,
        code: Vec<u8>,
        functions: Vec<Function>,
        replace: bool,
    },
    Delete(Vec<u8>),
    Flush,
    /// `FUNCTION RESTORE`'s libraries ([`restored`]), with its policy.
    Restore {
        libraries: Vec<Restored>,
        policy: Policy,
    },
}

/// `FUNCTION RESTORE`'s policy toward the libraries loaded already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Refused if a library exists already (the default).
    Append,
    /// A library of the same name is replaced.
    Replace,
    /// All are deleted first.
    Flush,
}

/// A library of a `FUNCTION RESTORE` payload, checked and run as `FUNCTION LOAD` does.
#[derive(Debug)]
pub struct Restored {
    pub name: String,
    pub code: Vec<u8>,
    pub functions: Vec<Function>,
}

/// The libraries of a `FUNCTION DUMP` payload, each checked ([`checked_name`]) and run
/// ([`register`]) as `FUNCTION LOAD` does, in the payload's order, as Redis loads them
/// into a context of their own (`functionsCreateWithLibraryCtx`): a name twice or a
/// function in two of them is refused. `Err`: the reply's text. Runs Lua: call it off
/// the async threads.
pub fn restored(payload: &[u8]) -> Result<Vec<Restored>, String> {
    let codes = crate::cmd::keys::rdb::function_codes(payload, LIBRARIES_MAX, ALL_CODE_MAX as u64)?;
    let mut libraries: Vec<Restored> = Vec::with_capacity(codes.len());
    for code in codes {
        let name = checked_name(&code)?;
        if libraries.iter().any(|l| l.name == name) {
            return Err(format!("Library '{name}' already exists"));
        }
        let functions = register(&code)?;
        let all = || libraries.iter().flat_map(|l| &l.functions);
        if let Some(f) = functions.iter().find(|f| all().any(|g| g.name == f.name)) {
            return Err(format!("Function {} already exists", f.name));
        }
        libraries.push(Restored {
            name,
            code,
            functions,
        });
    }
    Ok(libraries)
}

/// The bounds on all the libraries ([`LIBRARIES_MAX`], [`ALL_CODE_MAX`]) after a change.
fn bounded(libs: &Map) -> Result<(), String> {
    if libs.len() > LIBRARIES_MAX {
        return Err(format!(
            "manifold: at most {LIBRARIES_MAX} libraries are loaded"
        ));
    }
    if libs.values().map(|l| l.code.len()).sum::<usize>() > ALL_CODE_MAX {
        return Err(format!(
            "manifold: the libraries' code is at most {ALL_CODE_MAX} bytes in all"
        ));
    }
    Ok(())
}

/// The version of the libraries: bumped (and its row locked) by every change, read by
/// every manifold to learn another's.
const VERSION: &str = "SELECT value FROM {s}.redis_meta WHERE name = 'functions_version'";
const BUMP: &str = "INSERT INTO {s}.redis_meta (name, value) VALUES ('functions_version', 1) \
                    ON DUPLICATE KEY UPDATE value = value + 1";
// The code's hash as the server computes it, not the `code_sha` column: a row whose code
// was edited by hand is read again whatever its `code_sha`.
const READ_ALL: &str = "SELECT name, SHA1(code), functions FROM {s}.redis_function";
const READ_CODE: &str = "SELECT code FROM {s}.redis_function WHERE name = ?";
const UPSERT: &str = "INSERT INTO {s}.redis_function (name, code, code_sha, functions) \
                      VALUES (?, ?, ?, ?) ON DUPLICATE KEY UPDATE code = ?, code_sha = ?, functions = ?";
const DELETE: &str = "DELETE FROM {s}.redis_function WHERE name = ?";
const DELETE_ALL: &str = "DELETE FROM {s}.redis_function";

/// A library's functions as `redis_function.functions` keeps them.
fn functions_text(functions: &[Function]) -> String {
    let mut text = String::new();
    for f in functions {
        text.push_str(&f.name);
        if f.no_writes {
            text.push_str(" no-writes");
        }
        text.push('\n');
    }
    text
}

/// Every library of `redis_function`, those `known` (by name and code hash) kept as they
/// are: only a library whose code changed is read whole and made again.
///
/// The code is the truth, as in Redis (which runs each library's code again when it loads
/// them): a library read again is checked and run as `FUNCTION LOAD` does
/// ([`from_row`]), its functions being those the code registers. A row edited by hand
/// whose code does not load, or declares another name, is left out (with a warning),
/// as is one registering a function an earlier library (in name order) has: every
/// manifold reading the table leaves out the same.
async fn read_all(tx: &mut Tx<'_>, known: &Map) -> Result<Map, StoreError> {
    let mut libs = Map::new();
    let mut unknown = Vec::new();
    for row in tx.rows(READ_ALL, &[]).await? {
        let column = |i: usize| row.get(i).and_then(bytes).unwrap_or_default();
        let (name, code_sha, text) = (column(0), column(1), column(2));
        let name = String::from_utf8_lossy(&name).into_owned();
        let code_sha = String::from_utf8_lossy(&code_sha).into_owned();
        if let Some(lib) = known.get(&name).filter(|l| l.code_sha == code_sha) {
            libs.insert(name, lib.clone());
            continue;
        }
        let code = tx
            .rows(READ_CODE, &[Param::Bytes(name.as_bytes())])
            .await?
            .first()
            .and_then(|r| r.first().and_then(bytes))
            .unwrap_or_default();
        unknown.push((name, code, String::from_utf8_lossy(&text).into_owned()));
    }
    if !unknown.is_empty() {
        // Lua runs off the async threads.
        let made = tokio::task::spawn_blocking(move || {
            unknown
                .into_iter()
                .filter_map(|(name, code, text)| from_row(&name, code, &text).map(|l| (name, l)))
                .collect::<Vec<_>>()
        })
        .await
        .unwrap_or_default();
        libs.extend(made.into_iter().map(|(name, lib)| (name, Arc::new(lib))));
    }
    let mut taken = std::collections::HashSet::new();
    libs.retain(|name, lib| {
        if let Some(f) = lib.functions.iter().find(|f| taken.contains(&f.name)) {
            tracing::warn!(
                target: "manifold::redis",
                library = %name,
                function = %f.name,
                "a library of redis_function registers a function another has; it is left out"
            );
            return false;
        }
        taken.extend(lib.functions.iter().map(|f| f.name.clone()));
        true
    });
    Ok(libs)
}

/// The library a row of `redis_function` holds, its code checked and run as `FUNCTION
/// LOAD` does; `None` (with a warning) when the code does not load or declares another
/// name. A `functions` column that is not what the code registers is warned of, and the
/// code's functions are kept.
fn from_row(name: &str, code: Vec<u8>, text: &str) -> Option<Library> {
    let warn = |why: &str| {
        tracing::warn!(
            target: "manifold::redis",
            library = %name,
            "a row of redis_function does not hold a library that loads ({why}); it is left out"
        );
    };
    match checked_name(&code) {
        Ok(declared) if declared == name => {}
        Ok(declared) => {
            warn(&format!("its code declares library '{declared}'"));
            return None;
        }
        Err(why) => {
            warn(&why);
            return None;
        }
    }
    let functions = match register(&code) {
        Ok(functions) => functions,
        Err(why) => {
            warn(&why);
            return None;
        }
    };
    if functions_text(&functions) != text {
        tracing::warn!(
            target: "manifold::redis",
            library = %name,
            "the functions column of a redis_function row is not what its code registers; \
             the code's functions are served"
        );
    }
    Some(Library::new(code, functions))
}

/// Applies `change` to `libs`: the reply's text (a loaded library's name) or Redis's error.
fn apply(libs: &mut Map, change: Change) -> Result<Option<String>, String> {
    match change {
        Change::Load {
            name,
            code,
            functions,
            replace,
        } => {
            if !replace && libs.contains_key(&name) {
                return Err(format!("Library '{name}' already exists"));
            }
            for (other, lib) in libs.iter() {
                if *other == name {
                    continue;
                }
                if let Some(f) = functions
                    .iter()
                    .find(|f| lib.functions.iter().any(|g| g.name == f.name))
                {
                    return Err(format!("Function {} already exists", f.name));
                }
            }
            let others: usize = libs
                .iter()
                .filter(|(n, _)| **n != name)
                .map(|(_, l)| l.code.len())
                .sum();
            if others + code.len() > ALL_CODE_MAX {
                return Err(format!(
                    "manifold: the libraries' code is at most {ALL_CODE_MAX} bytes in all"
                ));
            }
            if !libs.contains_key(&name) && libs.len() >= LIBRARIES_MAX {
                return Err(format!(
                    "manifold: at most {LIBRARIES_MAX} libraries are loaded"
                ));
            }
            libs.insert(name.clone(), Arc::new(Library::new(code, functions)));
            Ok(Some(name))
        }
        Change::Delete(name) => {
            let name = String::from_utf8_lossy(&name);
            match libs.remove(&*name) {
                Some(_) => Ok(None),
                None => Err("Library not found".into()),
            }
        }
        Change::Flush => {
            libs.clear();
            Ok(None)
        }
        Change::Restore { libraries, policy } => {
            // `functionRestoreCommand`: FLUSH swaps the libraries for the payload's; the
            // others join them (`libraryJoin`), each check before any change.
            if policy == Policy::Flush {
                libs.clear();
            }
            for lib in &libraries {
                if policy == Policy::Append && libs.contains_key(&lib.name) {
                    return Err(format!("Library {} already exists", lib.name));
                }
            }
            for (other, lib) in libs.iter() {
                if libraries.iter().any(|l| l.name == *other) {
                    continue;
                }
                let mut new = libraries.iter().flat_map(|l| &l.functions);
                if let Some(f) = new.find(|f| lib.functions.iter().any(|g| g.name == f.name)) {
                    return Err(format!("Function {} already exists", f.name));
                }
            }
            let mut joined = libs.clone();
            for lib in libraries {
                joined.insert(lib.name, Arc::new(Library::new(lib.code, lib.functions)));
            }
            bounded(&joined)?;
            *libs = joined;
            Ok(None)
        }
    }
}

impl Libraries {
    /// Reads the libraries from `tx` when another manifold (or a restart) changed them
    /// since this one last did.
    pub async fn refresh(&self, tx: &mut Tx<'_>) -> Result<(), StoreError> {
        let version = tx.int(VERSION, &[]).await?.unwrap_or(0);
        let newer = |loaded: &Loaded| loaded.version.is_none_or(|v| v < version);
        let known = {
            let loaded = lock(&self.loaded);
            if !newer(&loaded) {
                // Not newer than what this manifold has (a snapshot older than a change
                // it installed since): nothing to learn.
                return Ok(());
            }
            loaded.libs.clone()
        };
        // The libraries as of `version` at least (a later change read here is read again
        // under its own version).
        let libs = read_all(tx, &known).await?;
        let mut loaded = lock(&self.loaded);
        if newer(&loaded) {
            *loaded = Loaded {
                version: Some(version),
                libs,
            };
        }
        Ok(())
    }

    /// Makes `change` in `tx` (which must then commit, and [`Self::install`] what it
    /// answers): the libraries' version row is locked and bumped first, so changes from
    /// every manifold apply one at a time, each to the table as the one before left it.
    /// `Ok(Err)`: Redis's error text (`tx` wrote nothing the caller must keep).
    pub async fn change(
        &self,
        tx: &mut Tx<'_>,
        change: Change,
    ) -> Result<Result<(Installable, Option<String>), String>, StoreError> {
        tx.exec(BUMP, &[]).await?;
        let version = tx.int(VERSION, &[]).await?.unwrap_or(0);
        let known = lock(&self.loaded).libs.clone();
        let mut libs = read_all(tx, &known).await?;
        // The rows the change writes (and whether it deletes all first), named before
        // `apply` takes the change.
        let (delete_all, rows) = match &change {
            Change::Load { name, .. } => (false, vec![name.as_bytes().to_vec()]),
            Change::Delete(name) => (false, vec![name.clone()]),
            Change::Flush => (true, Vec::new()),
            Change::Restore { libraries, policy } => (
                *policy == Policy::Flush,
                libraries
                    .iter()
                    .map(|l| l.name.as_bytes().to_vec())
                    .collect(),
            ),
        };
        let reply = match apply(&mut libs, change) {
            Ok(reply) => reply,
            Err(text) => return Ok(Err(text)),
        };
        if delete_all {
            tx.exec(DELETE_ALL, &[]).await?;
        }
        for name in rows {
            match std::str::from_utf8(&name).ok().and_then(|n| libs.get(n)) {
                Some(lib) => {
                    let text = functions_text(&lib.functions);
                    let (code, sha) = (&lib.code[..], lib.code_sha.as_bytes());
                    let params = [
                        Param::Bytes(&name),
                        Param::Bytes(code),
                        Param::Bytes(sha),
                        Param::Bytes(text.as_bytes()),
                        Param::Bytes(code),
                        Param::Bytes(sha),
                        Param::Bytes(text.as_bytes()),
                    ];
                    tx.exec(UPSERT, &params).await?
                }
                None => tx.exec(DELETE, &[Param::Bytes(&name)]).await?,
            };
        }
        Ok(Ok((
            Installable(Loaded {
                version: Some(version),
                libs,
            }),
            reply,
        )))
    }

    /// Keeps a committed change's libraries, unless a later change was kept already.
    pub fn install(&self, change: Installable) {
        let mut loaded = lock(&self.loaded);
        if loaded
            .version
            .is_none_or(|v| v < change.0.version.unwrap_or(0))
        {
            *loaded = change.0;
        }
    }

    /// Whether a library of that name is loaded (as this manifold last knew).
    pub fn has(&self, name: &str) -> bool {
        lock(&self.loaded).libs.contains_key(name)
    }

    /// Whether function `name` is loaded (as this manifold last knew).
    pub fn has_function(&self, name: &[u8]) -> bool {
        let loaded = lock(&self.loaded);
        let mut all = loaded.libs.values().flat_map(|lib| &lib.functions);
        all.any(|f| f.name.as_bytes() == name)
    }

    /// What `FCALL` runs for function `name`.
    pub fn find(&self, name: &[u8]) -> Option<Found> {
        let loaded = lock(&self.loaded);
        loaded.libs.values().find_map(|lib| {
            let f = lib.functions.iter().find(|f| f.name.as_bytes() == name)?;
            Some(Found {
                script: lib.script.clone(),
                sha: lib.sha.clone(),
                no_writes: f.no_writes,
            })
        })
    }

    /// Libraries and functions counts.
    pub fn counts(&self) -> (usize, usize) {
        let loaded = lock(&self.loaded);
        let functions = loaded.libs.values().map(|l| l.functions.len()).sum();
        (loaded.libs.len(), functions)
    }

    /// The libraries whose name matches `pattern`, in any case (Redis's `FUNCTION LIST`
    /// matches with `nocase`).
    pub fn list(&self, pattern: Option<&[u8]>) -> Vec<(String, Arc<Library>)> {
        let glob = pattern.map(|p| crate::cmd::glob::Glob::new(p, true));
        lock(&self.loaded)
            .libs
            .iter()
            .filter(|(n, _)| glob.as_ref().is_none_or(|g| g.matches(n.as_bytes())))
            .map(|(n, l)| (n.clone(), l.clone()))
            .collect()
    }
}

/// [`Libraries::refresh`] as manifold's own login (the expiry sweeper's), once the door's
/// tables exist: run every [`REFRESH`] on worker 0, so a library replaced or deleted
/// through another manifold stops running here within about that.
pub async fn refresh_as_own(libs: &Libraries, worker: &dyn TxHost) -> Result<(), StoreError> {
    let Some(login) = worker.store().sweep_login() else {
        return Ok(());
    };
    let mut tx = Tx::new(worker, login, false);
    libs.refresh(&mut tx).await?;
    tx.commit().await
}

/// A committed change's libraries, for [`Libraries::install`].
#[derive(Debug)]
pub struct Installable(Loaded);

/// The script `FCALL` runs for a library: its code, then the call of the function its first
/// argument names (`FCALL` puts it there). It is run with the `redis` its code sees (the
/// scripts' with `register_function`, read-only) and the table that collects the callbacks
/// (see `prelude.lua`), taken on its first line (the shebang's, so lines keep their
/// numbers).
fn wrapper(code: &[u8]) -> Vec<u8> {
    let end = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
    let mut w = Vec::with_capacity(code.len() + 120);
    w.extend_from_slice(b"local redis, __fns = ... ");
    // The body runs as a function of its own, so a last `return` (which Redis ignores)
    // still lets the call follow.
    w.extend_from_slice(b"; (function() ");
    w.extend_from_slice(&code[end..]);
    w.extend_from_slice(b"\nend)() return __fns[table.remove(ARGV, 1)](KEYS, ARGV)\n");
    w
}

#[cfg(test)]
mod restore_tests {
    use super::*;

    fn lib(name: &str, functions: &[&str]) -> Restored {
        let code = format!("#!lua name={name}\n").into_bytes();
        let functions = functions
            .iter()
            .map(|f| Function {
                name: f.to_string(),
                no_writes: false,
            })
            .collect();
        Restored {
            name: name.into(),
            code,
            functions,
        }
    }

    fn loaded(libs: &[Restored]) -> Map {
        let mut map = Map::new();
        for l in libs {
            map.insert(
                l.name.clone(),
                Arc::new(Library::new(l.code.clone(), l.functions.clone())),
            );
        }
        map
    }

    fn restore(libs: &mut Map, libraries: Vec<Restored>, policy: Policy) -> Result<(), String> {
        apply(libs, Change::Restore { libraries, policy }).map(|_| ())
    }

    fn names(libs: &Map) -> Vec<&str> {
        libs.keys().map(String::as_str).collect()
    }

    #[test]
    fn restore_policies_are_redis_and_all_or_nothing() {
        let mut libs = loaded(&[lib("a", &["fa"]), lib("b", &["fb"])]);
        // APPEND: an existing library refuses the whole payload.
        let err = restore(
            &mut libs,
            vec![lib("c", &["fc"]), lib("a", &["fa2"])],
            Policy::Append,
        );
        assert_eq!(err, Err("Library a already exists".into()));
        assert_eq!(names(&libs), ["a", "b"]);
        // A function of a library not replaced: refused, even with REPLACE.
        let err = restore(&mut libs, vec![lib("a", &["fb"])], Policy::Replace);
        assert_eq!(err, Err("Function fb already exists".into()));
        assert_eq!(libs["a"].functions[0].name, "fa");
        // REPLACE: the replaced library's own functions may be taken again.
        restore(
            &mut libs,
            vec![lib("a", &["fa", "fz"]), lib("c", &["fc"])],
            Policy::Replace,
        )
        .unwrap();
        assert_eq!(names(&libs), ["a", "b", "c"]);
        assert_eq!(libs["a"].functions.len(), 2);
        // FLUSH: only the payload's, whatever was there.
        restore(&mut libs, vec![lib("d", &["fb"])], Policy::Flush).unwrap();
        assert_eq!(names(&libs), ["d"]);
        restore(&mut libs, Vec::new(), Policy::Flush).unwrap();
        assert!(libs.is_empty());
    }

    #[test]
    fn restore_keeps_the_libraries_bounds() {
        let many: Vec<Restored> = (0..LIBRARIES_MAX)
            .map(|i| lib(&format!("l{i}"), &[&format!("f{i}")]))
            .collect();
        let mut libs = loaded(&many);
        let err = restore(&mut libs, vec![lib("one_more", &["g"])], Policy::Append);
        assert_eq!(
            err,
            Err(format!(
                "manifold: at most {LIBRARIES_MAX} libraries are loaded"
            ))
        );
        assert_eq!(libs.len(), LIBRARIES_MAX);
        // Replacing one of them is within the bound.
        restore(&mut libs, vec![lib("l0", &["g"])], Policy::Replace).unwrap();
        // The code in all.
        let mut big = lib("big", &["big_f"]);
        big.code = vec![b'-'; ALL_CODE_MAX];
        let mut libs = loaded(&[lib("a", &["fa"])]);
        let err = restore(&mut libs, vec![big], Policy::Append);
        assert_eq!(
            err,
            Err(format!(
                "manifold: the libraries' code is at most {ALL_CODE_MAX} bytes in all"
            ))
        );
        assert_eq!(names(&libs), ["a"]);
    }

    #[test]
    fn a_payloads_libraries_pass_function_loads_checks() {
        let payload = |codes: &[&str]| {
            crate::cmd::keys::rdb::functions_payload(codes.iter().map(|c| c.as_bytes()))
        };
        let good = "#!lua name=ok\nredis.register_function('okf', function() return 1 end)";
        let got = restored(&payload(&[good])).unwrap();
        assert_eq!(
            (got[0].name.as_str(), got[0].functions[0].name.as_str()),
            ("ok", "okf")
        );
        assert_eq!(
            restored(&payload(&["return 1"])).unwrap_err(),
            "Missing library metadata"
        );
        assert_eq!(
            restored(&payload(&[good, good])).unwrap_err(),
            "Library 'ok' already exists"
        );
        let clash = "#!lua name=ok2\nredis.register_function('okf', function() return 1 end)";
        assert_eq!(
            restored(&payload(&[good, clash])).unwrap_err(),
            "Function okf already exists"
        );
        assert_eq!(
            restored(&payload(&["#!lua name=none\nlocal x = 1"])).unwrap_err(),
            "No functions registered"
        );
        let huge = format!("#!lua name=huge\n{}", "-".repeat(CODE_MAX));
        assert_eq!(
            restored(&payload(&[&huge])).unwrap_err(),
            format!("manifold: a library's code is at most {CODE_MAX} bytes")
        );
    }
}
