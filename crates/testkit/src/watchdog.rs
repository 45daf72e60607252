//! Cleanup that survives the death of the process owning a topology.
//!
//! Tests keep one topology per test binary in a `static`, whose destructor never runs, and a test
//! process may also be killed outright. A `sh` loop, started once per topology in its own process
//! group (so a terminal's Ctrl-C does not kill it together with the test), notices when its parent
//! is gone, SIGKILLs every server of the topology and removes the topology's directory.
//!
//! Parent death is detected by the watchdog's own parent pid changing (reparenting happens at
//! exit), not by `kill -0 $parent`, which keeps succeeding while the dead parent is an unreaped
//! zombie.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::Error;

/// Name of the file, in each server's directory, holding the pid of its running `mariadbd`.
pub(crate) const PID_FILE: &str = "testkit.pid";

/// `$1`: pid the watchdog must outlive; `$2`: topology directory.
///
/// A server is only killed if its command line still mentions the topology directory, so a
/// recycled pid never hits an unrelated process (zombies have an empty command line too).
/// SIGKILL rather than SIGTERM: the data is thrown away, so a clean shutdown buys nothing.
const SCRIPT: &str = r#"
parent=$1
dir=$2
while [ -d "$dir" ]; do
    read -r _pid _comm _state ppid _rest < /proc/$$/stat || break
    [ "$ppid" = "$parent" ] || break
    sleep 0.5
done
[ -d "$dir" ] || exit 0
ours() {
    case "$(tr '\0' ' ' < /proc/$1/cmdline 2>/dev/null)" in
        *"$dir"*) return 0 ;;
    esac
    return 1
}
pids=
for f in "$dir"/*/testkit.pid; do
    [ -f "$f" ] || continue
    read -r pid < "$f" || continue
    if ours "$pid"; then
        kill -KILL "$pid" 2>/dev/null
        pids="$pids $pid"
    fi
done
i=0
while [ $i -lt 50 ]; do
    alive=
    for pid in $pids; do
        if ours "$pid"; then alive=1; fi
    done
    [ -z "$alive" ] && break
    sleep 0.1
    i=$((i + 1))
done
rm -rf "$dir" 2>/dev/null || { sleep 0.2; rm -rf "$dir" 2>/dev/null; }
exit 0
"#;

/// Starts the watchdog for `dir`, guarding against the death of this process.
pub(crate) fn spawn(dir: &Path) -> Result<Child, Error> {
    use std::os::unix::process::CommandExt as _;
    Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .arg("manifold-testkit-watchdog")
        .arg(std::process::id().to_string())
        .arg(dir)
        .stdin(Stdio::null())
        // Inheriting the test's stdout/stderr would make `cargo test` wait for the watchdog's
        // pipes to close after the test binary has exited.
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::io("spawning the watchdog shell (sh)", e))
}
