//! `PFADD`, `PFCOUNT`, `PFMERGE`: HyperLogLogs kept as Redis keeps them, string values of
//! Redis's exact bytes ([`super::hll`]), so `GET` answers what redis-server answers and a
//! value copied from it (`SET k <bytes>`) counts the same here.
//!
//! Each command reads the whole value (at most 12304 bytes, a dense HLL) and writes it back
//! when a register or the cached count changed. `PFCOUNT` of one key stores the count it
//! computed in the header, as Redis does (so it is a write here: it runs in a transaction).

use super::hll::{self, REGISTERS};
use super::spec;
use super::{fetch, insert_value, update_value, Found};
use crate::cmd::data::Spec;
use crate::cmd::typed::DataCommand;
use crate::cmd::Args;
use crate::errors;
use crate::store::context::{Cx, RUN_MAX};
use crate::store::keys::kind;
use crate::store::StoreError;

/// A string that is no HLL.
const NOT_HLL: &[u8] = b"-WRONGTYPE Key is not a valid HyperLogLog string value.";
/// A value whose runs do not cover the registers.
const CORRUPT: &[u8] = b"-INVALIDOBJ Corrupted HLL object detected";

/// `PFCOUNT` is Redis's `readonly`, but stores the count it computes: a write here.
pub static COMMANDS: [Spec; 3] = [
    spec("pfadd", -2, true, |a| {
        Ok(HllCommand::PfAdd {
            key: a.get(1),
            args: a,
        }
        .into())
    }),
    spec("pfcount", -2, true, |a| {
        Ok(HllCommand::PfCount { keys: a }.into())
    }),
    spec("pfmerge", -2, true, |a| {
        Ok(HllCommand::PfMerge { keys: a }.into())
    }),
];

/// A HyperLogLog command, parsed (nothing to check before the data: the whole request is
/// kept, read in place).
#[derive(Debug, PartialEq)]
pub enum HllCommand<'a> {
    /// `PFADD key [element...]`: the elements from argument 2 on.
    PfAdd { key: &'a [u8], args: Args<'a> },
    /// `PFCOUNT key...`: the keys from argument 1 on.
    PfCount { keys: Args<'a> },
    /// `PFMERGE destkey [sourcekey...]`: the keys from argument 1 on.
    PfMerge { keys: Args<'a> },
}

impl<'a> From<HllCommand<'a>> for DataCommand<'a> {
    fn from(c: HllCommand<'a>) -> Self {
        DataCommand::Hll(c)
    }
}

impl HllCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        match self {
            HllCommand::PfAdd { key, args } => pfadd(cx, key, args).await,
            HllCommand::PfCount { keys } if keys.len() == 2 => pfcount_one(cx, keys.get(1)).await,
            HllCommand::PfCount { keys } => pfcount_many(cx, keys).await,
            HllCommand::PfMerge { keys } => pfmerge(cx, keys).await,
        }
    }
}

/// The live value of `k` locked for a write: `Ok(None)` absent, `Err(())` once a
/// `WRONGTYPE` (of either text) is replied.
async fn locked_hll(cx: &mut Cx<'_>, k: &[u8]) -> Result<Result<Option<Vec<u8>>, ()>, StoreError> {
    match cx.tx.key(cx.db, k, true).await? {
        None => Ok(Ok(None)),
        Some(row) if row.kind != kind::STRING => {
            cx.reply().error(errors::WRONGTYPE);
            Ok(Err(()))
        }
        Some(row) => {
            let v = row.v.unwrap_or_default();
            if hll::is_hll(&v) {
                Ok(Ok(Some(v)))
            } else {
                cx.reply().error(NOT_HLL);
                Ok(Err(()))
            }
        }
    }
}

/// `PFADD key [element...]`: 1 when a register changed (or the key was created), else 0.
async fn pfadd(cx: &mut Cx<'_>, k: &[u8], args: Args<'_>) -> Result<(), StoreError> {
    let Ok(found) = locked_hll(cx, k).await? else {
        return Ok(());
    };
    let existed = found.is_some();
    let mut v = found.unwrap_or_else(hll::new_sparse);
    let before = existed.then(|| v.clone());
    let mut updated = !existed;
    for element in args.from(2) {
        let Ok(changed) = hll::add(&mut v, element) else {
            // Redis changed the value in place up to the corrupt opcode: so here.
            if before.as_deref() != Some(&v[..]) {
                update_value(cx, k, &v).await?;
            }
            cx.reply().error(CORRUPT);
            return Ok(());
        };
        updated |= changed;
    }
    if updated {
        hll::invalidate(&mut v);
        if existed {
            update_value(cx, k, &v).await?;
        } else {
            insert_value(cx, k, &v, None).await?;
        }
    }
    cx.reply().integer(i64::from(updated));
    Ok(())
}

