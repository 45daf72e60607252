//! `INCR`, `DECR`, `INCRBY`, `DECRBY`, `INCRBYFLOAT`: the string read locked, the new value
//! written over it keeping its TTL (or a new key without one).

use super::{parse_i64, store_value};
use crate::cmd::longdouble::{self, Ld, Parsed};
use crate::errors;
use crate::store::context::Cx;
use crate::store::keys::kind;
use crate::store::StoreError;

/// Adds `by` to the integer in `k` (0 when absent), replying the sum.
pub async fn incr_by(cx: &mut Cx<'_>, k: &[u8], by: i64) -> Result<(), StoreError> {
    let row = cx.tx.key(cx.db, k, true).await?;
    let old = match &row {
        None => 0,
        Some(r) if r.kind != kind::STRING => {
            cx.reply().error(errors::WRONGTYPE);
            return Ok(());
        }
        Some(r) => {
            let Some(v) = parse_i64(r.v.as_deref().unwrap_or_default()) else {
                cx.reply().error(errors::NOT_INTEGER);
                return Ok(());
            };
            v
        }
    };
    let Some(new) = old.checked_add(by) else {
        cx.reply().error(errors::INCR_OVERFLOW);
        return Ok(());
    };
    store_value(cx, k, row.is_some(), new.to_string().as_bytes()).await?;
    cx.reply().integer(new);
    Ok(())
}

/// `INCRBYFLOAT key increment` (`by`: `None` when the increment is not a number, refused
/// here after the key's type and value, as Redis orders them): the sum as redis-server
/// computes and writes it.
pub async fn incrbyfloat(cx: &mut Cx<'_>, k: &[u8], by: Option<Parsed>) -> Result<(), StoreError> {
    let row = cx.tx.key(cx.db, k, true).await?;
    // Redis's order: the type, the value, then the increment.
    let value = match &row {
        None => Some(Parsed::Finite(Ld::default())),
        Some(r) if r.kind != kind::STRING => {
            cx.reply().error(errors::WRONGTYPE);
            return Ok(());
        }
        Some(r) => longdouble::parse(r.v.as_deref().unwrap_or_default()),
    };
    let (Some(value), Some(by)) = (value, by) else {
        cx.reply().error(errors::NOT_FLOAT);
        return Ok(());
    };
    let Some(text) = longdouble::incr(value, by) else {
        cx.reply().error(errors::INCR_NAN_OR_INF);
        return Ok(());
    };
    store_value(cx, k, row.is_some(), &text).await?;
    cx.reply().bulk(&text);
    Ok(())
}
