//! Command parsing from raw request bytes.

use manifold_redis_proto::{Limits, Request};

use super::{Args, Command, Reject};

/// Parses `bytes` as one request and hands its command (or refusal) to `check`.
fn with(bytes: &[u8], check: impl FnOnce(Result<Command<'_>, Reject<'_>>)) {
    let mut req = Request::new();
    let used = req.parse(bytes, &Limits::default()).unwrap().unwrap();
    assert_eq!(used, bytes.len());
    check(Command::parse(Args::new(&req, bytes)));
}

fn name_of(bytes: &[u8]) -> &'static str {
    let mut out = "";
    with(bytes, |c| out = c.ok().expect("parsed").full_name());
    out
}

fn refusal(bytes: &[u8]) -> String {
    let mut text = Vec::new();
    with(bytes, |c| match c {
        Ok(cmd) => panic!("parsed as {}", cmd.full_name()),
        Err(Reject::UnknownCommand(args)) => {
            crate::errors::unknown_command(&mut text, args.get(0), args.from(1));
        }
        Err(Reject::UnknownSubcommand { container, sub }) => {
            crate::errors::unknown_subcommand(&mut text, container, sub);
        }
        Err(Reject::Arity(n)) => crate::errors::arity(&mut text, n),
    });
    String::from_utf8(text).unwrap()
}

#[test]
fn names_in_any_case_multibulk_and_inline() {
    assert_eq!(name_of(b"*1\r\n$4\r\nPING\r\n"), "ping");
    assert_eq!(name_of(b"*1\r\n$4\r\npInG\r\n"), "ping");
    assert_eq!(name_of(b"ping\r\n"), "ping");
    assert_eq!(name_of(b"*2\r\n$4\r\necho\r\n$0\r\n\r\n"), "echo");
    assert_eq!(name_of(b"*2\r\n$6\r\nclient\r\n$2\r\nID\r\n"), "client|id");
    assert_eq!(name_of(b"client setname \"a\"\r\n"), "client|setname");
    assert_eq!(
        name_of(b"CLIENT SETINFO lib-name redis-py\r\n"),
        "client|setinfo"
    );
    assert_eq!(name_of(b"command docs get set\r\n"), "command|docs");
    assert_eq!(name_of(b"COMMAND\r\n"), "command");
    assert_eq!(name_of(b"config get save\r\n"), "config|get");
    assert_eq!(name_of(b"HELLO 3 AUTH u p SETNAME n\r\n"), "hello");
    assert_eq!(name_of(b"info\r\n"), "info");
    assert_eq!(name_of(b"quit extra args\r\n"), "quit");
}

#[test]
fn arguments_are_the_request_bytes() {
    with(b"*2\r\n$4\r\nECHO\r\n$5\r\na\r\nb\0\r\n", |c| {
        let Ok(Command::Echo(m)) = c else { panic!() };
        assert_eq!(m, b"a\r\nb\0");
    });
    with(b"AUTH \"us er\" p\\x41ss\r\n", |c| {
        let Ok(Command::Auth {
            user,
            pass,
            too_many,
        }) = c
        else {
            panic!()
        };
        assert_eq!(user, Some(&b"us er"[..]));
        assert_eq!(pass, b"p\\x41ss");
        assert!(!too_many);
    });
    with(b"AUTH \"p\\x41\"\r\n", |c| {
        let Ok(Command::Auth { user, pass, .. }) = c else {
            panic!()
        };
        assert_eq!((user, pass), (None, &b"pA"[..]));
    });
    with(
        b"*4\r\n$4\r\nauth\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",
        |c| {
            assert!(matches!(c, Ok(Command::Auth { too_many: true, .. })));
        },
    );
    with(b"PING\r\n", |c| {
        let Ok(Command::Ping(args)) = c else { panic!() };
        assert_eq!(args.len(), 1);
    });
    with(b"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n", |c| {
        let Ok(Command::Ping(args)) = c else { panic!() };
        assert_eq!(args.get(1), b"hi");
    });
}

#[test]
fn refusals_are_redis_texts() {
    assert_eq!(
        refusal(b"FOO a b\r\n"),
        "unknown command 'FOO', with args beginning with: 'a' 'b' "
    );
    assert_eq!(
        refusal(b"GETX k\r\n"),
        "unknown command 'GETX', with args beginning with: 'k' "
    );
    assert_eq!(
        refusal(b"*1\r\n$3\r\nset\r\n"),
        "wrong number of arguments for 'set' command"
    );
    assert_eq!(name_of(b"GeT k\r\n"), "get");
    assert_eq!(
        refusal(b"ECHO\r\n"),
        "wrong number of arguments for 'echo' command"
    );
    assert_eq!(
        refusal(b"ECHO a b\r\n"),
        "wrong number of arguments for 'echo' command"
    );
    // PING's extra arguments are refused when it runs, after the authentication check.
    assert_eq!(name_of(b"PING a b\r\n"), "ping");
    assert_eq!(
        refusal(b"SELECT\r\n"),
        "wrong number of arguments for 'select' command"
    );
    assert_eq!(
        refusal(b"AUTH\r\n"),
        "wrong number of arguments for 'auth' command"
    );
    assert_eq!(
        refusal(b"CLIENT\r\n"),
        "wrong number of arguments for 'client' command"
    );
    assert_eq!(
        refusal(b"CLIENT SETNAME\r\n"),
        "wrong number of arguments for 'client|setname' command"
    );
    assert_eq!(
        refusal(b"client foo\r\n"),
        "unknown subcommand 'foo'. Try CLIENT HELP."
    );
    assert_eq!(
        refusal(b"COMMAND FOO\r\n"),
        "unknown subcommand 'FOO'. Try COMMAND HELP."
    );
    assert_eq!(
        refusal(b"CONFIG SET a b\r\n"),
        "unknown subcommand 'SET'. Try CONFIG HELP."
    );
    assert_eq!(
        refusal(b"TIME x\r\n"),
        "wrong number of arguments for 'time' command"
    );
    // The argument list stops once it reaches 128 bytes (quotes and spaces count); the last
    // argument is cut to what is left (redis-server 7.0.15 gives the same 25 bytes).
    let long = format!("FOO {} {} c\r\n", "x".repeat(100), "y".repeat(100));
    assert_eq!(
        refusal(long.as_bytes()),
        format!(
            "unknown command 'FOO', with args beginning with: '{}' '{}' ",
            "x".repeat(100),
            "y".repeat(25)
        )
    );
}

#[test]
fn only_the_handshake_commands_skip_authentication() {
    for (bytes, no_auth) in [
        (&b"AUTH p\r\n"[..], true),
        (b"HELLO 3\r\n", true),
        (b"QUIT\r\n", true),
        (b"RESET\r\n", true),
        (b"PING\r\n", false),
        (b"SELECT 0\r\n", false),
        (b"CLIENT ID\r\n", false),
        (b"INFO\r\n", false),
    ] {
        with(bytes, |c| assert_eq!(c.ok().unwrap().no_auth(), no_auth));
    }
}

#[test]
fn integers_as_redis_reads_them() {
    use super::parse_i64;
    assert_eq!(parse_i64(b"0"), Some(0));
    assert_eq!(parse_i64(b"15"), Some(15));
    assert_eq!(parse_i64(b"-1"), Some(-1));
    for bad in [
        &b""[..],
        b"01",
        b"+1",
        b" 1",
        b"1 ",
        b"-0",
        b"x",
        b"99999999999999999999",
    ] {
        assert_eq!(parse_i64(bad), None, "{bad:?}");
    }
    assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
}
