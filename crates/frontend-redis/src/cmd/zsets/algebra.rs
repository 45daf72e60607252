//! `ZUNION`, `ZINTER`, `ZDIFF`, their `STORE` forms and `ZINTERCARD`, as Redis's
//! `zunionInterDiffGenericCommand` runs them: every key is looked up first (a missing one is
//! empty, a set counts its members with score 1, any other type is `WRONGTYPE`), then the
//! options are refused if bad (Redis checks them after the keys), then the inputs are
//! loaded and combined here, in Redis's order (inputs by cardinality, weights applied, `SUM`
//! of `+inf` and `-inf` giving 0), so that scores come out bit for bit as Redis's. The
//! scores cannot be combined in SQL: `±inf` are `NULL` in the table and SQL's float
//! arithmetic is not Redis's. A `STORE` form locks the keys it reads and replaces its
//! destination (a new sorted set without TTL, deleted when the result is empty).
//!
//! Intended difference: the inputs are held in manifold's memory while the command runs
//! (Redis holds them too, in its own).

use std::collections::HashMap;

use manifold_backend::Param;

use super::parse::{Aggregate, Algebra, SetOp};
use super::{member_row, score, upsert};
use crate::cmd::checks;
use crate::store::context::Cx;
use crate::store::keys::{kind, KeyRow};
use crate::store::{take_bytes, StoreError};

/// One input: its members with their scores, and its weight.
struct Input {
    kid: Option<u64>,
    len: i64,
    weight: f64,
    members: Vec<(Vec<u8>, f64)>,
}

fn aggregate(target: &mut f64, val: f64, how: Aggregate) {
    match how {
        Aggregate::Sum => {
            *target += val;
            // Redis: `+inf` plus `-inf` is 0, not NaN.
            if target.is_nan() {
                *target = 0.0;
            }
        }
        Aggregate::Min => {
            if val < *target {
                *target = val;
            }
        }
        Aggregate::Max => {
            if val > *target {
                *target = val;
            }
        }
    }
}

async fn load(cx: &mut Cx<'_>, row: &KeyRow) -> Result<Vec<(Vec<u8>, f64)>, StoreError> {
    let params = [Param::UInt(row.kid)];
    if row.kind == kind::SET {
        let rows = cx
            .tx
            .rows("SELECT member FROM {s}.redis_set WHERE kid = ?", &params)
            .await?;
        return Ok(rows
            .into_iter()
            .filter_map(|mut r| Some((take_bytes(r.get_mut(0)?)?, 1.0)))
            .collect());
    }
    let rows = cx
        .tx
        .rows(
            "SELECT member, score, sk FROM {s}.redis_zset WHERE kid = ?",
            &params,
        )
        .await?;
    Ok(rows
        .into_iter()
        .filter_map(member_row)
        .map(|m| (m.member, m.score))
        .collect())
}

