//! Error replies, word for word as Redis 7.0 sends them (`src/server.c`, `src/networking.c`,
//! `src/acl.c`). Texts beginning with `-` carry their own code; the others get `-ERR `.

pub const NOAUTH: &[u8] = b"-NOAUTH Authentication required.";
pub const WRONGPASS: &[u8] = b"-WRONGPASS invalid username-password pair or user is disabled.";
pub const NOPROTO: &[u8] = b"-NOPROTO unsupported protocol version";
pub const HELLO_NOAUTH: &[u8] = b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time";
pub const SYNTAX: &[u8] = b"syntax error";
pub const NOT_INTEGER: &[u8] = b"value is not an integer or out of range";
pub const PROTO_NOT_INTEGER: &[u8] = b"Protocol version is not an integer or out of range";
pub const DB_OUT_OF_RANGE: &[u8] = b"DB index is out of range";
pub const BAD_CLIENT_NAME: &[u8] =
    b"Client names cannot contain spaces, newlines or special characters.";
pub const MAX_CLIENTS: &[u8] = b"-ERR max number of clients reached\r\n";

/// Appends `ERR unknown command '<name>', with args beginning with: '<a>' '<b>' ` as
/// Redis formats it: the name cut at 128 bytes, arguments quoted while the list is shorter
/// than 128 bytes, each cut to what is left of the 128.
pub fn unknown_command<'a>(out: &mut Vec<u8>, name: &[u8], args: impl Iterator<Item = &'a [u8]>) {
    out.extend_from_slice(b"unknown command '");
    out.extend_from_slice(&name[..name.len().min(128)]);
    out.extend_from_slice(b"', with args beginning with: ");
    let mut len = 0usize;
    for a in args {
        if len >= 128 {
            break;
        }
        let take = a.len().min(128 - len);
        out.push(b'\'');
        out.extend_from_slice(&a[..take]);
        out.extend_from_slice(b"' ");
        len += take + 3;
    }
}

/// `ERR unknown subcommand '<sub>'. Try <CMD> HELP.`
pub fn unknown_subcommand(out: &mut Vec<u8>, container: &str, sub: &[u8]) {
    out.extend_from_slice(b"unknown subcommand '");
    out.extend_from_slice(&sub[..sub.len().min(128)]);
    out.extend_from_slice(b"'. Try ");
    out.extend_from_slice(container.as_bytes());
    out.extend_from_slice(b" HELP.");
}

/// `ERR wrong number of arguments for '<cmd>' command` (`client|setname` for a subcommand).
pub fn arity(out: &mut Vec<u8>, full_name: &str) {
    out.extend_from_slice(b"wrong number of arguments for '");
    out.extend_from_slice(full_name.as_bytes());
    out.extend_from_slice(b"' command");
}

/// A command on a key of another type (`src/server.c`).
pub const WRONGTYPE: &[u8] = b"-WRONGTYPE Operation against a key holding the wrong kind of value";
/// `SET` with a bad `EX`/`PX`/`EXAT`/`PXAT` (`src/t_string.c`).
pub const INVALID_EXPIRE_SET: &[u8] = b"invalid expire time in 'set' command";
/// A count that must not be negative (`getPositiveLongFromObjectOrReply`: also when it is
/// not an integer), as `LPOP`, `SPOP`, `ZPOPMIN` answer (`src/object.c`).
pub const MUST_BE_POSITIVE: &[u8] = b"value is out of range, must be positive";
/// A count of `i64::MIN` where Redis wants `-LONG_MAX..=LONG_MAX`
/// (`getRangeLongFromObjectOrReply`: `SRANDMEMBER`, `HRANDFIELD`).
pub const COUNT_OUT_OF_RANGE: &[u8] =
    b"value is out of range, value must between -9223372036854775807 and 9223372036854775807";
/// A number `strtold`/`strtod` does not take whole (`getLongDoubleFromObjectOrReply`,
/// `zslParseRange`...).
pub const NOT_FLOAT: &[u8] = b"value is not a valid float";
/// `INCRBY`, `HINCRBY`: the sum leaves the 64-bit range (`src/t_string.c`, `src/t_hash.c`).
pub const INCR_OVERFLOW: &[u8] = b"increment or decrement would overflow";
/// `INCRBYFLOAT`, `HINCRBYFLOAT`: the sum is not finite.
pub const INCR_NAN_OR_INF: &[u8] = b"increment would produce NaN or Infinity";
