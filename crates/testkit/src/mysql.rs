//! MySQL servers for topologies of [`Flavor::MySql`](crate::Flavor::MySql).
//!
//! Debian 12 ships no MySQL server, so `scripts/setup-mysql` unpacks Debian unstable's
//! `mysql-server-core` with the libraries it needs into a private root (nothing is installed
//! system-wide) and every program runs through that root's own dynamic loader. This module
//! finds that root, initialises a datadir with it, and knows where MySQL's options and
//! replication statements differ from MariaDB's.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{effective_uid, Error};

/// What to run when the MySQL root is missing.
pub const MYSQL_INSTALL_HINT: &str = "scripts/setup-mysql";

/// An unpacked MySQL: `mysqld` and the loader and libraries it runs with.
#[derive(Debug, Clone)]
pub struct MysqlInstall {
    pub root: PathBuf,
}

impl MysqlInstall {
    /// The root named by `MANIFOLD_MYSQL_ROOT`, else `~/.cache/manifold/mysql/root` (where
    /// `scripts/setup-mysql` puts it); an error saying how to get it when it is not there.
    pub fn find() -> Result<MysqlInstall, Error> {
        let root = match std::env::var_os("MANIFOLD_MYSQL_ROOT") {
            Some(r) if !r.is_empty() => PathBuf::from(r),
            _ => default_root().ok_or_else(|| {
                Error::NotInstalled("MySQL: neither MANIFOLD_MYSQL_ROOT nor HOME is set".into())
            })?,
        };
        let install = MysqlInstall { root };
        for needed in [install.mysqld(), install.loader()] {
            if !needed.is_file() {
                return Err(Error::NotInstalled(format!(
                    "MySQL: {} is missing; run `{MYSQL_INSTALL_HINT}` (it unpacks Debian's \
                     mysql-server-core into {}) or point MANIFOLD_MYSQL_ROOT at such a root",
                    needed.display(),
                    install.root.display()
                )));
            }
        }
        Ok(install)
    }

    fn libdir(&self) -> PathBuf {
        self.root.join("usr/lib/x86_64-linux-gnu")
    }

    /// The root's `ld-linux`, which runs its programs against its own libraries.
    pub fn loader(&self) -> PathBuf {
        self.libdir().join("ld-linux-x86-64.so.2")
    }

    pub fn mysqld(&self) -> PathBuf {
        self.root.join("usr/sbin/mysqld")
    }

    /// A command running the root's `program` (a path inside the root, such as
    /// `usr/bin/mysqlbinlog`) through the root's loader and libraries; add its arguments.
    pub fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.loader());
        cmd.arg("--library-path")
            .arg(self.libdir())
            .arg(self.root.join(program));
        cmd
    }

    /// Arguments to the loader that run `mysqld`; the server's own options follow.
    pub(crate) fn mysqld_prefix(&self) -> Vec<OsString> {
        vec![
            "--library-path".into(),
            self.libdir().into_os_string(),
            self.mysqld().into_os_string(),
        ]
    }

    /// Options every `mysqld` of the root needs, as its compiled-in paths point into `/usr`.
    pub(crate) fn path_options(&self) -> String {
        let usr = self.root.join("usr");
        let usr = usr.display();
        format!(
            "basedir={usr}\nlc-messages-dir={usr}/share/mysql\nplugin-dir={usr}/lib/mysql/plugin\n\
             character-sets-dir={usr}/share/mysql/charsets\n"
        )
    }

    /// `mysqld --initialize-insecure`: a datadir whose `root@localhost` has no password.
    pub(crate) fn initialize(&self, datadir: &Path) -> Result<(), Error> {
        let mut cmd = Command::new(self.loader());
        cmd.args(self.mysqld_prefix()).arg("--no-defaults");
        if effective_uid() == Some(0) {
            cmd.arg("--user=root");
        }
        let usr = self.root.join("usr");
        let output = cmd
            .arg("--initialize-insecure")
            .arg(format!("--basedir={}", usr.display()))
            .arg(format!("--lc-messages-dir={}/share/mysql", usr.display()))
            .arg(format!("--plugin-dir={}/lib/mysql/plugin", usr.display()))
            .arg(format!(
                "--character-sets-dir={}/share/mysql/charsets",
                usr.display()
            ))
            .arg(format!("--innodb-redo-log-capacity={REDO_LOG_CAPACITY}"))
            .arg(format!("--datadir={}", datadir.display()))
            .output()
            .map_err(|e| Error::io(format!("running {}", self.mysqld().display()), e))?;
        if output.status.success() {
            return Ok(());
        }
        Err(Error::command(
            format!("{} --initialize-insecure", self.mysqld().display()),
            &output,
        ))
    }
}

fn default_root() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some(PathBuf::from(home).join(".cache/manifold/mysql/root"))
}

pub(crate) const REDO_LOG_CAPACITY: &str = "64M";

/// The `[mysqld]` options of a test server beyond paths, port and TLS: GTID replication as
/// MySQL needs it, statements logged beside their rows (as MariaDB's annotate events, which
/// the global binlog reads its ordering stamps from) and the same small, fast settings as the
/// MariaDB servers.
pub(crate) const SERVER_OPTIONS: &str = "gtid-mode=ON
enforce-gtid-consistency=ON
log-replica-updates=ON
binlog-format=ROW
binlog-rows-query-log-events=ON
mysqlx=OFF
max-connections=2000
character-set-server=utf8mb4
skip-name-resolve
performance-schema=OFF
innodb-flush-log-at-trx-commit=2
innodb-use-native-aio=OFF
sync-binlog=0
";
