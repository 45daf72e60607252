//! Files only their owner reads. The global binlog holds every cluster's rows (DDL with
//! password hashes included), so its directory is made 0700 and every file written in it
//! (binlog files, the index, the sources checkpoint, the start record, spill files and the
//! temporary files they are replaced through) 0600, whatever the umask, as the data
//! directory's keys are. A directory or file left wider by an earlier version or by hand is
//! tightened at start ([`tighten`]), logged in one line.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Write as _};
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// The mode of the global binlog's directories.
pub const DIR_MODE: u32 = 0o700;
/// The mode of every file in them.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` and its missing parents with mode 0700; an existing one is left as it is
/// ([`tighten`] sees to it at start).
pub fn create_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Options whose `create` makes a file with mode 0600. An existing file keeps its mode: set
/// it ([`set_private`]) where one may be reused.
pub fn options() -> OpenOptions {
    let mut o = OpenOptions::new();
    o.mode(FILE_MODE);
    o
}

/// Sets an open file's mode to 0600 (one that existed before it was opened kept its own).
pub fn set_private(file: &File) -> io::Result<()> {
    file.set_permissions(Permissions::from_mode(FILE_MODE))
}

/// Replaces `path` with `bytes` whole or not at all: `tmp` (beside it) is written with mode
/// 0600, synced and renamed over it, then the directory is synced.
pub fn replace(path: &Path, tmp: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = options()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)?;
    // A temporary file a crash left behind keeps the mode it was made with.
    set_private(&file)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(tmp, path)?;
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    File::open(dir.unwrap_or(Path::new(".")))?.sync_all()
}

/// What [`tighten`] changed: each path with the mode it had.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tightened(pub Vec<(PathBuf, u32)>);

impl std::fmt::Display for Tightened {
    /// `dir (0755), dir/manifold-bin.000001 (0644), ...`, the first ten and a count of the
    /// rest.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const NAMED: usize = 10;
        for (i, (path, mode)) in self.0.iter().take(NAMED).enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} ({mode:04o})", path.display())?;
        }
        if self.0.len() > NAMED {
            write!(f, " and {} more", self.0.len() - NAMED)?;
        }
        Ok(())
    }
}

/// Takes group's and others' bits off the global binlog's directory `dir`, the files of it
/// named `<base_name>.*`, the spill directory `spill_dir` and the files in it, and logs what
/// it changed in one `warn` line. Symbolic links in the directories are not followed (nor
/// changed); `dir` itself may be one. Nothing there yet: nothing to do. A file that cannot
/// be changed (another user's) is an error: its rows would stay readable.
pub fn tighten(dir: &Path, base_name: &str, spill_dir: &Path) -> io::Result<Tightened> {
    let mut changed = Tightened::default();
    let prefix = format!("{base_name}.");
    let ours = |name: &str| name.starts_with(&prefix);
    tighten_dir(dir, &ours, &mut changed)?;
    tighten_dir(spill_dir, &|_: &str| true, &mut changed)?;
    if !changed.0.is_empty() {
        tracing::warn!(
            tightened = %changed,
            "binlog: files of the global binlog were readable by group or others; made private (directories 0700, files 0600)"
        );
    }
    Ok(changed)
}

/// `dir` (followed if a link) and its regular files whose name `ours` accepts.
fn tighten_dir(dir: &Path, ours: &dyn Fn(&str) -> bool, changed: &mut Tightened) -> io::Result<()> {
    let meta = match std::fs::metadata(dir) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(named(dir, &e)),
    };
    if !meta.is_dir() {
        return Ok(());
    }
    tighten_one(dir, meta.permissions().mode(), changed)?;
    for entry in std::fs::read_dir(dir).map_err(|e| named(dir, &e))? {
        let entry = entry.map_err(|e| named(dir, &e))?;
        if !entry.file_name().to_str().is_some_and(ours) {
            continue;
        }
        let path = entry.path();
        // Not followed: a link's mode says nothing, and its target is not ours to change.
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            // Removed meanwhile (a spill file is unlinked as soon as it is made).
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(named(&path, &e)),
        };
        if meta.is_file() {
            tighten_one(&path, meta.permissions().mode(), changed)?;
        }
    }
    Ok(())
}

