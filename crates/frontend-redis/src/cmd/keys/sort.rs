//! `SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]
//! [STORE destination]` and `SORT_RO` (the same without `STORE`), as Redis 7.0's sort.c.
//!
//! The source collection (list, set or sorted set) is read in the command's transaction
//! and sorted here, as Redis sorts it in memory. `BY` and `GET` keys are read in the same
//! transaction, [`RUN_MAX`] elements per statement (strings through [`strings::fetch`],
//! hash fields with one join). A list or sorted set that is not sorted (`BY` without `*`)
//! reads only its `LIMIT` range. What the command holds (the elements, their `BY` values,
//! the list a `STORE` writes) is bounded by `proto-max-bulk-len` ([`held_max`]): past it the
//! command is refused ([`TOO_LARGE`]). The reply is written as the `GET`s are read and stops
//! once it passes the client's output limit (the client is then closed without it).
//!
//! Comparisons are Redis's on Debian (glibc 2.36, `C.UTF-8`/`C` collation): numbers with
//! ties broken by the elements' bytes; `ALPHA` by `strcmp` (bytes up to the first NUL),
//! or `memcmp` with `STORE`; equal elements keep the order they were read in (glibc's
//! `qsort` is a merge sort).
//!
//! Intended differences from Redis 7.0:
//! - `BY` with no `*` (`nosort`) on a set sorts it `ALPHA`, as Redis does with `STORE` or
//!   in a script; Redis's plain reply is in its hash table's order (unspecified);
//! - elements Redis compares equal (`ALPHA` with `BY` values that are equal or missing)
//!   keep the order they were read in: a set's and a sorted set's are the door's, and with
//!   `BY` and a `LIMIT` Redis's partial quicksort (`pqsort`) leaves their order unspecified.

use std::cmp::Ordering;

use manifold_backend::Param;

use std::ops::ControlFlow;

use manifold_mysql_proto::packets::Value;

use crate::cmd::data::{Family, Spec};
use crate::cmd::lists::{push_values, Side};
use crate::cmd::sqltext::{marks, padded, statement};
use crate::cmd::strings::{self, Found};
use crate::cmd::typed::{integer, DataCommand, ParseError, SYNTAX};
use crate::cmd::zsets::parse_sort_weight;
use crate::cmd::Args;
use crate::errors;
use crate::store::context::{Cx, RUN_MAX};
use crate::store::keys::{hash, kind, KeyRow};
use crate::store::{int, take_bytes, StoreError};

pub static COMMANDS: [Spec; 2] = [
    Spec {
        name: "sort",
        arity: -2,
        write: true,
        family: Family::Keys,
        parse: |a| parse(a, false),
    },
    Spec {
        name: "sort_ro",
        arity: -2,
        write: false,
        family: Family::Keys,
        parse: |a| parse(a, true),
    },
];

/// A weight `strtod` does not read whole (sort.c's text).
const NOT_DOUBLE: &[u8] = b"One or more scores can't be converted into double";
/// What the command would hold passes [`held_max`].
pub const TOO_LARGE: &[u8] = b"manifold: SORT needs more memory than proto-max-bulk-len allows";
/// Bytes counted per element held, beyond its own (its vector slot, weight, `BY` value).
const ELEMENT_OVERHEAD: usize = 64;

/// Most bytes one `SORT` may hold: the door's `proto-max-bulk-len` (64 MiB by default).
fn held_max() -> usize {
    usize::try_from(strings::max_value_len()).unwrap_or(usize::MAX)
}

/// `SORT`'s options, parsed.
#[derive(Debug, PartialEq)]
pub struct Sort<'a> {
    pub key: &'a [u8],
    pub desc: bool,
    pub alpha: bool,
    /// `LIMIT offset count` (Redis's defaults: 0, -1).
    pub start: i64,
    pub count: i64,
    pub by: Option<&'a [u8]>,
    /// `BY` without a `*`: the elements are not sorted.
    pub dont_sort: bool,
    pub gets: Vec<&'a [u8]>,
    pub store: Option<&'a [u8]>,
}

