use std::path::{Path, PathBuf};

use crate::Error;

/// What to run when a MariaDB program is missing. Tests fail with this rather than skip.
pub const INSTALL_HINT: &str = "apt-get install mariadb-server mariadb-client";

/// Debian puts `mariadbd` in /usr/sbin, which is not on a normal user's PATH.
const EXTRA_DIRS: &[&str] = &["/usr/sbin", "/usr/local/sbin", "/usr/bin", "/usr/local/bin"];

fn find_program(name: &str) -> Option<PathBuf> {
    let path_dirs = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    path_dirs
        .into_iter()
        .chain(EXTRA_DIRS.iter().map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn require(name: &str, package: &str) -> Result<PathBuf, Error> {
    find_program(name).ok_or_else(|| {
        Error::NotInstalled(format!(
            "`{name}` (Debian package {package}) was not found on PATH or in /usr/sbin; \
             manifold's tests need a real MariaDB: run `{INSTALL_HINT}`"
        ))
    })
}

/// The MariaDB server binary, or an error saying what to install.
pub fn mariadbd_path() -> Result<PathBuf, Error> {
    require("mariadbd", "mariadb-server")
}

/// The `mariadb-install-db` script, or an error saying what to install.
pub fn mariadb_install_db_path() -> Result<PathBuf, Error> {
    require("mariadb-install-db", "mariadb-server")
}

/// The `mariadb` command-line client, or an error saying what to install.
pub fn mariadb_client_path() -> Result<PathBuf, Error> {
    require("mariadb", "mariadb-client")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_program_error_says_what_to_install() {
        let err = require("surely-not-a-mariadb-program", "mariadb-server").unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("apt-get install mariadb-server mariadb-client"),
            "{msg}"
        );
    }

    #[test]
    fn finds_sh() {
        assert!(find_program("sh").is_some());
    }
}
