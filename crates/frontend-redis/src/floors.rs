//! Keeps the floors of [`crate`]'s map: a module names only modules of its own floor or
//! below (issue 27: no import circle between the commands, the store and what runs them).
//! Read from the sources, so a new upward import fails this test, not a review.

use std::path::{Path, PathBuf};

/// Each top-level module (a file or directory under `src/`) and its floor.
const FLOORS: &[(&str, u8)] = &[
    ("errors", 1),
    ("config", 1),
    // The one table of every command (floor 1); the rest of `cmd`, the typed commands and
    // the data families, is checked as floor 3.
    ("cmd::table", 1),
    ("cmd", 3),
    ("store", 2),
    ("metrics", 2),
    ("exec", 4),
    ("group", 4),
    ("multi", 4),
    ("script", 4),
    ("blocking", 4),
    ("worker", 4),
    ("notify", 4),
    ("session", 5),
    ("pubsub", 5),
    ("tracking", 5),
    ("kill", 5),
    ("memory", 5),
    ("conn", 6),
    ("server", 6),
];

/// What the crate root re-exports, by the module that defines it.
const ROOT_ITEMS: &[(&str, &str)] = &[
    ("RedisConfig", "config"),
    ("Backends", "store"),
    ("BackendLogin", "store"),
    ("Account", "server"),
    ("Credentials", "server"),
    ("RedisFrontend", "server"),
    ("RedisShared", "server"),
    ("RedisTlsDoor", "server"),
];

/// Upward names allowed, `(module, the module it names)`, each with its reason.
const ALLOWED: &[(&str, &str)] = &[
    // Every command is applied to the session's state (the map says so): a blocking pop
    // and `EXEC` run on it.
    ("blocking", "session"),
    ("multi", "session"),
    ("script", "session"),
    // The session is served by its worker's handler ([`crate::RedisFrontend`]) and shows
    // the client's `CLIENT LIST` line ([`crate::server::ClientInfo`]); a blocked client
    // waits on its handler's worker.
    ("session", "server"),
    ("blocking", "server"),
    // A script runs for a client of its worker's handler, whose handle stops it: a group
    // of scripts runs on the handler's worker, for clients other than its task's own.
    ("script", "server"),
    ("script", "kill"),
];

fn floor(module: &str) -> Option<u8> {
    FLOORS.iter().find(|(m, _)| *m == module).map(|(_, f)| *f)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("the crate's sources") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The modules of this crate that `code` names (`crate::exec::...`, `crate::RedisShared`),
/// outside comments: doc links to upper floors describe, they do not depend.
fn named_modules(code: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in code.lines() {
        let line = line.split("//").next().unwrap_or("");
        let mut rest = line;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            let mut name = &rest[..end];
            if name == "cmd" && rest[end..].starts_with("::table") {
                name = "cmd::table";
            }
            let module = ROOT_ITEMS
                .iter()
                .find(|(item, _)| *item == name)
                .map_or(name, |(_, m)| *m);
            names.push(module.to_string());
        }
    }
    names
}

/// Every upward name in the crate's sources: `(file, the module it names)`.
fn upward_names() -> Vec<(String, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut upward = Vec::new();
    for file in files {
        let relative = file.strip_prefix(&src).expect("under src");
        let top = relative
            .components()
            .next()
            .and_then(|c| c.as_os_str().to_str())
            .expect("a file name");
        let mut module = top.strip_suffix(".rs").unwrap_or(top);
        if module == "cmd"
            && relative
                .components()
                .nth(1)
                .is_some_and(|c| c.as_os_str() == "table.rs" || c.as_os_str() == "table")
        {
            module = "cmd::table";
        }
        let Some(own) = floor(module) else {
            // The crate root and this test.
            continue;
        };
        let code = std::fs::read_to_string(&file).expect("a source file");
        for named in named_modules(&code) {
            let Some(theirs) = floor(&named) else {
                continue;
            };
            if theirs > own && !ALLOWED.contains(&(module, named.as_str())) {
                upward.push((relative.display().to_string(), named));
            }
        }
    }
    upward.sort();
    upward.dedup();
    upward
}

#[test]
fn no_module_names_a_module_of_a_higher_floor() {
    let upward = upward_names();
    assert!(
        upward.is_empty(),
        "modules naming a higher floor (see the map in lib.rs): {upward:?}"
    );
}

#[test]
fn every_module_has_a_floor() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).expect("the crate's sources") {
        let name = entry.expect("an entry").file_name();
        let name = name.to_str().expect("a file name");
        let module = name.strip_suffix(".rs").unwrap_or(name);
        if module != "lib" && module != "floors" {
            assert!(floor(module).is_some(), "{module} has no floor in FLOORS");
        }
    }
}

#[test]
fn the_guard_sees_an_upward_import() {
    assert_eq!(
        named_modules(
            "use crate::exec::Cx;\n// [`crate::session`]\nfn f(s: &crate::RedisShared) {}"
        ),
        ["exec", "server"]
    );
}
