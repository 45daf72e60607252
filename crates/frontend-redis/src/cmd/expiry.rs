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
use super::typed::{integer, DataCommand, Parse, ParseError};
use super::Args;
use crate::store::context::Cx;
use crate::store::StoreError;

const fn spec(name: &'static str, arity: i32, write: bool, parse: Parse) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Expiry,
        parse,
    }
}

pub static COMMANDS: [Spec; 9] = [
    spec("expire", -3, true, |a| {
        parse_expire(a, "expire", false, false)
    }),
    spec("pexpire", -3, true, |a| {
        parse_expire(a, "pexpire", true, false)
    }),
    spec("expireat", -3, true, |a| {
        parse_expire(a, "expireat", false, true)
    }),
    spec("pexpireat", -3, true, |a| {
        parse_expire(a, "pexpireat", true, true)
    }),
    spec("ttl", 2, false, |a| Ok(ttl_of(a, Ttl::Seconds))),
    spec("pttl", 2, false, |a| Ok(ttl_of(a, Ttl::Ms))),
    spec("expiretime", 2, false, |a| Ok(ttl_of(a, Ttl::UnixSeconds))),
    spec("pexpiretime", 2, false, |a| Ok(ttl_of(a, Ttl::UnixMs))),
    spec("persist", 2, true, |a| {
        Ok(ExpiryCommand::Persist { key: a.get(1) }.into())
    }),
];

/// `EXPIRE` with `NX` and another of `XX`/`GT`/`LT` (`src/expire.c`).
const NX_AND_OTHERS: &[u8] = b"NX and XX, GT or LT options at the same time are not compatible";
/// `EXPIRE` with `GT` and `LT`.
const GT_AND_LT: &[u8] = b"GT and LT options at the same time are not compatible";

/// An expiry command, its arguments parsed.
#[derive(Debug, PartialEq)]
pub enum ExpiryCommand<'a> {
    /// `EXPIRE key seconds [NX|XX|GT|LT]` and its `PEXPIRE` / `EXPIREAT` / `PEXPIREAT`
    /// forms.
    Expire {
        key: &'a [u8],
        /// In ms: absolute, or (`relative`) from the batch's clock.
        ms: i64,
        relative: bool,
        flags: Flags,
        /// The command's name, for `invalid expire time in '<name>' command`.
        name: &'static str,
    },
    /// `TTL`, `PTTL`, `EXPIRETIME`, `PEXPIRETIME`.
    Ttl {
        key: &'a [u8],
        unit: Ttl,
    },
    Persist {
        key: &'a [u8],
    },
}

impl<'a> From<ExpiryCommand<'a>> for DataCommand<'a> {
    fn from(c: ExpiryCommand<'a>) -> Self {
        DataCommand::Expiry(c)
    }
}

/// What `TTL` and its siblings answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    Seconds,
    Ms,
    UnixSeconds,
    UnixMs,
}

fn ttl_of(args: Args<'_>, unit: Ttl) -> DataCommand<'_> {
    ExpiryCommand::Ttl {
        key: args.get(1),
        unit,
    }
    .into()
}

/// `expireGenericCommand`'s checks before it reads the key, in its order: the options, the
/// time an integer, seconds that overflow in ms. The addition of the clock to a relative
/// time is checked in apply ([`ExpiryCommand::apply`]), still before the key is read.
fn parse_expire<'a>(
    args: Args<'a>,
    name: &'static str,
    ms: bool,
    absolute: bool,
) -> Result<DataCommand<'a>, ParseError> {
    let flags = flags(&args)?;
    let mut at = integer(args.get(2))?;
    if !ms {
        at = at
            .checked_mul(1000)
            .ok_or_else(|| ParseError::Formatted(invalid_expire(name)))?;
    }
    Ok(ExpiryCommand::Expire {
        key: args.get(1),
        ms: at,
        relative: !absolute,
        flags,
        name,
    }
    .into())
}

impl ExpiryCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        match self {
            ExpiryCommand::Expire {
                key,
                ms,
                relative,
                flags,
                name,
            } => {
                let base = if relative { cx.now_ms() } else { 0 };
                // Redis refuses `when > LLONG_MAX - basetime` (with a non-negative base).
                let Some(at) = ms.checked_add(base) else {
                    cx.reply().error(&invalid_expire(name));
                    return Ok(());
                };
                expire(cx, key, at, flags).await
            }
            ExpiryCommand::Ttl { key, unit } => ttl(cx, key, unit).await,
            ExpiryCommand::Persist { key } => persist(cx, key).await,
        }
    }
}

/// The `NX`/`XX`/`GT`/`LT` flags of an `EXPIRE`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Flags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
}

/// An argument as Redis's C code sees it (`strcasecmp` on the object's string): up to its
/// first NUL byte.
fn c_string(a: &[u8]) -> &[u8] {
    a.iter().position(|&b| b == 0).map_or(a, |end| &a[..end])
}

/// Parses the options after the time (`parseExtendedExpireArgumentsOrReply`).
fn flags(args: &Args<'_>) -> Result<Flags, ParseError> {
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
            return Err(ParseError::Formatted(text));
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(ParseError::Text(NX_AND_OTHERS));
    }
    if f.gt && f.lt {
        return Err(ParseError::Text(GT_AND_LT));
    }
    Ok(f)
}

/// `ERR invalid expire time in '<cmd>' command`.
fn invalid_expire(name: &str) -> Vec<u8> {
    format!("invalid expire time in '{name}' command").into_bytes()
}

/// `EXPIRE`'s work once the time is known: `at` (Unix ms) set on the key `k`, or the key
/// deleted for a time not in the future.
async fn expire(cx: &mut Cx<'_>, k: &[u8], at: i64, f: Flags) -> Result<(), StoreError> {
    let now = cx.now_ms();
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
async fn ttl(cx: &mut Cx<'_>, k: &[u8], unit: Ttl) -> Result<(), StoreError> {
    let (ms, absolute) = match unit {
        Ttl::Seconds => (false, false),
        Ttl::Ms => (true, false),
        Ttl::UnixSeconds => (false, true),
        Ttl::UnixMs => (true, true),
    };
    let Some(row) = cx.tx.key_meta(cx.db, k, false).await? else {
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
async fn persist(cx: &mut Cx<'_>, k: &[u8]) -> Result<(), StoreError> {
    let removed = match cx.tx.key_meta(cx.db, k, true).await? {
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
mod tests;
