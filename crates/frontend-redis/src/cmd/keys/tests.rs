//! The key commands' parsers, from raw request bytes, without a database.

use super::parse::*;
use crate::cmd::scan::ScanOptions;
use crate::cmd::typed::testing::{command, error, parsed};
use crate::cmd::typed::DataCommand;

const SYNTAX: &str = "syntax error";
const NOT_INTEGER: &str = "value is not an integer or out of range";

fn debug(c: KeyCommand<'_>) -> String {
    format!("{:?}", DataCommand::Keys(c))
}

#[test]
fn key_lists() {
    parsed(b"*3\r\n$3\r\nDEL\r\n$1\r\na\r\n$1\r\nb\r\n", |r| match r {
        Ok(DataCommand::Keys(Del { keys })) => {
            assert_eq!(keys.from(1).collect::<Vec<_>>(), [b"a", b"b"]);
        }
        other => panic!("{other:?}"),
    });
    // UNLINK is DEL, TOUCH is EXISTS.
    assert_eq!(
        command(b"unlink a b\r\n").replace("unlink", "del"),
        command(b"del a b\r\n")
    );
    assert_eq!(
        command(b"touch a\r\n").replace("touch", "exists"),
        command(b"exists a\r\n")
    );
    assert!(command(b"exists a a\r\n").starts_with("Keys(Exists"));
    assert_eq!(
        error(b"del\r\n"),
        "wrong number of arguments for 'del' command"
    );
    assert_eq!(
        error(b"exists\r\n"),
        "wrong number of arguments for 'exists' command"
    );
}

#[test]
fn no_argument_forms() {
    assert_eq!(command(b"dbsize\r\n"), debug(DbSize));
    assert_eq!(command(b"RANDOMKEY\r\n"), debug(RandomKey));
    assert_eq!(command(b"type k\r\n"), debug(Type { key: b"k" }));
    assert_eq!(
        command(b"keys h?llo\r\n"),
        debug(Keys { pattern: b"h?llo" })
    );
    assert_eq!(
        error(b"dbsize x\r\n"),
        "wrong number of arguments for 'dbsize' command"
    );
    assert_eq!(
        error(b"keys\r\n"),
        "wrong number of arguments for 'keys' command"
    );
}

#[test]
fn scan_cursor_then_options() {
    let opts = |count, pattern, kind| ScanOptions {
        count,
        pattern,
        kind,
    };
    assert_eq!(
        command(b"scan 0\r\n"),
        debug(Scan {
            cursor: 0,
            options: opts(10, None, None)
        })
    );
    assert_eq!(
        command(b"scan 42 match k:* count 100 type hash\r\n"),
        debug(Scan {
            cursor: 42,
            options: opts(100, Some(b"k:*"), Some(b"hash"))
        })
    );
    // MATCH * is no pattern; the last of a repeated option wins.
    assert_eq!(
        command(b"scan 0 MATCH * COUNT 5 COUNT 7\r\n"),
        debug(Scan {
            cursor: 0,
            options: opts(7, None, None)
        })
    );
    assert_eq!(error(b"scan x\r\n"), "invalid cursor");
    assert_eq!(error(b"scan \" 1\"\r\n"), "invalid cursor");
    assert_eq!(error(b"scan x count 0\r\n"), "invalid cursor");
    assert_eq!(error(b"scan 0 count 0\r\n"), SYNTAX);
    assert_eq!(error(b"scan 0 count -1\r\n"), SYNTAX);
    assert_eq!(error(b"scan 0 count x\r\n"), NOT_INTEGER);
    assert_eq!(error(b"scan 0 count\r\n"), SYNTAX);
    assert_eq!(error(b"scan 0 match\r\n"), SYNTAX);
    assert_eq!(error(b"scan 0 foo 1\r\n"), SYNTAX);
    assert_eq!(
        error(b"scan\r\n"),
        "wrong number of arguments for 'scan' command"
    );
}

#[test]
fn rename_and_renamenx() {
    assert_eq!(
        command(b"rename a b\r\n"),
        debug(Rename {
            from: b"a",
            to: b"b",
            nx: false
        })
    );
    assert_eq!(
        command(b"RENAMENX a b\r\n"),
        debug(Rename {
            from: b"a",
            to: b"b",
            nx: true
        })
    );
    assert_eq!(
        error(b"rename a\r\n"),
        "wrong number of arguments for 'rename' command"
    );
    assert_eq!(
        error(b"renamenx a b c\r\n"),
        "wrong number of arguments for 'renamenx' command"
    );
}