impl Algebra<'_> {
    pub(super) async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        let lock = self.dst.is_some();
        let mut rows = Vec::with_capacity(self.keys.len());
        for i in self.keys.clone() {
            let found = cx.tx.key_meta(cx.db, self.args.get(i), lock).await?;
            match found {
                Some(r) if r.kind != kind::ZSET && r.kind != kind::SET => {
                    let _ = checks::or_wrongtype::<()>(cx, Err(crate::store::keys::WrongType));
                    return Ok(());
                }
                found => rows.push(found),
            }
        }
        let options = match self.options {
            Ok(o) => o,
            Err(e) => {
                e.reply(cx);
                return Ok(());
            }
        };
        let mut inputs = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let weight = options.weights.get(i).copied().unwrap_or(1.0);
            inputs.push(match row {
                Some(r) => Input {
                    kid: Some(r.kid),
                    len: r.len,
                    weight,
                    members: load(cx, r).await?,
                },
                None => Input {
                    kid: None,
                    len: 0,
                    weight,
                    members: Vec::new(),
                },
            });
        }
        let mut result = combine(self.op, &mut inputs, options.aggregate);
        if options.card {
            let n = result.len() as i64;
            let limit = options.limit;
            cx.reply().integer(if limit > 0 { n.min(limit) } else { n });
            return Ok(());
        }
        result.sort_by(|a, b| {
            score::order_key(a.1)
                .cmp(&score::order_key(b.1))
                .then_with(|| a.0.cmp(&b.0))
        });
        if let Some(dst) = self.dst {
            if let Some(old) = cx.tx.key_meta(cx.db, dst, true).await? {
                cx.tx.delete_key(cx.db, dst, &old).await?;
            }
            if !result.is_empty() {
                let row = cx.tx.create_key(cx.db, dst, kind::ZSET).await?;
                let writes: Vec<(&[u8], f64)> =
                    result.iter().map(|(m, s)| (m.as_slice(), *s)).collect();
                upsert(cx, row.kid, &writes).await?;
                let n = writes.len() as i64;
                cx.tx.collection_written(cx.db, dst, &row, n).await?;
            }
            cx.reply().integer(result.len() as i64);
        } else {
            let nested = cx.proto == manifold_redis_proto::Protocol::Resp3;
            let ws = options.withscores;
            let mut r = cx.reply();
            r.array_len(if ws && !nested {
                result.len() * 2
            } else {
                result.len()
            });
            for (m, s) in &result {
                if ws && nested {
                    r.array_len(2);
                }
                r.bulk(m);
                if ws {
                    r.double(*s);
                }
            }
        }
        Ok(())
    }
}

/// `op` over `inputs`, as Redis combines them (unordered).
fn combine(op: SetOp, inputs: &mut [Input], how: Aggregate) -> Vec<(Vec<u8>, f64)> {
    if op != SetOp::Diff {
        // Redis sorts the inputs by cardinality (a stable sort in glibc): the order the
        // scores are summed in.
        inputs.sort_by_key(|i| i.len);
    }
    match op {
        SetOp::Union => {
            let mut acc: HashMap<Vec<u8>, f64> = HashMap::new();
            let mut order = Vec::new();
            for input in inputs.iter_mut() {
                let w = input.weight;
                for (m, s) in input.members.drain(..) {
                    let mut v = w * s;
                    if v.is_nan() {
                        v = 0.0;
                    }
                    if let Some(t) = acc.get_mut(&m) {
                        aggregate(t, v, how);
                    } else {
                        order.push(m.clone());
                        acc.insert(m, v);
                    }
                }
            }
            order
                .into_iter()
                .map(|m| {
                    let s = acc[&m];
                    (m, s)
                })
                .collect()
        }
        SetOp::Inter => {
            if inputs
                .iter()
                .any(|i| i.kid.is_none() || i.members.is_empty())
            {
                return Vec::new();
            }
            let lookups: Vec<HashMap<&[u8], f64>> = inputs[1..]
                .iter()
                .map(|i| i.members.iter().map(|(m, s)| (m.as_slice(), *s)).collect())
                .collect();
            let first = &inputs[0];
            let mut out = Vec::new();
            'members: for (m, s) in &first.members {
                let mut score = first.weight * s;
                if score.is_nan() {
                    score = 0.0;
                }
                for (j, other) in inputs[1..].iter().enumerate() {
                    if other.kid == first.kid {
                        aggregate(&mut score, s * other.weight, how);
                    } else if let Some(v) = lookups[j].get(m.as_slice()) {
                        aggregate(&mut score, v * other.weight, how);
                    } else {
                        continue 'members;
                    }
                }
                out.push((m.clone(), score));
            }
            out
        }
        SetOp::Diff => {
            let Some((first, rest)) = inputs.split_first_mut() else {
                return Vec::new();
            };
            if rest.iter().any(|i| i.kid.is_some() && i.kid == first.kid) {
                return Vec::new();
            }
            let others: std::collections::HashSet<&[u8]> = rest
                .iter()
                .flat_map(|i| i.members.iter().map(|(m, _)| m.as_slice()))
                .collect();
            first
                .members
                .iter()
                .filter(|(m, _)| !others.contains(m.as_slice()))
                .cloned()
                .collect()
        }
    }
}
