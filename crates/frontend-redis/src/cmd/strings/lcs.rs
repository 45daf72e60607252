//! `LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]`, Redis 7.0's `lcsCommand`:
//! the same dynamic-programming table and the same walk back from its end, so the matches
//! come out in Redis's order (last first).
//!
//! Bound: the table holds `(len1 + 1) * (len2 + 1)` 32-bit cells, as in Redis. redis-server
//! refuses only when the allocation fails; the door refuses beyond [`MAX_CELLS`] cells
//! (128 MiB of table) with [`TOO_BIG`], so one request cannot take the gateway's memory.

use crate::errors;
use crate::store::context::Cx;
use crate::store::keys::kind;
use crate::store::StoreError;

/// The most table cells one `LCS` may use: 32 Mi cells, 128 MiB.
pub const MAX_CELLS: u64 = 32 * 1024 * 1024;
/// Beyond [`MAX_CELLS`].
pub const TOO_BIG: &[u8] =
    b"Insufficient memory, transient memory for LCS exceeds the door's limit";
const NOT_STRINGS: &[u8] = b"The specified keys must contain string values";
const LEN_AND_IDX: &[u8] = b"If you want both the length and indexes, please just use IDX.";

/// The options, parsed; checked by Redis only after the keys' types.
#[derive(Debug, PartialEq, Default, Clone, Copy)]
pub struct LcsOptions {
    pub len: bool,
    pub idx: bool,
    pub min_match_len: u64,
    pub with_match_len: bool,
}

/// Parses the options after the two keys; an error is its text, answered after the type check.
pub fn parse_options(rest: &[&[u8]]) -> Result<LcsOptions, &'static [u8]> {
    let mut o = LcsOptions::default();
    let mut j = 0;
    while j < rest.len() {
        let opt = rest[j];
        let more = j + 1 < rest.len();
        if opt.eq_ignore_ascii_case(b"idx") {
            o.idx = true;
        } else if opt.eq_ignore_ascii_case(b"len") {
            o.len = true;
        } else if opt.eq_ignore_ascii_case(b"withmatchlen") {
            o.with_match_len = true;
        } else if opt.eq_ignore_ascii_case(b"minmatchlen") && more {
            let n = crate::cmd::typed::integer(rest[j + 1]).map_err(|_| errors::NOT_INTEGER)?;
            o.min_match_len = u64::try_from(n).unwrap_or(0);
            j += 1;
        } else {
            return Err(errors::SYNTAX);
        }
        j += 1;
    }
    if o.idx && o.len {
        return Err(LEN_AND_IDX);
    }
    Ok(o)
}

/// `LCS`: reads both strings (absent is empty), then answers as Redis.
pub async fn lcs(
    cx: &mut Cx<'_>,
    k1: &[u8],
    k2: &[u8],
    opts: Result<LcsOptions, &'static [u8]>,
) -> Result<(), StoreError> {
    let a = cx.tx.key(cx.db, k1, false).await?;
    let b = cx.tx.key(cx.db, k2, false).await?;
    if a.as_ref().is_some_and(|r| r.kind != kind::STRING)
        || b.as_ref().is_some_and(|r| r.kind != kind::STRING)
    {
        cx.reply().error(NOT_STRINGS);
        return Ok(());
    }
    let opts = match opts {
        Ok(o) => o,
        Err(text) => {
            cx.reply().error(text);
            return Ok(());
        }
    };
    let a = a.and_then(|r| r.v).unwrap_or_default();
    let b = b.and_then(|r| r.v).unwrap_or_default();
    let cells = (a.len() as u64 + 1).saturating_mul(b.len() as u64 + 1);
    if cells > MAX_CELLS {
        cx.reply().error(TOO_BIG);
        return Ok(());
    }
    answer(cx, &a, &b, opts);
    Ok(())
}

/// One match range: `(a_start, a_end, b_start, b_end)`.
type Range = (usize, usize, usize, usize);

/// The LCS string and the ranges Redis would emit (before the `MINMATCHLEN` filter).
pub fn compute(a: &[u8], b: &[u8], want_string: bool) -> (usize, Vec<u8>, Vec<Range>) {
    let (alen, blen) = (a.len(), b.len());
    let w = blen + 1;
    let mut dp = vec![0u32; (alen + 1) * w];
    for i in 1..=alen {
        for j in 1..=blen {
            dp[i * w + j] = if a[i - 1] == b[j - 1] {
                dp[(i - 1) * w + j - 1] + 1
            } else {
                dp[(i - 1) * w + j].max(dp[i * w + j - 1])
            };
        }
    }
    let total = dp[alen * w + blen] as usize;
    let mut result = vec![0u8; if want_string { total } else { 0 }];
    let mut ranges = Vec::new();
    if !want_string {
        return (total, result, ranges);
    }
    let mut idx = total;
    let (mut i, mut j) = (alen, blen);
    // `alen` as a start means "no range open", as in Redis.
    let (mut as_, mut ae, mut bs, mut be) = (alen, 0usize, 0usize, 0usize);
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            result[idx - 1] = a[i - 1];
            if as_ == alen {
                as_ = i - 1;
                ae = i - 1;
                bs = j - 1;
                be = j - 1;
            } else if as_ == i && bs == j {
                as_ -= 1;
                bs -= 1;
            } else {
                emit = true;
            }
            if as_ == 0 || bs == 0 {
                emit = true;
            }
            idx -= 1;
            i -= 1;
            j -= 1;
        } else {
            if dp[(i - 1) * w + j] > dp[i * w + j - 1] {
                i -= 1;
            } else {
                j -= 1;
            }
            if as_ != alen {
                emit = true;
            }
        }
        if emit {
            ranges.push((as_, ae, bs, be));
            as_ = alen;
        }
    }
    (total, result, ranges)
}

fn answer(cx: &mut Cx<'_>, a: &[u8], b: &[u8], o: LcsOptions) {
    let (total, result, ranges) = compute(a, b, o.idx || !o.len);
    let mut r = cx.reply();
    if o.idx {
        let kept: Vec<&Range> = ranges
            .iter()
            .filter(|(s, e, _, _)| o.min_match_len == 0 || (e - s + 1) as u64 >= o.min_match_len)
            .collect();
        r.map_len(2).bulk(b"matches").array_len(kept.len());
        for &&(s, e, bs, be) in &kept {
            r.array_len(2 + usize::from(o.with_match_len));
            r.array_len(2).integer(s as i64).integer(e as i64);
            r.array_len(2).integer(bs as i64).integer(be as i64);
            if o.with_match_len {
                r.integer((e - s + 1) as i64);
            }
        }
        r.bulk(b"len").integer(total as i64);
    } else if o.len {
        r.integer(total as i64);
    } else {
        r.bulk(&result);
    }
}
