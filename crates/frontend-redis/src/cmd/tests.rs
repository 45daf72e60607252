//! Command parsing from raw request bytes.

use manifold_redis_proto::{Limits, Request};

use super::{Args, Command, Parsed, Reject};

/// Parses `bytes` as one request and hands its command (or refusal) to `check`.
fn with(bytes: &[u8], check: impl FnOnce(Result<Command<'_>, Reject<'_>>)) {
    with_entry(bytes, |p| check(p.map(|p| p.cmd)));
}

/// As [`with`], with the command's table entry.
fn with_entry(bytes: &[u8], check: impl FnOnce(Result<Parsed<'_>, Reject<'_>>)) {
    let mut req = Request::new();
    let used = req.parse(bytes, &Limits::default()).unwrap().unwrap();
    assert_eq!(used, bytes.len());
    check(Command::parse(Args::new(&req, bytes)));
}

fn name_of(bytes: &[u8]) -> &'static str {
    let mut out = "";
    with_entry(bytes, |c| out = c.ok().expect("parsed").name());
    out
}

fn refusal(bytes: &[u8]) -> String {
    let mut text = Vec::new();
    with_entry(bytes, |c| match c {
        Ok(p) => panic!("parsed as {}", p.name()),
        Err(Reject::UnknownCommand(args)) => {
            crate::errors::unknown_command(&mut text, args.get(0), args.from(1));
        }
        Err(Reject::UnknownSubcommand { container, sub }) => {
            crate::errors::unknown_subcommand(&mut text, container, sub);
        }
        Err(Reject::Arity(e)) => crate::errors::arity(&mut text, e.name),
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
    assert_eq!(name_of(b"config set timeout 0\r\n"), "config|set");
    assert_eq!(name_of(b"CONFIG RESETSTAT\r\n"), "config|resetstat");
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
        refusal(b"CONFIG SETX a b\r\n"),
        "unknown subcommand 'SETX'. Try CONFIG HELP."
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
fn refusals_of_every_container_and_the_transactions() {
    // Texts as redis-server 7.0.15 gives them.
    assert_eq!(
        refusal(b"CONFIG\r\n"),
        "wrong number of arguments for 'config' command"
    );
    assert_eq!(
        refusal(b"PUBSUB\r\n"),
        "wrong number of arguments for 'pubsub' command"
    );
    assert_eq!(
        refusal(b"pubsub Nope\r\n"),
        "unknown subcommand 'Nope'. Try PUBSUB HELP."
    );
    assert_eq!(
        refusal(b"PUBSUB NUMPAT x\r\n"),
        "wrong number of arguments for 'pubsub|numpat' command"
    );
    assert_eq!(
        refusal(b"COMMAND COUNT x\r\n"),
        "wrong number of arguments for 'command|count' command"
    );
    assert_eq!(
        refusal(b"CONFIG SET timeout\r\n"),
        "wrong number of arguments for 'config|set' command"
    );
    assert_eq!(
        refusal(b"CONFIG REWRITE x\r\n"),
        "wrong number of arguments for 'config|rewrite' command"
    );
    assert_eq!(
        refusal(b"CONFIG GET\r\n"),
        "wrong number of arguments for 'config|get' command"
    );
    assert_eq!(
        refusal(b"CLIENT KILL\r\n"),
        "wrong number of arguments for 'client|kill' command"
    );
    assert_eq!(
        refusal(b"MULTI x\r\n"),
        "wrong number of arguments for 'multi' command"
    );
    assert_eq!(
        refusal(b"WATCH\r\n"),
        "wrong number of arguments for 'watch' command"
    );
    assert_eq!(
        refusal(b"PUBLISH c\r\n"),
        "wrong number of arguments for 'publish' command"
    );
    // A subcommand's full name is no command; nor a name longer than any command's.
    assert_eq!(
        refusal(b"client|id\r\n"),
        "unknown command 'client|id', with args beginning with: "
    );
    let long = "x".repeat(40);
    assert_eq!(
        refusal(format!("{long}\r\n").as_bytes()),
        format!("unknown command '{long}', with args beginning with: ")
    );
    let sub = "y".repeat(40);
    assert_eq!(
        refusal(format!("CLIENT {sub}\r\n").as_bytes()),
        format!("unknown subcommand '{sub}'. Try CLIENT HELP.")
    );
    // Refused, each with its entry: its slot is what the figures count.
    with_entry(b"CLIENT KILL\r\n", |c| {
        let Err(Reject::Arity(e)) = c else { panic!() };
        assert!(std::ptr::eq(e, super::table().get("client|kill").unwrap()));
    });
}

#[test]
fn every_command_parses_to_its_own_entry() {
    for e in super::table().entries() {
        if e.container.is_some() && e.name != "command" {
            continue;
        }
        // The name, and enough arguments for its arity.
        let mut words: Vec<&str> = e.name.split('|').collect();
        let argc = e.arity.unsigned_abs() as usize;
        while words.len() < argc {
            words.push("a");
        }
        let line = format!("{}\r\n", words.join(" "));
        with_entry(line.as_bytes(), |c| {
            let p = c.ok().unwrap_or_else(|| panic!("{line}"));
            assert!(std::ptr::eq(p.entry, e), "{line}");
            let spec = match p.cmd {
                Command::Data(spec, _) => Some(spec.name),
                _ => None,
            };
            assert_eq!(spec, e.spec().map(|s| s.name), "{line}");
        });
    }
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
        with_entry(bytes, |c| assert_eq!(c.ok().unwrap().no_auth(), no_auth));
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