/// Redis's parse loop: `STORE` is unknown to `SORT_RO` (a syntax error).
fn parse(args: Args<'_>, read_only: bool) -> Result<DataCommand<'_>, ParseError> {
    let mut s = Sort {
        key: args.get(1),
        desc: false,
        alpha: false,
        start: 0,
        count: -1,
        by: None,
        dont_sort: false,
        gets: Vec::new(),
        store: None,
    };
    let mut j = 2;
    while j < args.len() {
        let a = args.get(j);
        let left = args.len() - j - 1;
        if a.eq_ignore_ascii_case(b"asc") {
            s.desc = false;
        } else if a.eq_ignore_ascii_case(b"desc") {
            s.desc = true;
        } else if a.eq_ignore_ascii_case(b"alpha") {
            s.alpha = true;
        } else if a.eq_ignore_ascii_case(b"limit") && left >= 2 {
            s.start = integer(args.get(j + 1))?;
            s.count = integer(args.get(j + 2))?;
            j += 2;
        } else if !read_only && a.eq_ignore_ascii_case(b"store") && left >= 1 {
            s.store = Some(args.get(j + 1));
            j += 1;
        } else if a.eq_ignore_ascii_case(b"by") && left >= 1 {
            let p = args.get(j + 1);
            s.by = Some(p);
            s.dont_sort = !c_string(p).contains(&b'*');
            j += 1;
        } else if a.eq_ignore_ascii_case(b"get") && left >= 1 {
            s.gets.push(args.get(j + 1));
            j += 1;
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    Ok(super::KeyCommand::Sort(s).into())
}

/// One element being sorted: the element, its numeric weight or its `BY` value.
struct Item {
    obj: Vec<u8>,
    score: f64,
    cmp: Option<Vec<u8>>,
}

/// A `BY`/`GET` pattern, as `lookupKeyByPattern` reads it.
enum Pattern<'a> {
    /// `#`: the element itself.
    Element,
    /// No `*`: nothing (a constant key "does not make sense").
    Nothing,
    /// The key is `prefix` + element + `suffix`: a string's value, or with `field` (`->f`
    /// after the `*`, `f` not empty) that field of a hash.
    Key {
        prefix: &'a [u8],
        suffix: &'a [u8],
        field: Option<&'a [u8]>,
    },
}

impl<'a> Pattern<'a> {
    fn new(p: &'a [u8]) -> Self {
        // C sees the pattern up to its first NUL.
        let c = c_string(p);
        if c == b"#" {
            return Pattern::Element;
        }
        let Some(star) = c.iter().position(|&b| b == b'*') else {
            return Pattern::Nothing;
        };
        // The field goes to the pattern's end (its whole length: sdslen), the key's
        // suffix stops at the `->`.
        let after = &p[star + 1..];
        let arrow = c[star + 1..].windows(2).position(|w| w == b"->");
        match arrow {
            Some(f) if f + 2 < after.len() && star + 1 + f + 2 < c.len() => Pattern::Key {
                prefix: &p[..star],
                suffix: &after[..f],
                field: Some(&after[f + 2..]),
            },
            _ => Pattern::Key {
                prefix: &p[..star],
                suffix: after,
                field: None,
            },
        }
    }
}

statement! {
    /// One field of each of `n` (a power of two) hashes, by key hash.
    fn select_fields = "SELECT k.k, k.type, h.v, k.expire_at FROM {{s}}.redis_keys k \
        LEFT JOIN {{s}}.redis_hash h ON h.kid = k.kid AND h.fh = ? \
        WHERE k.db = ? AND k.kh IN ({})", |n| marks(n)
}

/// The values `pattern` finds for each of `elements` (at most [`RUN_MAX`]), in order:
/// `None` where the key is absent, expired, of another type, or the field is missing.
async fn lookup(
    cx: &mut Cx<'_>,
    pattern: &Pattern<'_>,
    elements: &[&[u8]],
) -> Result<Vec<Option<Vec<u8>>>, StoreError> {
    let (prefix, suffix, field) = match *pattern {
        Pattern::Element => return Ok(elements.iter().map(|e| Some(e.to_vec())).collect()),
        Pattern::Nothing => return Ok(vec![None; elements.len()]),
        Pattern::Key {
            prefix,
            suffix,
            field,
        } => (prefix, suffix, field),
    };
    let keys: Vec<Vec<u8>> = elements
        .iter()
        .map(|e| [prefix, e, suffix].concat())
        .collect();
    let Some(field) = field else {
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        return Ok(strings::fetch(cx, &refs)
            .await?
            .into_iter()
            .map(|f| match f {
                Found::Value(v) => Some(v),
                Found::Nil | Found::WrongType => None,
            })
            .collect());
    };
    let n = padded(keys.len());
    let hashes: Vec<[u8; 32]> = keys.iter().map(|k| hash(k)).collect();
    let fh = hash(field);
    let mut params = Vec::with_capacity(n + 2);
    params.push(Param::Bytes(&fh));
    params.push(Param::UInt(u64::from(cx.db)));
    let last = hashes.len().saturating_sub(1);
    params.extend((0..n).filter_map(|i| hashes.get(i.min(last)).map(|h| Param::Bytes(h))));
    let rows = cx.tx.rows(select_fields(n), &params).await?;
    let now = cx.now_ms();
    Ok(keys
        .iter()
        .map(|k| {
            let row = rows
                .iter()
                .find(|r| matches!(&r[0], Value::Bytes(b) if b == k))?;
            if int(&row[3]).is_some_and(|at| at <= now)
                || int(&row[1]) != Some(i64::from(kind::HASH))
            {
                return None;
            }
            match &row[2] {
                Value::Bytes(b) => Some(b.clone()),
                Value::Null => None,
                other => take_bytes(&mut other.clone()),
            }
        })
        .collect())
}

/// The elements of `row` (type `t`) in the SQL order given, read until they would hold
/// more than `budget` bytes (`None` then).
async fn read_elements(
    cx: &mut Cx<'_>,
    sql: &str,
    params: &[Param<'_>],
    budget: &mut usize,
) -> Result<Option<Vec<Item>>, StoreError> {
    let mut items = Vec::new();
    let mut over = false;
    cx.tx
        .exec_each(sql, params, |mut r| {
            let obj = r.get_mut(0).and_then(take_bytes).unwrap_or_default();
            let cost = obj.len() + ELEMENT_OVERHEAD;
            if cost > *budget {
                over = true;
                return ControlFlow::Break(());
            }
            *budget -= cost;
            items.push(Item {
                obj,
                score: 0.0,
                cmp: None,
            });
            ControlFlow::Continue(())
        })
        .await?;
    Ok((!over).then_some(items))
}

/// The bytes C sees of an argument: up to its first NUL.
fn c_string(s: &[u8]) -> &[u8] {
    s.split(|&b| b == 0).next().unwrap_or_default()
}

/// C's `strcmp` (and `strcoll` under the `C`/`C.UTF-8` collation).
fn c_string_cmp(a: &[u8], b: &[u8]) -> Ordering {
    c_string(a).cmp(c_string(b))
}

/// Redis's LIMIT arithmetic over `len` elements: the first and last positions to output
/// (`end < start`: none).
fn limits(len: i64, limit_start: i64, limit_count: i64) -> (i64, i64) {
    let mut start = limit_start.max(0).min(len);
    let count = limit_count.max(-1).min(len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    if end >= len {
        end = len - 1;
    }
    (start, end)
}

/// Runs `SORT`/`SORT_RO`, following sort.c step by step.
pub async fn sort(cx: &mut Cx<'_>, s: Sort<'_>) -> Result<(), StoreError> {
    let storing = s.store.is_some();
    // Locked when storing: the elements stay as they are until the list is written.
    let row = cx.tx.key_meta(cx.db, s.key, storing).await?;
    let t = match &row {
        Some(r) if ![kind::LIST, kind::SET, kind::ZSET].contains(&r.kind) => {
            cx.reply().error(errors::WRONGTYPE);
            return Ok(());
        }
        Some(r) => r.kind,
        None => kind::LIST,
    };
    let (mut dont_sort, mut alpha, mut by) = (s.dont_sort, s.alpha, s.by);
    if dont_sort && t == kind::SET {
        // Redis sorts a set `ALPHA` when storing or in a script, so the result does not
        // depend on its hash table; the door does so always (its set order is its own).
        (dont_sort, alpha, by) = (false, true, None);
    }
    let mut budget = held_max();
    let Some((items, start, end)) = read(cx, row.as_ref(), t, &s, dont_sort, &mut budget).await?
    else {
        cx.reply().error(TOO_LARGE);
        return Ok(());
    };
    let mut items = items;
    if !dont_sort {
        let mut not_double = false;
        let by_pattern = by.map(Pattern::new);
        for from in (0..items.len()).step_by(RUN_MAX) {
            let to = (from + RUN_MAX).min(items.len());
            let values: Vec<Option<Vec<u8>>> = match &by_pattern {
                Some(p) => {
                    let objs: Vec<&[u8]> = items[from..to].iter().map(|i| &i.obj[..]).collect();
                    lookup(cx, p, &objs).await?
                }
                None => vec![None; to - from],
            };
            for (it, val) in items[from..to].iter_mut().zip(values) {
                let val = match (&by_pattern, val) {
                    (Some(_), None) => continue,
                    (Some(_), Some(v)) => v,
                    (None, _) => {
                        if !alpha {
                            match parse_sort_weight(&it.obj) {
                                Some(v) => it.score = v,
                                None => not_double = true,
                            }
                        }
                        continue;
                    }
                };
                if alpha {
                    if val.len() > budget {
                        cx.reply().error(TOO_LARGE);
                        return Ok(());
                    }
                    budget -= val.len();
                    it.cmp = Some(val);
                } else {
                    match parse_sort_weight(&val) {
                        Some(v) => it.score = v,
                        None => not_double = true,
                    }
                }
            }
        }
        let (by_pattern, desc) = (by.is_some(), s.desc);
        items.sort_by(|a, b| {
            let c = if !alpha {
                a.score
                    .partial_cmp(&b.score)
                    .unwrap_or(Ordering::Equal)
                    .then_with(|| a.obj.cmp(&b.obj))
            } else if by_pattern {
                match (&a.cmp, &b.cmp) {
                    (Some(x), Some(y)) if storing => x.cmp(y),
                    (Some(x), Some(y)) => c_string_cmp(x, y),
                    (None, None) => Ordering::Equal,
                    (None, _) => Ordering::Less,
                    (_, None) => Ordering::Greater,
                }
            } else if storing {
                a.obj.cmp(&b.obj)
            } else {
                c_string_cmp(&a.obj, &b.obj)
            };
            if desc {
                c.reverse()
            } else {
                c
            }
        });
        if not_double {
            cx.reply().error(NOT_DOUBLE);
            return Ok(());
        }
    }
    let span: &[Item] = if end >= start {
        let to = (end as usize + 1).min(items.len());
        items.get(start as usize..to).unwrap_or_default()
    } else {
        &[]
    };
    let gets: Vec<Pattern<'_>> = s.gets.iter().map(|p| Pattern::new(p)).collect();
    match s.store {
        None => reply(cx, span, &gets).await,
        Some(dst) => {
            let Some(values) = stored_values(cx, span, &gets, &mut budget).await? else {
                cx.reply().error(TOO_LARGE);
                return Ok(());
            };
            store(cx, dst, &values).await?;
            cx.reply().integer(values.len() as i64);
            Ok(())
        }
    }
}

/// Reads the elements to sort: a list or sorted set not sorted, only its `LIMIT` range (in
/// the order asked); else the whole collection. Returns them with the positions to output
/// among them, or `None` past `budget`.
async fn read(
    cx: &mut Cx<'_>,
    row: Option<&KeyRow>,
    t: u8,
    s: &Sort<'_>,
    dont_sort: bool,
    budget: &mut usize,
) -> Result<Option<(Vec<Item>, i64, i64)>, StoreError> {
    let Some(row) = row else {
        return Ok(Some((Vec::new(), 0, -1)));
    };
    let len = if t == kind::LIST {
        row.ltail - row.lhead
    } else {
        row.len
    };
    if dont_sort {
        let (start, end) = limits(len, s.start, s.count);
        if end < start {
            return Ok(Some((Vec::new(), 0, -1)));
        }
        let items = if t == kind::LIST {
            // Redis walks from `start` (from the tail with `DESC`).
            let (lo, hi, sql) = if s.desc {
                (
                    row.lhead + len - 1 - end,
                    row.lhead + len - 1 - start,
                    "SELECT v FROM {s}.redis_list WHERE kid = ? AND idx BETWEEN ? AND ? ORDER BY idx DESC",
                )
            } else {
                (
                    row.lhead + start,
                    row.lhead + end,
                    "SELECT v FROM {s}.redis_list WHERE kid = ? AND idx BETWEEN ? AND ? ORDER BY idx",
                )
            };
            let params = [Param::UInt(row.kid), Param::Int(lo), Param::Int(hi)];
            read_elements(cx, sql, &params, budget).await?
        } else {
            let sql = if s.desc {
                "SELECT member FROM {s}.redis_zset WHERE kid = ? ORDER BY sk DESC, member DESC LIMIT ? OFFSET ?"
            } else {
                "SELECT member FROM {s}.redis_zset WHERE kid = ? ORDER BY sk, member LIMIT ? OFFSET ?"
            };
            let params = [
                Param::UInt(row.kid),
                Param::Int(end - start + 1),
                Param::Int(start),
            ];
            read_elements(cx, sql, &params, budget).await?
        };
        return Ok(items.map(|items| {
            let last = items.len() as i64 - 1;
            (items, 0, last)
        }));
    }
    let sql = match t {
        kind::LIST => "SELECT v FROM {s}.redis_list WHERE kid = ? ORDER BY idx",
        kind::SET => "SELECT member FROM {s}.redis_set WHERE kid = ?",
        _ => "SELECT member FROM {s}.redis_zset WHERE kid = ? ORDER BY sk, member",
    };
    let Some(items) = read_elements(cx, sql, &[Param::UInt(row.kid)], budget).await? else {
        return Ok(None);
    };
    let (start, end) = limits(items.len() as i64, s.start, s.count);
    Ok(Some((items, start, end)))
}

/// The reply without `STORE`: each element, or what each `GET` finds for it (nil where
/// nothing), written [`RUN_MAX`] elements at a time until the client's output limit.
async fn reply(cx: &mut Cx<'_>, span: &[Item], gets: &[Pattern<'_>]) -> Result<(), StoreError> {
    cx.reply().array_len(span.len() * gets.len().max(1));
    for chunk in span.chunks(RUN_MAX) {
        if cx.over_limit() {
            break;
        }
        if gets.is_empty() {
            let mut r = cx.reply();
            for it in chunk {
                r.bulk(&it.obj);
            }
            continue;
        }
        let objs: Vec<&[u8]> = chunk.iter().map(|i| &i.obj[..]).collect();
        let mut found = Vec::with_capacity(gets.len());
        for p in gets {
            found.push(lookup(cx, p, &objs).await?);
        }
        let mut r = cx.reply();
        for i in 0..chunk.len() {
            for f in &mut found {
                match f[i].take() {
                    Some(v) => r.bulk(&v),
                    None => r.null(),
                };
            }
        }
        cx.note_memory();
    }
    Ok(())
}

/// What `STORE` writes: each element, or what each `GET` finds for it (an empty string
/// where nothing); `None` past `budget`.
async fn stored_values(
    cx: &mut Cx<'_>,
    span: &[Item],
    gets: &[Pattern<'_>],
    budget: &mut usize,
) -> Result<Option<Vec<Vec<u8>>>, StoreError> {
    let mut values = Vec::with_capacity(span.len() * gets.len().max(1));
    for chunk in span.chunks(RUN_MAX) {
        let objs: Vec<&[u8]> = chunk.iter().map(|i| &i.obj[..]).collect();
        if gets.is_empty() {
            values.extend(objs.iter().map(|o| o.to_vec()));
        } else {
            let mut found = Vec::with_capacity(gets.len());
            for p in gets {
                found.push(lookup(cx, p, &objs).await?);
            }
            for i in 0..chunk.len() {
                for f in &mut found {
                    values.push(f[i].take().unwrap_or_default());
                }
            }
        }
        let added: usize = values
            .iter()
            .rev()
            .take(chunk.len() * gets.len().max(1))
            .map(|v| v.len() + ELEMENT_OVERHEAD)
            .sum();
        if added > *budget {
            return Ok(None);
        }
        *budget -= added;
    }
    Ok(Some(values))
}

/// `STORE`: the destination, of any type, is replaced by a list of `values` without TTL,
/// or deleted when there are none; clients blocked on it are woken once this commits.
async fn store(cx: &mut Cx<'_>, dst: &[u8], values: &[Vec<u8>]) -> Result<(), StoreError> {
    let db = cx.db;
    if let Some(old) = cx.tx.key_meta(db, dst, true).await? {
        if values.is_empty() {
            cx.tx.delete_key(db, dst, &old).await?;
            return Ok(());
        }
        // Written over: its `del` is not Redis's (`setKey`), the `sortstore` is.
        cx.tx.delete_key_quietly(db, dst, &old).await?;
    }
    if values.is_empty() {
        return Ok(());
    }
    let row = cx.tx.create_key(db, dst, kind::LIST).await?;
    let refs: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    push_values(cx, dst, &row, Side::Right, &refs).await?;
    Ok(())
}

#[cfg(test)]
mod tests;
