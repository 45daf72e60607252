//! Initialised data directories.
//!
//! `mariadb-install-db` takes ~3 s (it feeds the help tables and the sys schema through a
//! bootstrap server) while a server starts in ~0.3 s, so it runs once and every server of a
//! topology gets a copy. The pristine result is also cached per user under the temp dir, keyed by
//! the installed binaries, so later test binaries skip it; `MANIFOLD_TESTKIT_NO_CACHE=1` turns the
//! cache off. A manifest of file sizes guards against a cache half-deleted by a tmp cleaner.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash as _, Hasher as _};
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{effective_uid, random_hex, Error};

/// InnoDB sizes shared by the template and the servers: a redo log whose size differs from the
/// one on disk would be rebuilt at every first start.
pub(crate) const INNODB_LOG_FILE_SIZE: &str = "32M";
pub(crate) const INNODB_BUFFER_POOL_SIZE: &str = "64M";

const MANIFEST: &str = "manifest";
const DATA: &str = "data";

/// Where a template lives and whether it belongs to the caller (and may be deleted after use).
pub(crate) struct Template {
    pub(crate) datadir: PathBuf,
    pub(crate) owned: bool,
}

/// A pristine initialised datadir, from the cache when possible, else built under `scratch`.
pub(crate) fn template(
    scratch: &Path,
    install_db: &Path,
    mariadbd: &Path,
) -> Result<Template, Error> {
    let args = install_args();
    if let Some(root) = cache_root() {
        let key = cache_key(install_db, mariadbd, &args);
        let entry = root.join(format!("template-{key}"));
        if let Ok(datadir) = cached(&root, &entry, install_db, &args) {
            return Ok(Template {
                datadir,
                owned: false,
            });
        }
        // A cache that cannot be used is only a missed optimisation; fall through.
    }
    let datadir = scratch.join("template");
    install(install_db, &datadir, &args)?;
    Ok(Template {
        datadir,
        owned: true,
    })
}

fn install_args() -> Vec<String> {
    let mut args = vec![
        "--no-defaults".to_string(),
        "--auth-root-authentication-method=normal".to_string(),
        "--skip-test-db".to_string(),
        // Without it install-db resolves the host name and adds a root@<hostname> account that
        // every start then warns about under skip-name-resolve.
        "--skip-name-resolve".to_string(),
        format!("--innodb-log-file-size={INNODB_LOG_FILE_SIZE}"),
        format!("--innodb-buffer-pool-size={INNODB_BUFFER_POOL_SIZE}"),
    ];
    if effective_uid() == Some(0) {
        args.push("--user=root".to_string());
    }
    args
}

fn install(install_db: &Path, datadir: &Path, args: &[String]) -> Result<(), Error> {
    let output = Command::new(install_db)
        .args(args)
        .arg(format!("--datadir={}", datadir.display()))
        .output()
        .map_err(|e| Error::io(format!("running {}", install_db.display()), e))?;
    if output.status.success() {
        return Ok(());
    }
    Err(Error::command(install_db.display().to_string(), &output))
}

fn cache_root() -> Option<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    if std::env::var_os("MANIFOLD_TESTKIT_NO_CACHE").is_some_and(|v| !v.is_empty() && v != "0") {
        return None;
    }
    let uid = effective_uid()?;
    let root = std::env::temp_dir().join(format!("manifold-testkit-cache-{uid}"));
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&root);
    // The temp dir is shared: only trust a real directory that this user owns.
    let meta = std::fs::symlink_metadata(&root).ok()?;
    (meta.is_dir() && meta.uid() == uid).then_some(root)
}

fn cache_key(install_db: &Path, mariadbd: &Path, args: &[String]) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let mut h = DefaultHasher::new();
    for program in [install_db, mariadbd] {
        program.hash(&mut h);
        if let Ok(meta) = std::fs::metadata(program) {
            meta.len().hash(&mut h);
            meta.mtime().hash(&mut h);
            meta.mtime_nsec().hash(&mut h);
        }
    }
    args.hash(&mut h);
    format!("{:016x}", h.finish())
}

fn cached(root: &Path, entry: &Path, install_db: &Path, args: &[String]) -> Result<PathBuf, Error> {
    if entry.exists() {
        if is_intact(entry) {
            return Ok(entry.join(DATA));
        }
        eprintln!(
            "manifold-testkit: template cache {} is damaged; rebuilding it",
            entry.display()
        );
        // Move it aside first so a concurrent user never sees a half-removed template.
        let trash = root.join(format!("trash-{}-{}", std::process::id(), random_hex(4)?));
        if std::fs::rename(entry, &trash).is_ok() {
            let _ = std::fs::remove_dir_all(&trash);
        }
    }
    prune(root, entry);
    let staging = root.join(format!("tmp-{}-{}", std::process::id(), random_hex(4)?));
    let result = install(install_db, &staging.join(DATA), args).and_then(|()| {
        let manifest = manifest(&staging.join(DATA))?;
        std::fs::write(staging.join(MANIFEST), manifest)
            .map_err(|e| Error::io("writing the template manifest", e))
    });
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&staging);
        return Err(e);
    }
    // rename(2) of a directory is atomic; losing the race to another process is fine.
    if std::fs::rename(&staging, entry).is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    if is_intact(entry) {
        Ok(entry.join(DATA))
    } else {
        Err(Error::InvalidArgument(format!(
            "template cache {} is not usable",
            entry.display()
        )))
    }
}

