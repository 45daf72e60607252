#![forbid(unsafe_code)]
//! Differential tests against a real `redis-server` (Debian's package, which
//! `scripts/setup` installs): for malformed requests the server's error reply equals
//! [`ProtocolError::reply`], quirky but valid requests are split into the same arguments,
//! and replies of each type are the bytes [`Reply`] writes. The server is started on a free
//! loopback port and killed at the end. Without `redis-server` these tests fail.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use manifold_redis_proto::{Frame, Limits, Protocol, ProtocolError, Reply, Request};

const PASSWORD: &str = "differential";

struct Server {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn find_redis_server() -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/bin", "/usr/sbin", "/usr/local/bin"].map(PathBuf::from))
        .map(|dir| dir.join("redis-server"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "redis-server is not installed (not on PATH, /usr/bin, /usr/sbin or \
                 /usr/local/bin): install the Debian package redis-server, e.g. with scripts/setup"
            )
        })
}

/// Starts a server that wants `PASSWORD`, on a free loopback port.
fn start() -> Server {
    let binary = find_redis_server();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!(
        "manifold-redis-proto-{}-{port}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let child = Command::new(&binary)
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args([
            "--requirepass",
            PASSWORD,
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", binary.display()));
    let server = Server { child, port, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "redis-server did not listen on port {port} within 10 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    server
}

fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Sends `input` and reads until the server closes the connection.
fn send_and_read_to_close(server: &Server, input: &[u8]) -> Vec<u8> {
    let mut stream = connect(server);
    stream.write_all(input).unwrap();
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return reply,
            Ok(n) => reply.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return reply,
            Err(e) => panic!(
                "reading the reply to {:?}: {e}",
                String::from_utf8_lossy(input)
            ),
        }
    }
}

/// Reads one reply frame (and returns its bytes).
fn read_frame(stream: &mut TcpStream, pending: &mut Vec<u8>) -> Vec<u8> {
    let mut chunk = [0u8; 4096];
    loop {
        if let Some((_, n)) = Frame::parse(pending).expect("a valid reply") {
            return pending.drain(..n).collect();
        }
        let n = stream.read(&mut chunk).expect("a reply");
        assert!(n > 0, "server closed the connection");
        pending.extend_from_slice(&chunk[..n]);
    }
}

fn ours(input: &[u8], authenticated: bool) -> Result<Option<usize>, ProtocolError> {
    let mut req = Request::new();
    req.set_auth_required(!authenticated);
    req.parse(input, &Limits::default())
}

#[test]
fn protocol_errors_match_redis_server() {
    let server = start();
    let big = Limits::default().inline_max_size;
    let too_big_inline = vec![b'a'; big + 1];
    let too_big_count = [&b"*"[..], &vec![b'1'; big]].concat();
    let too_big_bulk = [&b"*1\r\n$"[..], &vec![b'1'; big]].concat();
    let cases: Vec<(bool, &[u8])> = vec![
        (true, b"*x\r\n"),
        (true, b"*\r\n"),
        (true, b"*01\r\n"),
        (true, b"*+1\r\n"),
        (true, b"*1 \r\n"),
        (true, b"*-0\r\n"),
        (true, b"*2147483648\r\n"),
        (true, b"*99999999999999999999\r\n"),
        (true, b"*1\n$4\r\n"),
        (true, b"*1\r\n$x\r\n"),
        (true, b"*1\r\n$\r\n"),
        (true, b"*1\r\n$-1\r\n"),
        (true, b"*1\r\n$03\r\n"),
        (true, b"*1\r\n$999999999999\r\n"),
        (true, b"*1\r\n$536870913\r\n"),
        (true, b"*1\r\nx\r\n"),
        (true, b"*1\r\n:3\r\n"),
        (true, b"*1\r\n\r\n"),
        (true, b"*1\r\n\n\r\n"),
        (true, b"*1\r\n\xff\r\n"),
        (true, b"*2\r\n$1\r\na\r\n*1\r\n"),
        (true, b"SET \"a\r\n"),
        (true, b"'a\r\n"),
        (true, b"\"a\"b\r\n"),
        (true, b"'a'b\r\n"),
        (true, b"ECHO \"a\\\"\r\n"),
        (true, &too_big_inline),
        (true, &too_big_count),
        (true, &too_big_bulk),
        (false, b"*11\r\n"),
        (false, b"*1\r\n$16385\r\n"),
    ];
    for (authenticated, input) in cases {
        let shown = String::from_utf8_lossy(&input[..input.len().min(40)]).into_owned();
        let expected = ours(input, authenticated)
            .err()
            .unwrap_or_else(|| panic!("{shown:?}: we accept what should be an error"))
            .reply()
            .unwrap();
        let (sent, ok) = if authenticated {
            (
                [format!("AUTH {PASSWORD}\r\n").as_bytes(), input].concat(),
                &b"+OK\r\n"[..],
            )
        } else {
            (input.to_vec(), &b""[..])
        };
        let reply = send_and_read_to_close(&server, &sent);
        assert_eq!(
            String::from_utf8_lossy(&reply),
            String::from_utf8_lossy(&[ok, &expected].concat()),
            "input {shown:?}"
        );
    }
}

#[test]
fn requests_are_split_as_redis_server_splits_them() {
    let server = start();
    let inputs: &[&[u8]] = &[
        b"*2\r\n$4\r\nECHO\r\n$3\r\nfoo\r\n",
        b"*2\rX$4\r\nECHO\r\n$3\rYfooXY",
        b"*0\r\n*-1\r\n\r\n   \r\nECHO x\n",
        b"ECHO \"a b\\x41\\x4a\\n\\r\\t\\b\\a\\\\\\\"\\q\\xzz\"\r\n",
        b"ECHO 'it\\'s \\n'\r\n",
        b"ECHO foo\"bar\"\r\n",
        b"ECHO a\x0bb\r\n",
        b"  ECHO  \"\"  \r\n",
        b"ECHO \xff\xfe\r\n",
        b"*2\r\n$4\r\nECHO\r\n$5\r\n\0\r\n\xff\x01\r\n",
    ];
    let limits = Limits::default();
    for input in inputs {
        let mut stream = connect(&server);
        stream
            .write_all(format!("AUTH {PASSWORD}\r\n").as_bytes())
            .unwrap();
        let mut pending = Vec::new();
        assert_eq!(read_frame(&mut stream, &mut pending), b"+OK\r\n");
        stream.write_all(input).unwrap();
        let mut rest: &[u8] = input;
        let mut req = Request::new();
        while !rest.is_empty() {
            let n = req.parse(rest, &limits).unwrap().expect("complete request");
            if !req.is_empty() {
                let args: Vec<&[u8]> = req.args(rest).collect();
                assert_eq!(args.len(), 2, "{input:?}");
                let mut expected = Vec::new();
                Reply::new(&mut expected, Protocol::Resp2).bulk(args[1]);
                let got = read_frame(&mut stream, &mut pending);
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&expected),
                    "{input:?}"
                );
            }
            rest = &rest[n..];
        }
    }
}

