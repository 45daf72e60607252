//! Expiry: `EXPIRE`, `PEXPIRE`, `EXPIREAT`, `PEXPIREAT` (with `NX`/`XX`/`GT`/`LT`), `TTL`,
//! `PTTL`, `EXPIRETIME`, `PEXPIRETIME` and `PERSIST`, as Redis 7.0 (`src/expire.c`).
//!
//! A key's expiry is `redis_keys.expire_at` (Unix ms, `NULL`: none). The setters read the
//! key with a lock (an expired key is deleted there and counts as absent), then either
//! `UPDATE ... SET expire_at = ?, version = version + 1 WHERE kid = ?` or, for a time not in
//! the future, delete the key and its members (Redis deletes it at once and answers 1).
//! The readers read without a lock. The sweeper that deletes expired keys nobody touches is
//! [`crate::store::sweeper`].
//!
//! Differences from Redis: the batch's clock is read once per batch (Redis reads it per
//! command), so two commands of one pipeline see the same time; a key expires at its
//! `expire_at` millisecond itself (Redis: one millisecond later).

use manifold_backend::Param;

use super::data::{Family, Spec};
use super::typed::{DataCommand, ParseError, Untyped};
use super::{parse_i64, Args};
use crate::errors;
use crate::exec::Cx;
use crate::store::StoreError;

const fn spec(name: &'static str, arity: i32, write: bool) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Expiry,
        parse: untyped,
    }
}

/// Not typed yet: the arguments are read while the command applies ([`run`]).
fn untyped(_: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    Ok(DataCommand::Untyped(Untyped::Expiry))
}

pub static COMMANDS: [Spec; 9] = [
    spec("expire", -3, true),
    spec("pexpire", -3, true),
    spec("expireat", -3, true),
    spec("pexpireat", -3, true),
    spec("ttl", 2, false),
    spec("pttl", 2, false),
    spec("expiretime", 2, false),
    spec("pexpiretime", 2, false),
    spec("persist", 2, true),
];

/// `EXPIRE` with `NX` and another of `XX`/`GT`/`LT` (`src/expire.c`).
const NX_AND_OTHERS: &[u8] = b"NX and XX, GT or LT options at the same time are not compatible";
/// `EXPIRE` with `GT` and `LT`.
const GT_AND_LT: &[u8] = b"GT and LT options at the same time are not compatible";

/// Runs one command of this family.
pub async fn run(cx: &mut Cx<'_>, spec: &'static Spec, args: Args<'_>) -> Result<(), StoreError> {
    match spec.name {
        "expire" => expire(cx, spec, args, false, false).await,
        "pexpire" => expire(cx, spec, args, true, false).await,
        "expireat" => expire(cx, spec, args, false, true).await,
        "pexpireat" => expire(cx, spec, args, true, true).await,
        "ttl" => ttl(cx, args, false, false).await,
        "pttl" => ttl(cx, args, true, false).await,
        "expiretime" => ttl(cx, args, false, true).await,
        "pexpiretime" => ttl(cx, args, true, true).await,
        "persist" => persist(cx, args).await,
        other => unreachable!("{other} is not an expiry command"),
    }
}

/// The `NX`/`XX`/`GT`/`LT` flags of an `EXPIRE`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Flags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// An argument as Redis's C code sees it (`strcasecmp` on the object's string): up to its
/// first NUL byte.
fn c_string(a: &[u8]) -> &[u8] {
    a.iter().position(|&b| b == 0).map_or(a, |end| &a[..end])
}