/// `PFCOUNT key`: the cached count, else the count computed and cached in the value.
async fn pfcount_one(cx: &mut Cx<'_>, k: &[u8]) -> Result<(), StoreError> {
    let Ok(found) = locked_hll(cx, k).await? else {
        return Ok(());
    };
    let Some(mut v) = found else {
        cx.reply().integer(0);
        return Ok(());
    };
    let card = if let Some(card) = hll::cached(&v) {
        card
    } else {
        let Ok(card) = hll::count(&v) else {
            cx.reply().error(CORRUPT);
            return Ok(());
        };
        hll::set_cached(&mut v, card);
        update_value(cx, k, &v).await?;
        // Its bytes changed (no keyspace event, as Redis): a client holding them forgets.
        cx.tx.touch(cx.db, k);
        card
    };
    cx.reply().integer(i64::try_from(card).unwrap_or(i64::MAX));
    Ok(())
}

/// The registers of the keys `keys` merged (absent keys are empty), in order; `None` once
/// the first bad key's error is replied. `dense`: one of them was dense.
async fn merged(
    cx: &mut Cx<'_>,
    keys: &[&[u8]],
    max: &mut [u8; REGISTERS],
) -> Result<Option<bool>, StoreError> {
    let mut dense = false;
    for chunk in keys.chunks(RUN_MAX) {
        for found in fetch(cx, chunk).await? {
            match found {
                Found::Nil => {}
                Found::WrongType => {
                    cx.reply().error(errors::WRONGTYPE);
                    return Ok(None);
                }
                Found::Value(v) if !hll::is_hll(&v) => {
                    cx.reply().error(NOT_HLL);
                    return Ok(None);
                }
                Found::Value(v) => {
                    dense |= hll::is_dense(&v);
                    if hll::merge_into(max, &v).is_err() {
                        cx.reply().error(CORRUPT);
                        return Ok(None);
                    }
                }
            }
        }
    }
    Ok(Some(dense))
}

/// `PFCOUNT key key...`: the count of the union, nothing cached.
async fn pfcount_many(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let keys: Vec<&[u8]> = args.from(1).collect();
    let mut max = Box::new([0u8; REGISTERS]);
    if merged(cx, &keys, &mut max).await?.is_some() {
        let card = hll::count_registers(&max);
        cx.reply().integer(i64::try_from(card).unwrap_or(i64::MAX));
    }
    Ok(())
}

/// `PFMERGE destkey [sourcekey...]`: the union into `destkey` (a source too), created
/// sparse when absent, made dense when a source is dense.
async fn pfmerge(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let dest = args.get(1);
    // The destination first, locked: it is the first key Redis checks, and it is written.
    let Ok(found) = locked_hll(cx, dest).await? else {
        return Ok(());
    };
    let mut max = Box::new([0u8; REGISTERS]);
    let mut dense = false;
    if let Some(v) = &found {
        dense = hll::is_dense(v);
        if hll::merge_into(&mut max, v).is_err() {
            cx.reply().error(CORRUPT);
            return Ok(());
        }
    }
    let sources: Vec<&[u8]> = args.from(2).collect();
    let Some(sources_dense) = merged(cx, &sources, &mut max).await? else {
        return Ok(());
    };
    let existed = found.is_some();
    let mut v = found.unwrap_or_else(hll::new_sparse);
    if hll::store_merged(&mut v, &max, dense || sources_dense).is_err() {
        cx.reply().error(CORRUPT);
        return Ok(());
    }
    if existed {
        update_value(cx, dest, &v).await?;
    } else {
        insert_value(cx, dest, &v, None).await?;
    }
    cx.reply().simple(b"OK");
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::cmd::typed::testing::{command, error};

    #[test]
    fn parse_forms_and_arity() {
        assert!(command(b"PFADD k\r\n").starts_with("Hll(PfAdd"));
        assert!(command(b"pfadd k a b\r\n").starts_with("Hll(PfAdd"));
        assert!(command(b"pfcount k1 k2\r\n").starts_with("Hll(PfCount"));
        assert!(command(b"PFMERGE d\r\n").starts_with("Hll(PfMerge"));
        for name in ["pfadd", "pfcount", "pfmerge"] {
            assert_eq!(
                error(format!("{name}\r\n").as_bytes()),
                format!("wrong number of arguments for '{name}' command")
            );
        }
    }
}
