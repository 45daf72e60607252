#![forbid(unsafe_code)]
//! `manifold-testkit up`: a MariaDB topology for the demo and benchmark scripts.
//!
//! Prints one `key=value ...` line on stdout once the topology is ready, then keeps it running
//! until stdin reaches end-of-file or the parent process exits. On SIGTERM/SIGINT the process
//! dies at once and the watchdogs remove the servers and their directory within about a second.

use std::io::Write as _;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use manifold_testkit::{Flavor, Topology, TopologyConfig};

const USAGE: &str = "\
usage: manifold-testkit up [--replicas N] [--no-tls] [--user NAME:PASSWORD]...
                           [--max-allowed-packet BYTES] [--server-arg ARG]... [--mysql]

Starts a MariaDB primary (MySQL with --mysql, from scripts/setup-mysql) with N GTID replicas
(default 2) on free ports of 127.0.0.1, creates the given users (all privileges;
mysql_native_password on MariaDB, caching_sha2_password on MySQL), prints one line such as

  primary=127.0.0.1:PORT replicas=127.0.0.1:P1,127.0.0.1:P2 ca=/tmp/.../ca.pem cert=... key=...
  dir=/tmp/... root_password=... pids=PRIMARY,R1,R2

and runs until stdin is closed or the parent process exits. Keep stdin open, for example
`sleep infinity | manifold-testkit up ...` or `manifold-testkit up ... < fifo`: a background job
of a non-interactive shell gets /dev/null as stdin and would stop at once. Empty values mean
\"none\" (no replicas, no TLS). Teardown is complete when `dir` no longer exists.
";

struct Options {
    config: TopologyConfig,
    users: Vec<(String, String)>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let options = match parse(&args) {
        Ok(Some(options)) => options,
        Ok(None) => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(message) => {
            eprintln!("manifold-testkit: {message}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match up(options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("manifold-testkit: {message}");
            ExitCode::FAILURE
        }
    }
}

fn parse(args: &[String]) -> Result<Option<Options>, String> {
    let mut args = args.iter();
    match args.next().map(String::as_str) {
        Some("up") => {}
        None | Some("-h" | "--help" | "help") => return Ok(None),
        Some(other) => return Err(format!("unknown command {other:?}")),
    }
    let mut options = Options {
        config: TopologyConfig::default(),
        users: Vec::new(),
    };
    while let Some(arg) = args.next() {
        let (name, inline) = match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => (name, Some(value.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next().cloned())
                .ok_or_else(|| format!("{name} needs a value"))
        };
        match name {
            "-h" | "--help" => return Ok(None),
            "--replicas" => {
                let v = value()?;
                options.config.replicas = v
                    .parse()
                    .map_err(|_| format!("--replicas: {v:?} is not a number"))?;
            }
            "--no-tls" => options.config.tls = false,
            "--mysql" => options.config.flavor = Flavor::MySql,
            "--user" => {
                let v = value()?;
                let (user, password) = v
                    .split_once(':')
                    .filter(|(user, _)| !user.is_empty())
                    .ok_or_else(|| format!("--user: expected NAME:PASSWORD, got {v:?}"))?;
                options.users.push((user.to_string(), password.to_string()));
            }
            "--max-allowed-packet" => {
                let v = value()?;
                options.config.max_allowed_packet = v
                    .parse()
                    .map_err(|_| format!("--max-allowed-packet: {v:?} is not a byte count"))?;
            }
            "--server-arg" => options.config.extra_server_args.push(value()?),
            other => return Err(format!("unknown option {other:?}")),
        }
    }
    Ok(Some(options))
}

fn up(options: Options) -> Result<(), String> {
    // Taken before the slow start so a parent that dies meanwhile is still noticed.
    let parent = std::os::unix::process::parent_id();
    let started = Instant::now();
    let topology = Topology::start(options.config).map_err(|e| e.to_string())?;
    for (user, password) in &options.users {
        topology
            .create_user(user, password)
            .map_err(|e| e.to_string())?;
    }
    eprintln!(
        "manifold-testkit: topology ready in {:.2}s",
        started.elapsed().as_secs_f64()
    );
    let line = info_line(&topology);
    let mut stdout = std::io::stdout().lock();
    // Scripts block on this line; it must not sit in a buffer.
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|e| format!("writing to stdout: {e}"))?;
    drop(stdout);

    let (done, wait) = mpsc::channel::<&'static str>();
    let on_eof = done.clone();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = on_eof.send("stdin closed");
    });
    std::thread::spawn(move || {
        while std::os::unix::process::parent_id() == parent {
            std::thread::sleep(Duration::from_millis(500));
        }
        let _ = done.send("parent exited");
    });
    let reason = wait.recv().unwrap_or("channel closed");
    eprintln!("manifold-testkit: {reason}, stopping");
    drop(topology);
    Ok(())
}

fn info_line(topology: &Topology) -> String {
    let join = |items: Vec<String>| items.join(",");
    let replicas = join(
        topology
            .replicas
            .iter()
            .map(|r| r.addr().to_string())
            .collect(),
    );
    let pids = join(topology.servers().map(|s| s.pid.to_string()).collect());
    let (ca, cert, key) = topology.tls.as_ref().map_or_else(
        || (String::new(), String::new(), String::new()),
        |tls| {
            (
                tls.ca_cert.display().to_string(),
                tls.server_cert.display().to_string(),
                tls.server_key.display().to_string(),
            )
        },
    );
    format!(
        "primary={} replicas={replicas} ca={ca} cert={cert} key={key} dir={} root_password={} pids={pids}",
        topology.primary.addr(),
        topology.dir().display(),
        topology.root_password(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn parses_options() {
        let o = parse(&strings(&[
            "up",
            "--replicas",
            "1",
            "--no-tls",
            "--user",
            "app:app",
            "--user=bench:p:w",
            "--max-allowed-packet=1024",
            "--server-arg=--max-connections=5000",
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(o.config.replicas, 1);
        assert!(!o.config.tls);
        assert_eq!(o.config.max_allowed_packet, 1024);
        assert_eq!(o.config.extra_server_args, ["--max-connections=5000"]);
        assert_eq!(
            o.users,
            [
                ("app".to_string(), "app".to_string()),
                ("bench".to_string(), "p:w".to_string())
            ]
        );
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse(&strings(&["down"])).is_err());
        assert!(parse(&strings(&["up", "--replicas"])).is_err());
        assert!(parse(&strings(&["up", "--replicas", "x"])).is_err());
        assert!(parse(&strings(&["up", "--user", ":pw"])).is_err());
        assert!(parse(&strings(&["up", "--frobnicate"])).is_err());
        assert!(parse(&strings(&[])).unwrap().is_none());
    }
}