/// Parses the options after the time (`parseExtendedExpireArgumentsOrReply`); the error
/// text on failure.
fn flags(args: &Args<'_>) -> Result<Flags, Vec<u8>> {
    let mut f = Flags::default();
    for a in args.from(3) {
        let opt = c_string(a);
        if opt.eq_ignore_ascii_case(b"nx") {
            f.nx = true;
        } else if opt.eq_ignore_ascii_case(b"xx") {
            f.xx = true;
        } else if opt.eq_ignore_ascii_case(b"gt") {
            f.gt = true;
        } else if opt.eq_ignore_ascii_case(b"lt") {
            f.lt = true;
        } else {
            // `addReplyErrorFormat` turns line breaks into spaces.
            let mut text = b"Unsupported option ".to_vec();
            text.extend(
                opt.iter()
                    .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
            );
            return Err(text);
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(NX_AND_OTHERS.to_vec());
    }
    if f.gt && f.lt {
        return Err(GT_AND_LT.to_vec());
    }
    Ok(f)
}

/// `ERR invalid expire time in '<cmd>' command`.
fn invalid_expire(name: &str) -> Vec<u8> {
    format!("invalid expire time in '{name}' command").into_bytes()
}

/// The absolute expiry (Unix ms) an `EXPIRE`-family command asks for, as
/// `expireGenericCommand` computes it (relative times from `now_ms`); the error text when
/// the time is not an integer or overflows.
fn when(spec: &Spec, t: &[u8], ms: bool, absolute: bool, now_ms: i64) -> Result<i64, Vec<u8>> {
    let mut at = parse_i64(t).ok_or_else(|| errors::NOT_INTEGER.to_vec())?;
    if !ms {
        at = at
            .checked_mul(1000)
            .ok_or_else(|| invalid_expire(spec.name))?;
    }
    let base = if absolute { 0 } else { now_ms };
    // Redis refuses `when > LLONG_MAX - basetime` (with a non-negative base).
    at.checked_add(base)
        .ok_or_else(|| invalid_expire(spec.name))
}

/// `EXPIRE key seconds [NX|XX|GT|LT]` and its `PEXPIRE` / `EXPIREAT` / `PEXPIREAT` forms.
async fn expire(
    cx: &mut Cx<'_>,
    spec: &'static Spec,
    args: Args<'_>,
    ms: bool,
    absolute: bool,
) -> Result<(), StoreError> {
    let f = match flags(&args) {
        Ok(f) => f,
        Err(text) => {
            cx.reply().error(&text);
            return Ok(());
        }
    };
    let now = cx.now_ms();
    let at = match when(spec, args.get(2), ms, absolute, now) {
        Ok(at) => at,
        Err(text) => {
            cx.reply().error(&text);
            return Ok(());
        }
    };
    let k = args.get(1);
    let Some(row) = cx.tx.key_meta(cx.db, k, true).await? else {
        cx.reply().integer(0);
        return Ok(());
    };
    let refused = match row.expire_at {
        // No expiry counts as an infinite one.
        None => f.xx || f.gt,
        Some(current) => f.nx || (f.gt && at <= current) || (f.lt && at >= current),
    };
    if refused {
        cx.reply().integer(0);
        return Ok(());
    }
    if at <= now {
        cx.tx.delete_key(cx.db, k, &row).await?;
    } else {
        cx.tx
            .exec(
                "UPDATE {s}.redis_keys SET expire_at = ?, version = version + 1 WHERE kid = ?",
                &[Param::Int(at), Param::UInt(row.kid)],
            )
            .await?;
    }
    cx.reply().integer(1);
    Ok(())
}

/// `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`: -2 for a missing key, -1 for one without
/// expiry; seconds are rounded to the nearest (`(ms + 500) / 1000`).
async fn ttl(cx: &mut Cx<'_>, args: Args<'_>, ms: bool, absolute: bool) -> Result<(), StoreError> {
    let Some(row) = cx.tx.key_meta(cx.db, args.get(1), false).await? else {
        cx.reply().integer(-2);
        return Ok(());
    };
    let Some(at) = row.expire_at else {
        cx.reply().integer(-1);
        return Ok(());
    };
    let t = if absolute {
        at
    } else {
        at.saturating_sub(cx.now_ms())
    }
    .max(0);
    // Rounded without overflow: redis-server answers 9223372036854776 for `i64::MAX` ms.
    let t = if ms {
        t
    } else {
        ((i128::from(t) + 500) / 1000) as i64
    };
    cx.reply().integer(t);
    Ok(())
}

/// `PERSIST key`: 1 when it removed an expiry.
async fn persist(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let removed = match cx.tx.key_meta(cx.db, args.get(1), true).await? {
        Some(row) if row.expire_at.is_some() => {
            cx.tx
                .exec(
                    "UPDATE {s}.redis_keys SET expire_at = NULL, version = version + 1 WHERE kid = ?",
                    &[Param::UInt(row.kid)],
                )
                .await?;
            1
        }
        _ => 0,
    };
    cx.reply().integer(removed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_strings_end_at_nul() {
        assert_eq!(c_string(b"nx\0zz"), b"nx");
        assert_eq!(c_string(b"\0"), b"");
        assert_eq!(c_string(b"gt"), b"gt");
    }

    #[test]
    fn times_overflow_as_redis_refuses_them() {
        let spec = &COMMANDS[0];
        assert_eq!(when(spec, b"10", false, false, 5), Ok(10_005));
        assert_eq!(when(spec, b"-10", false, false, 50_000), Ok(40_000));
        assert_eq!(when(spec, b"10", true, true, 5), Ok(10));
        assert_eq!(
            when(spec, b"x", false, false, 0),
            Err(errors::NOT_INTEGER.to_vec())
        );
        assert_eq!(
            when(spec, b"9223372036854776", false, true, 0),
            Err(b"invalid expire time in 'expire' command".to_vec())
        );
        assert_eq!(
            when(spec, b"-9223372036854776", false, true, 0),
            Err(b"invalid expire time in 'expire' command".to_vec())
        );
        assert_eq!(
            when(spec, b"9223372036854775807", true, false, 1),
            Err(b"invalid expire time in 'expire' command".to_vec())
        );
        assert_eq!(
            when(spec, b"-9223372036854775808", true, false, 1),
            Ok(i64::MIN + 1)
        );
    }
}