#[test]
fn copy_options_in_redis_order() {
    assert_eq!(
        command(b"copy a b\r\n"),
        debug(Copy {
            from: b"a",
            to: b"b",
            db: None,
            replace: false
        })
    );
    assert_eq!(
        command(b"copy a b DB 15 replace\r\n"),
        debug(Copy {
            from: b"a",
            to: b"b",
            db: Some(15),
            replace: true
        })
    );
    // The same key onto itself parses: only apply knows the client's database.
    assert!(command(b"copy a a\r\n").starts_with("Keys(Copy"));
    assert_eq!(error(b"copy a b db 16\r\n"), "DB index is out of range");
    assert_eq!(error(b"copy a b db -1\r\n"), "DB index is out of range");
    assert_eq!(
        error(b"copy a b db 2147483648\r\n"),
        "value is out of range, value must between -2147483648 and 2147483647"
    );
    assert_eq!(error(b"copy a b db x\r\n"), NOT_INTEGER);
    assert_eq!(error(b"copy a b db\r\n"), SYNTAX);
    assert_eq!(error(b"copy a b foo\r\n"), SYNTAX);
    // Left to right: the first bad option is the one answered.
    assert_eq!(error(b"copy a b foo db x\r\n"), SYNTAX);
    assert_eq!(error(b"copy a b db x foo\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"copy a\r\n"),
        "wrong number of arguments for 'copy' command"
    );
}

#[test]
fn move_checks_the_database_before_the_key() {
    assert_eq!(command(b"move k 3\r\n"), debug(Move { key: b"k", db: 3 }));
    // The client's own database parses: only apply knows it.
    assert!(command(b"move k 0\r\n").starts_with("Keys(Move"));
    assert_eq!(error(b"move k 16\r\n"), "DB index is out of range");
    assert_eq!(error(b"move k -1\r\n"), "DB index is out of range");
    assert_eq!(
        error(b"move k 2147483648\r\n"),
        "value is out of range, value must between -2147483648 and 2147483647"
    );
    assert_eq!(error(b"move k x\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"move k\r\n"),
        "wrong number of arguments for 'move' command"
    );
    assert_eq!(
        error(b"move k 1 2\r\n"),
        "wrong number of arguments for 'move' command"
    );
}

#[test]
fn flush_modes() {
    assert_eq!(command(b"flushdb\r\n"), debug(Flush { all: false }));
    assert_eq!(command(b"flushdb ASYNC\r\n"), debug(Flush { all: false }));
    assert_eq!(command(b"flushall sync\r\n"), debug(Flush { all: true }));
    assert_eq!(error(b"flushdb lazy\r\n"), SYNTAX);
    assert_eq!(error(b"flushall sync async\r\n"), SYNTAX);
}

#[test]
fn swapdb_checks_each_index_then_both_ranges() {
    assert_eq!(command(b"swapdb 1 2\r\n"), debug(SwapDb { a: 1, b: 2 }));
    assert_eq!(command(b"SWAPDB 3 3\r\n"), debug(SwapDb { a: 3, b: 3 }));
    assert_eq!(error(b"swapdb x 2\r\n"), "invalid first DB index");
    assert_eq!(error(b"swapdb 16 x\r\n"), "invalid second DB index");
    assert_eq!(error(b"swapdb 2147483648 1\r\n"), "invalid first DB index");
    assert_eq!(error(b"swapdb 1 16\r\n"), "DB index is out of range");
    assert_eq!(error(b"swapdb -1 1\r\n"), "DB index is out of range");
    assert_eq!(
        error(b"swapdb 1\r\n"),
        "wrong number of arguments for 'swapdb' command"
    );
}

#[test]
fn object_and_memory_subcommands() {
    use super::object::ObjectCommand;
    let object = |c: ObjectCommand<'_>| format!("{:?}", DataCommand::Object(c));
    assert_eq!(
        command(b"object encoding k\r\n"),
        object(ObjectCommand::Encoding(b"k"))
    );
    assert_eq!(
        command(b"OBJECT REFCOUNT k\r\n"),
        object(ObjectCommand::RefCount(b"k"))
    );
    assert_eq!(
        error(b"object foo k\r\n"),
        "unknown subcommand 'foo'. Try OBJECT HELP."
    );
    assert_eq!(
        error(b"object encoding\r\n"),
        "wrong number of arguments for 'object|encoding' command"
    );
    assert_eq!(
        command(b"memory usage k samples 0\r\n"),
        object(ObjectCommand::Usage {
            key: b"k",
            samples: u64::MAX
        })
    );
    assert_eq!(
        command(b"memory usage k\r\n"),
        object(ObjectCommand::Usage {
            key: b"k",
            samples: 5
        })
    );
    assert_eq!(error(b"memory usage k samples -1\r\n"), "syntax error");
    assert_eq!(error(b"memory usage k samples\r\n"), "syntax error");
    assert_eq!(error(b"memory usage k samples x\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"memory stats\r\n"),
        "unknown subcommand 'stats'. Try MEMORY HELP."
    );
}

#[test]
fn dump_and_restore_options_in_redis_order() {
    assert_eq!(command(b"dump k\r\n"), debug(Dump { key: b"k" }));
    assert_eq!(
        error(b"dump\r\n"),
        "wrong number of arguments for 'dump' command"
    );
    assert_eq!(
        error(b"restore k 0\r\n"),
        "wrong number of arguments for 'restore' command"
    );
    let restore = |replace, absttl| {
        debug(Restore(crate::cmd::keys::dump::Restore {
            key: b"k",
            ttl: b"x",
            payload: b"p",
            replace,
            absttl,
        }))
    };
    // The TTL is read when it runs (after the BUSYKEY check).
    assert_eq!(command(b"restore k x p\r\n"), restore(false, false));
    assert_eq!(
        command(b"restore k x p REPLACE absttl idletime 5\r\n"),
        restore(true, true)
    );
    assert_eq!(
        command(b"restore k x p freq 255 replace\r\n"),
        restore(true, false)
    );
    assert_eq!(error(b"restore k 0 p bogus\r\n"), SYNTAX);
    // IDLETIME and FREQ exclude each other; each needs its value.
    assert_eq!(error(b"restore k 0 p idletime 1 freq 1\r\n"), SYNTAX);
    assert_eq!(error(b"restore k 0 p freq 1 idletime 1\r\n"), SYNTAX);
    assert_eq!(error(b"restore k 0 p idletime\r\n"), SYNTAX);
    assert_eq!(error(b"restore k 0 p idletime x\r\n"), NOT_INTEGER);
    assert_eq!(
        error(b"restore k 0 p idletime -1\r\n"),
        "Invalid IDLETIME value, must be >= 0"
    );
    assert_eq!(
        error(b"restore k 0 p freq 256\r\n"),
        "Invalid FREQ value, must be >= 0 and <= 255"
    );
    assert_eq!(
        error(b"restore k 0 p freq -1\r\n"),
        "Invalid FREQ value, must be >= 0 and <= 255"
    );
}
