//! The data directory: where manifold keeps what it generates for itself and must find again
//! after a restart (the TLS certificate and key, the RSA key for `caching_sha2_password`).
//!
//! It holds private keys, so it is created with mode 0700 and refused when others could
//! write into it (they could swap the key), when it is a symbolic link or not owned by the
//! user manifold runs as (another user may have made it first, say in `/tmp`, with a key of
//! their own in it); its files read are refused on the same grounds. Files are written whole or not at all (a temporary
//! file renamed into place) under an exclusive lock, so two manifolds starting at once on the
//! same directory neither corrupt a file nor end up with a certificate of one and a key of the
//! other.

use std::fs::File;
use std::io::Write as _;
use std::os::unix::fs::{
    DirBuilderExt as _, MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _,
};
use std::path::{Path, PathBuf};

/// `data_dir` unset: `$XDG_STATE_HOME/manifold` when that is set, else `manifold-data` in the
/// working directory.
pub fn default_path() -> PathBuf {
    match std::env::var_os("XDG_STATE_HOME") {
        Some(state) if !state.is_empty() => PathBuf::from(state).join("manifold"),
        _ => PathBuf::from("manifold-data"),
    }
}

/// An open data directory.
#[derive(Debug, Clone)]
pub struct DataDir {
    path: PathBuf,
}

/// Held while files of the data directory are read or written; unlocks when dropped.
#[derive(Debug)]
pub struct DirLock {
    _held: File,
}

impl DataDir {
    /// Creates `path` (mode 0700, parents as needed) or checks the existing directory.
    pub fn open(path: &Path) -> Result<DataDir, String> {
        match std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
        {
            Ok(()) => {}
            Err(e) => {
                return Err(format!(
                    "data_dir: cannot create {}: {e} (set data_dir or --data-dir)",
                    path.display()
                ))
            }
        }
        let meta = std::fs::symlink_metadata(path)
            .map_err(|e| format!("data_dir: {}: {e}", path.display()))?;
        check_dir(path, &meta, effective_uid()?)?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            tracing::warn!(
                path = %path.display(),
                mode = format_args!("{mode:04o}"),
                "data directory is readable by group or others; its key files are not (0600), but chmod 700 it"
            );
        }
        Ok(DataDir {
            path: path.to_owned(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn file(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Waits for the directory's lock (a `.lock` file, `flock`), which other manifolds
    /// starting on the same directory take too.
    pub fn lock(&self) -> Result<DirLock, String> {
        let path = self.file(".lock");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("data_dir: cannot open {}: {e}", path.display()))?;
        file.lock()
            .map_err(|e| format!("data_dir: cannot lock {}: {e}", path.display()))?;
        Ok(DirLock { _held: file })
    }

    /// The file's text, `None` when it does not exist. A key file others can read is refused:
    /// its key is no longer private.
    pub fn read(&self, _lock: &DirLock, name: &str) -> Result<Option<String>, String> {
        let path = self.file(name);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
        };
        check_file(&path, &meta, effective_uid()?)?;
        let text = std::fs::read(&path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))
            .and_then(|bytes| {
                String::from_utf8(bytes)
                    .map_err(|_| format!("{}: not a PEM file (not text)", path.display()))
            })?;
        if text.contains("PRIVATE KEY") {
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                return Err(format!(
                    "{}: private key readable by group or others (mode {mode:04o}); chmod 600 it, or remove it to have a new one generated",
                    path.display()
                ));
            }
        }
        Ok(Some(text))
    }