/// Removes templates of other MariaDB builds (an upgrade changes the key) and staging
/// directories left by killed processes, so the cache does not grow without bound.
fn prune(root: &Path, keep: &Path) {
    const STALE: std::time::Duration = std::time::Duration::from_hours(1);
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE));
        // Staging and trash directories may belong to a concurrent process still writing them.
        let remove = if name.starts_with("template-") {
            path != keep
        } else {
            old
        };
        if remove {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

fn is_intact(entry: &Path) -> bool {
    match (
        std::fs::read_to_string(entry.join(MANIFEST)),
        manifest(&entry.join(DATA)),
    ) {
        (Ok(expected), Ok(actual)) => expected == actual,
        _ => false,
    }
}

/// One `path<TAB>size` line per file, sorted.
fn manifest(dir: &Path) -> Result<String, Error> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) -> std::io::Result<()> {
        for entry in std::fs::read_dir(dir)? {
            let entry = entry?;
            let path = entry.path();
            let meta = entry.metadata()?;
            if meta.is_dir() {
                walk(base, &path, out)?;
            } else {
                let rel = path.strip_prefix(base).unwrap_or(&path);
                out.push(format!("{}\t{}", rel.display(), meta.len()));
            }
        }
        Ok(())
    }
    let mut lines = Vec::new();
    walk(dir, dir, &mut lines).map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
    if lines.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{} is empty",
            dir.display()
        )));
    }
    lines.sort();
    Ok(lines.join("\n") + "\n")
}

/// Recursive copy of a template datadir.
pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(to)
        .map_err(|e| Error::io(format!("creating {}", to.display()), e))?;
    let entries =
        std::fs::read_dir(from).map_err(|e| Error::io(format!("reading {}", from.display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(format!("reading {}", from.display()), e))?;
        let src = entry.path();
        let dst = to.join(entry.file_name());
        let file_type = entry
            .file_type()
            .map_err(|e| Error::io(format!("inspecting {}", src.display()), e))?;
        if file_type.is_dir() {
            copy_tree(&src, &dst)?;
        } else {
            copy_sparse(&src, &dst).map_err(|e| {
                Error::io(format!("copying {} to {}", src.display(), dst.display()), e)
            })?;
        }
    }
    Ok(())
}

/// Copies a file, leaving holes where the source has all-zero blocks.
///
/// A fresh datadir is mostly zeros (all but one block of the 32 MiB redo log, most of ibdata1);
/// skipping them cuts the bytes written per server from ~50 MB to ~8 MB. InnoDB reads holes as
/// zeros and fills them as it writes, exactly as in a preallocated file.
fn copy_sparse(src: &Path, dst: &Path) -> std::io::Result<()> {
    use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
    const BLOCK: usize = 64 * 1024;
    let mut input = std::fs::File::open(src)?;
    let meta = input.metadata()?;
    let mut output = std::fs::File::create(dst)?;
    output.set_permissions(meta.permissions())?;
    let mut buf = vec![0u8; BLOCK];
    // Slice equality compiles to memcmp even in unoptimised test builds; a byte loop does not.
    let zeros = vec![0u8; BLOCK];
    loop {
        let mut filled = 0;
        while filled < BLOCK {
            match input.read(&mut buf[filled..])? {
                0 => break,
                n => filled += n,
            }
        }
        if filled == 0 {
            break;
        }
        let block = &buf[..filled];
        if block == &zeros[..filled] {
            output.seek(SeekFrom::Current(filled as i64))?;
        } else {
            output.write_all(block)?;
        }
        if filled < BLOCK {
            break;
        }
    }
    // Trailing holes are only created by extending the length.
    output.set_len(meta.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_and_copy_roundtrip() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("mysql")).unwrap();
        std::fs::write(src.path().join("ibdata1"), b"12345").unwrap();
        std::fs::write(src.path().join("mysql/user.MAI"), b"xy").unwrap();
        let dst = tempfile::tempdir().unwrap();
        let copy = dst.path().join("copy");
        copy_tree(src.path(), &copy).unwrap();
        assert_eq!(manifest(src.path()).unwrap(), manifest(&copy).unwrap());
        assert_eq!(std::fs::read(copy.join("ibdata1")).unwrap(), b"12345");
        assert_eq!(
            manifest(&copy).unwrap(),
            "ibdata1\t5\nmysql/user.MAI\t2\n".to_string()
        );
        std::fs::write(copy.join("ibdata1"), b"1").unwrap();
        assert_ne!(manifest(src.path()).unwrap(), manifest(&copy).unwrap());
    }

    #[test]
    fn sparse_copy_preserves_content_and_length() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let mut data = vec![0u8; 300 * 1024 + 17];
        data[70_000] = 1;
        data[300 * 1024 + 3] = 9;
        std::fs::write(&src, &data).unwrap();
        let dst = dir.path().join("dst");
        copy_sparse(&src, &dst).unwrap();
        assert_eq!(std::fs::read(&dst).unwrap(), data);
        let zeros = dir.path().join("zeros");
        std::fs::write(&zeros, vec![0u8; 200 * 1024]).unwrap();
        copy_sparse(&zeros, &dst).unwrap();
        assert_eq!(std::fs::read(&dst).unwrap(), vec![0u8; 200 * 1024]);
    }

    #[test]
    fn cache_key_depends_on_arguments() {
        let sh = Path::new("/bin/sh");
        let a = cache_key(sh, sh, &["--x".to_string()]);
        let b = cache_key(sh, sh, &["--y".to_string()]);
        assert_ne!(a, b);
        assert_eq!(a, cache_key(sh, sh, &["--x".to_string()]));
    }
}