fn tighten_one(path: &Path, mode: u32, changed: &mut Tightened) -> io::Result<()> {
    let mode = mode & 0o7777;
    let group_and_others = mode & 0o077;
    if group_and_others == 0 {
        return Ok(());
    }
    std::fs::set_permissions(path, Permissions::from_mode(mode & !0o077))
        .map_err(|e| named(path, &e))?;
    changed.0.push((path.to_owned(), mode));
    Ok(())
}

/// The error with the path it is about (`chmod` names none).
fn named(path: &Path, e: &io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::symlink_metadata(path)
            .unwrap()
            .permissions()
            .mode()
            & 0o7777
    }

    #[test]
    fn created_private() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("a/b");
        create_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&tmp.path().join("a")), 0o700);
        let path = dir.join("f");
        let file = options().write(true).create(true).open(&path).unwrap();
        drop(file);
        assert_eq!(mode(&path), 0o600);
        // A left-over temporary file of mode 0644 is replaced through with 0600.
        let tmp_file = dir.join("f.tmp");
        std::fs::write(&tmp_file, "old").unwrap();
        std::fs::set_permissions(&tmp_file, Permissions::from_mode(0o644)).unwrap();
        replace(&path, &tmp_file, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        assert_eq!(mode(&path), 0o600);
        assert!(!tmp_file.exists());
    }

    #[test]
    fn tighten_takes_group_and_other_bits_off_ours_only() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("binlog");
        let spill = dir.join("spill");
        std::fs::create_dir_all(&spill).unwrap();
        let set = |p: &Path, m: u32| std::fs::set_permissions(p, Permissions::from_mode(m));
        for (name, m) in [
            ("manifold-bin.000001", 0o644),
            ("manifold-bin.index", 0o666),
            ("manifold-bin.sources", 0o600),
            ("notes.txt", 0o644),
        ] {
            std::fs::write(dir.join(name), "x").unwrap();
            set(&dir.join(name), m).unwrap();
        }
        std::fs::write(spill.join("leftover"), "x").unwrap();
        set(&spill.join("leftover"), 0o640).unwrap();
        // A link to a file elsewhere is not followed.
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::write(&elsewhere, "x").unwrap();
        set(&elsewhere, 0o644).unwrap();
        std::os::unix::fs::symlink(&elsewhere, dir.join("manifold-bin.000002")).unwrap();
        set(&dir, 0o755).unwrap();
        set(&spill, 0o775).unwrap();

        let changed = tighten(&dir, "manifold-bin", &spill).unwrap();
        let mut names: Vec<_> = changed
            .0
            .iter()
            .map(|(p, m)| (p.strip_prefix(tmp.path()).unwrap().to_owned(), *m))
            .collect();
        names.sort();
        let want: Vec<(PathBuf, u32)> = vec![
            ("binlog".into(), 0o755),
            ("binlog/manifold-bin.000001".into(), 0o644),
            ("binlog/manifold-bin.index".into(), 0o666),
            ("binlog/spill".into(), 0o775),
            ("binlog/spill/leftover".into(), 0o640),
        ];
        assert_eq!(names, want);
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&spill), 0o700);
        assert_eq!(mode(&dir.join("manifold-bin.000001")), 0o600);
        assert_eq!(mode(&dir.join("manifold-bin.index")), 0o600);
        assert_eq!(mode(&spill.join("leftover")), 0o600);
        assert_eq!(mode(&dir.join("notes.txt")), 0o644, "not ours");
        assert_eq!(mode(&elsewhere), 0o644, "a link is not followed");
        // Said in one line, naming each.
        let line = changed.to_string();
        assert!(line.contains("manifold-bin.000001 (0644)"), "{line}");
        assert!(line.contains("spill (0775)"), "{line}");
        // Already private: nothing more.
        assert_eq!(
            tighten(&dir, "manifold-bin", &spill).unwrap(),
            Tightened::default()
        );
        // Nothing there yet: nothing to do.
        let none = tmp.path().join("none");
        assert_eq!(
            tighten(&none, "manifold-bin", &none.join("spill")).unwrap(),
            Tightened::default()
        );
    }

    #[test]
    fn a_long_list_is_cut_short() {
        let t = Tightened(
            (0..12)
                .map(|i| (PathBuf::from(format!("f{i}")), 0o644))
                .collect(),
        );
        assert_eq!(
            t.to_string(),
            "f0 (0644), f1 (0644), f2 (0644), f3 (0644), f4 (0644), f5 (0644), f6 (0644), f7 (0644), f8 (0644), f9 (0644) and 2 more"
        );
    }
}
