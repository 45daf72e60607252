//! Checks the command families share: each writes Redis's error reply when it fails and
//! then hands back `None`, so that a command ends with `let Some(..) = .. else { return }`.

use crate::errors;
use crate::store::context::Cx;
use crate::store::keys::{KeyRow, WrongType};
use crate::store::StoreError;

/// The live key `k` of type `t` for a read: `Some(None)` when absent or expired, `None`
/// once `WRONGTYPE` is replied.
pub async fn read(cx: &mut Cx<'_>, k: &[u8], t: u8) -> Result<Option<Option<KeyRow>>, StoreError> {
    let found = cx.tx.typed_key(cx.db, k, t, false).await?;
    Ok(or_wrongtype(cx, found))
}

/// The collection `k` of type `t` locked for a write ([`crate::store::Tx::collection`]),
/// created empty when absent and `create`: `Some(None)` when absent (and not created),
/// `None` once `WRONGTYPE` is replied.
pub async fn write(
    cx: &mut Cx<'_>,
    k: &[u8],
    t: u8,
    create: bool,
) -> Result<Option<Option<KeyRow>>, StoreError> {
    let found = cx.tx.collection(cx.db, k, t, create).await?;
    Ok(or_wrongtype(cx, found))
}

/// `found`, or `None` once `WRONGTYPE` is replied.
pub fn or_wrongtype<T>(cx: &mut Cx<'_>, found: Result<T, WrongType>) -> Option<T> {
    let Ok(v) = found else {
        cx.reply().error(errors::WRONGTYPE);
        return None;
    };
    Some(v)
}

/// Replies `ERR wrong number of arguments for '<name>' command` (an arity a command checks
/// itself, past the command table's).
pub fn arity(cx: &mut Cx<'_>, name: &str) {
    let mut text = Vec::new();
    errors::arity(&mut text, name);
    cx.reply().error(&text);
}

/// What a command answers when its key is absent (or expired).
#[derive(Debug, Clone, Copy)]
pub enum Absent {
    /// `:0`.
    Zero,
    /// A null bulk string.
    Null,
    /// An empty array.
    EmptyArray,
    /// `+OK`.
    Ok,
    /// An error reply of this text.
    Error(&'static [u8]),
}

impl Absent {
    fn reply(self, cx: &mut Cx<'_>) {
        let mut r = cx.reply();
        match self {
            Absent::Zero => r.integer(0),
            Absent::Null => r.null(),
            Absent::EmptyArray => r.array_len(0),
            Absent::Ok => r.simple(b"OK"),
            Absent::Error(text) => r.error(text),
        };
    }
}

/// [`read`] of a key the command needs: `None` once `WRONGTYPE` or, when the key is absent,
/// `absent` is replied.
pub async fn read_or(
    cx: &mut Cx<'_>,
    k: &[u8],
    t: u8,
    absent: Absent,
) -> Result<Option<KeyRow>, StoreError> {
    let Some(row) = read(cx, k, t).await? else {
        return Ok(None);
    };
    Ok(present_or(cx, row, absent))
}

/// [`write`] (not creating) of a key the command needs: `None` once `WRONGTYPE` or, when
/// the key is absent, `absent` is replied.
pub async fn write_or(
    cx: &mut Cx<'_>,
    k: &[u8],
    t: u8,
    absent: Absent,
) -> Result<Option<KeyRow>, StoreError> {
    let Some(row) = write(cx, k, t, false).await? else {
        return Ok(None);
    };
    Ok(present_or(cx, row, absent))
}

/// `HRANDFIELD key`, `ZRANDMEMBER key` (no count): one element of the collection `k` of type
/// `t` at a random place, read by `sql` (`kid`, then the offset, as its parameters), or
/// null when the key is absent.
pub async fn random_one(cx: &mut Cx<'_>, k: &[u8], t: u8, sql: &str) -> Result<(), StoreError> {
    let Some(row) = read_or(cx, k, t, Absent::Null).await? else {
        return Ok(());
    };
    let offset = super::rng::Rng::new().below(row.len.max(1) as u64);
    let params = [
        manifold_backend::Param::UInt(row.kid),
        manifold_backend::Param::UInt(offset),
    ];
    let mut rows = cx.tx.rows(sql, &params).await?;
    match rows
        .first_mut()
        .and_then(|r| r.first_mut())
        .and_then(crate::store::take_bytes)
    {
        Some(element) => cx.reply().bulk(&element),
        None => cx.reply().null(),
    };
    Ok(())
}

/// `row`, or `None` once `absent` is replied.
fn present_or(cx: &mut Cx<'_>, row: Option<KeyRow>, absent: Absent) -> Option<KeyRow> {
    if row.is_none() {
        absent.reply(cx);
    }
    row
}

/// A container command's subcommand (`XINFO STREAM`, `OBJECT ENCODING`), checked as Redis's
/// dispatcher does before the command runs: one of `subs` (`(name, full name, arity)`),
/// else `ERR unknown subcommand '<sub>'. Try <CONTAINER> HELP.`; then its arity, else
/// `ERR wrong number of arguments for '<full name>' command`. Its full name when right.
pub fn subcommand(
    args: &crate::cmd::Args<'_>,
    container: &str,
    subs: &[(&str, &'static str, i32)],
) -> Result<&'static str, crate::cmd::typed::ParseError> {
    use crate::cmd::typed::ParseError;
    let sub = args.get(1);
    let Some(&(_, name, arity)) = subs
        .iter()
        .find(|(s, _, _)| sub.eq_ignore_ascii_case(s.as_bytes()))
    else {
        let mut t = b"unknown subcommand '".to_vec();
        t.extend(
            sub.iter()
                .take(128)
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        t.extend_from_slice(b"'. Try ");
        t.extend_from_slice(container.as_bytes());
        t.extend_from_slice(b" HELP.");
        return Err(ParseError::Formatted(t));
    };
    let n = args.len();
    let ok = if arity > 0 {
        n == arity.unsigned_abs() as usize
    } else {
        n >= arity.unsigned_abs() as usize
    };
    if ok {
        Ok(name)
    } else {
        Err(ParseError::Arity(name))
    }
}