#[test]
fn replies_match_redis_server() {
    let server = start();
    let mut stream = connect(&server);
    let mut pending = Vec::new();
    let mut roundtrip = |command: &str| -> Vec<u8> {
        let args: Vec<&str> = command.split(' ').collect();
        // A request is an array of bulk strings: what `Reply` writes.
        let mut req = Vec::new();
        let mut writer = Reply::new(&mut req, Protocol::Resp2);
        writer.array_len(args.len());
        for a in &args {
            writer.bulk(a.as_bytes());
        }
        stream.write_all(&req).unwrap();
        read_frame(&mut stream, &mut pending)
    };
    let mut ours = Vec::new();
    for p in [Protocol::Resp2, Protocol::Resp3] {
        let version = if p == Protocol::Resp3 { 3 } else { 2 };
        roundtrip(&format!("HELLO {version} AUTH default {PASSWORD}"));
        roundtrip("DEL z h s missing");
        let mut check = |command: &str, write: &dyn Fn(&mut Reply<'_>)| {
            ours.clear();
            write(&mut Reply::new(&mut ours, p));
            let got = roundtrip(command);
            assert_eq!(
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(&ours),
                "RESP{version} {command}"
            );
        };
        check("PING", &|r| {
            r.simple(b"PONG");
        });
        check("GET missing", &|r| {
            r.null();
        });
        check("ZADD z 1.5 a", &|r| {
            r.integer(1);
        });
        check("ZSCORE z a", &|r| {
            r.double(1.5);
        });
        check("ZINCRBY z 0.1 a", &|r| {
            r.double(1.5 + 0.1);
        });
        check("ZINCRBY z -inf a", &|r| {
            r.double(f64::NEG_INFINITY);
        });
        check("HSET h k v", &|r| {
            r.integer(1);
        });
        check("HGETALL h", &|r| {
            r.map_len(1).bulk(b"k").bulk(b"v");
        });
        check("SADD s m", &|r| {
            r.integer(1);
        });
        check("SMEMBERS s", &|r| {
            r.set_len(1).bulk(b"m");
        });
        check("SISMEMBER s m", &|r| {
            r.integer(1);
        });
        check("BLPOP missing 0.01", &|r| {
            r.null_array();
        });
        check("LLEN s", &|r| {
            r.error_code(
                "WRONGTYPE",
                b"Operation against a key holding the wrong kind of value",
            );
        });
        check("NOSUCH", &|r| {
            r.error(b"unknown command 'NOSUCH', with args beginning with: ");
        });
    }
}