    /// Replaces (or creates) `name` with `contents`, with `mode`: a temporary file is
    /// written, synced and renamed over it, so a reader sees the old file or the new one
    /// whole, never a part.
    pub fn write(
        &self,
        _lock: &DirLock,
        name: &str,
        contents: &str,
        mode: u32,
    ) -> Result<PathBuf, String> {
        let path = self.file(name);
        let tmp = self.file(&format!(".{name}.{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(mode)
            .open(&tmp)
            .and_then(|mut f| {
                // The mode of a file left over by a crashed writer is not what we asked for.
                f.set_permissions(std::fs::Permissions::from_mode(mode))?;
                f.write_all(contents.as_bytes())?;
                f.sync_all()
            })
            .and_then(|()| std::fs::rename(&tmp, &path))
            .and_then(|()| File::open(&self.path)?.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(format!("cannot write {}: {e}", path.display()));
        }
        Ok(path)
    }
}

/// The user manifold runs as (its effective uid): the owner of `/proc/self`, which needs no
/// unsafe code.
fn effective_uid() -> Result<u32, String> {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid())
        .map_err(|e| format!("data_dir: cannot tell which user manifold runs as (/proc/self: {e})"))
}

/// The data directory at `path` (`meta` of the path itself, links not followed) is one only
/// user `euid` controls: a directory, not a link, owned by that user, that nobody else may
/// write into.
fn check_dir(path: &Path, meta: &std::fs::Metadata, euid: u32) -> Result<(), String> {
    if meta.file_type().is_symlink() {
        return Err(format!(
            "data_dir: {} is a symbolic link, which whoever can change it can point at keys of their own; set data_dir to the directory itself",
            path.display()
        ));
    }
    if !meta.is_dir() {
        return Err(format!("data_dir: {} is not a directory", path.display()));
    }
    if meta.uid() != euid {
        return Err(format!(
            "data_dir: {} is owned by uid {}, not by uid {euid} manifold runs as, so its keys may be someone else's; remove it to have it made again, or chown it if it is yours",
            path.display(),
            meta.uid()
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "data_dir: {} is writable by group or others (mode {mode:04o}), who could replace the keys in it; chmod 700 it",
            path.display()
        ));
    }
    Ok(())
}

/// A file of the data directory about to be read is a regular file (not a link) owned by
/// user `euid`.
fn check_file(path: &Path, meta: &std::fs::Metadata, euid: u32) -> Result<(), String> {
    if meta.file_type().is_symlink() {
        return Err(format!(
            "{} is a symbolic link; manifold reads only its own files there: put the file itself in its place",
            path.display()
        ));
    }
    if !meta.is_file() {
        return Err(format!("{} is not a regular file", path.display()));
    }
    if meta.uid() != euid {
        return Err(format!(
            "{} is owned by uid {}, not by uid {euid} manifold runs as, so it may be someone else's; remove it to have a new one generated, or chown it if it is yours",
            path.display(),
            meta.uid()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn created_private_with_parents() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("a/b/data");
        let dir = DataDir::open(&path).unwrap();
        assert_eq!(mode(dir.path()), 0o700);
        // Opening it again (a restart) is fine.
        DataDir::open(&path).unwrap();
    }

    #[test]
    fn refused_when_others_can_write() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("data");
        std::fs::create_dir(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = DataDir::open(&path).unwrap_err();
        assert!(
            e.contains("writable by group or others") && e.contains("0777"),
            "{e}"
        );
        // Readable only: accepted (with a warning).
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        DataDir::open(&path).unwrap();
    }

    #[test]
    fn not_a_directory_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("file");
        std::fs::write(&path, "x").unwrap();
        let e = DataDir::open(&path).unwrap_err();
        assert!(e.contains(&path.display().to_string()), "{e}");
    }

    #[test]
    fn writes_replace_whole_files_with_their_mode() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(&tmp.path().join("d")).unwrap();
        let lock = dir.lock().unwrap();
        assert_eq!(dir.read(&lock, "k.pem").unwrap(), None);
        let path = dir.write(&lock, "k.pem", "one", 0o600).unwrap();
        assert_eq!(mode(&path), 0o600);
        dir.write(&lock, "k.pem", "two", 0o600).unwrap();
        assert_eq!(dir.read(&lock, "k.pem").unwrap().as_deref(), Some("two"));
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != ".lock")
            .collect();
        assert_eq!(names, ["k.pem"]);
    }

    #[test]
    fn a_symbolic_link_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        let link = tmp.path().join("link");
        DataDir::open(&real).unwrap();
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let e = DataDir::open(&link).unwrap_err();
        assert!(
            e.contains(&link.display().to_string()) && e.contains("symbolic link"),
            "{e}"
        );
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("d");
        DataDir::open(&path).unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let me = effective_uid().unwrap();
        assert_eq!(meta.uid(), me);
        check_dir(&path, &meta, me).unwrap();
        let other = me + 1;
        let e = check_dir(&path, &meta, other).unwrap_err();
        assert!(
            e.contains(&path.display().to_string())
                && e.contains(&format!("owned by uid {me}, not by uid {other}"))
                && e.contains("remove it"),
            "{e}"
        );
    }

    #[test]
    fn key_files_of_another_user_or_linked_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(&tmp.path().join("d")).unwrap();
        let lock = dir.lock().unwrap();
        let path = dir
            .write(&lock, "key.pem", "-----BEGIN PRIVATE KEY-----\n", 0o600)
            .unwrap();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let me = effective_uid().unwrap();
        check_file(&path, &meta, me).unwrap();
        let e = check_file(&path, &meta, me + 1).unwrap_err();
        assert!(
            e.contains(&path.display().to_string()) && e.contains(&format!("owned by uid {me}")),
            "{e}"
        );
        // A link to a key elsewhere, for real.
        let elsewhere = tmp.path().join("theirs.pem");
        std::fs::write(&elsewhere, "-----BEGIN PRIVATE KEY-----\n").unwrap();
        std::fs::set_permissions(&elsewhere, std::fs::Permissions::from_mode(0o600)).unwrap();
        let linked = dir.file("linked.pem");
        std::os::unix::fs::symlink(&elsewhere, &linked).unwrap();
        let e = dir.read(&lock, "linked.pem").unwrap_err();
        assert!(
            e.contains(&linked.display().to_string()) && e.contains("symbolic link"),
            "{e}"
        );
    }

    #[test]
    fn a_private_key_others_can_read_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = DataDir::open(&tmp.path().join("d")).unwrap();
        let lock = dir.lock().unwrap();
        let path = dir
            .write(&lock, "key.pem", "-----BEGIN PRIVATE KEY-----\n", 0o644)
            .unwrap();
        let e = dir.read(&lock, "key.pem").unwrap_err();
        assert!(
            e.contains(&path.display().to_string()) && e.contains("0644"),
            "{e}"
        );
    }
}
