//! `SSCAN key cursor [MATCH pattern] [COUNT count]`.
//!
//! Members are visited in the order of their hash: a page is the `COUNT` members from the
//! cursor on (`mh >= cursor's 8 bytes, zero-padded`, `ORDER BY mh`); the cursor returned is
//! the first 8 bytes (big-endian) of the next member's hash, `0` at the end. A member there
//! from the first call to the last is returned at least once (members sharing the cursor's
//! 8 bytes may come twice), as Redis promises. `MATCH` filters each page after it is read.
//!
//! The glob matcher is private to this module until the shared `cmd/glob.rs` lands.

use manifold_backend::Param;

use super::{lookup, member_row, set_or_reply};
use crate::cmd::Args;
use crate::errors;
use crate::exec::Cx;
use crate::store::keys::WrongType;
use crate::store::StoreError;

const INVALID_CURSOR: &[u8] = b"invalid cursor";

/// Redis's `parseScanCursorOrReply` (`strtoul`, base 10): optional sign, digits, nothing
/// else; no leading space; the empty string is 0; a `-` wraps around; overflow refused.
fn parse_cursor(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return Some(0);
    }
    let (neg, digits) = match s[0] {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(if neg { v.wrapping_neg() } else { v })
}

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`.
pub(super) async fn sscan(cx: &mut Cx<'_>, args: Args<'_>) -> Result<(), StoreError> {
    let Some(cursor) = parse_cursor(args.get(2)) else {
        cx.reply().error(INVALID_CURSOR);
        return Ok(());
    };
    let found = lookup(cx, args.get(1), false).await?;
    let Some(row) = set_or_reply!(cx, found) else {
        let mut reply = cx.reply();
        reply.array_len(2).bulk(b"0").array_len(0);
        return Ok(());
    };
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut i = 3;
    while i < args.len() {
        let opt = args.get(i);
        if opt.eq_ignore_ascii_case(b"count") && i + 1 < args.len() {
            match crate::cmd::parse_i64(args.get(i + 1)) {
                None => {
                    cx.reply().error(errors::NOT_INTEGER);
                    return Ok(());
                }
                Some(n) if n < 1 => {
                    cx.reply().error(errors::SYNTAX);
                    return Ok(());
                }
                Some(n) => count = n,
            }
            i += 2;
        } else if opt.eq_ignore_ascii_case(b"match") && i + 1 < args.len() {
            let p = args.get(i + 1);
            pattern = (p != b"*").then_some(p);
            i += 2;
        } else {
            cx.reply().error(errors::SYNTAX);
            return Ok(());
        }
    }
    let mut from = [0u8; 32];
    from[..8].copy_from_slice(&cursor.to_be_bytes());
    let want = u64::try_from(count).unwrap_or(1);
    let rows = cx
        .tx
        .rows(
            "SELECT mh, member FROM {s}.redis_set WHERE kid = ? AND mh >= ? ORDER BY mh LIMIT ?",
            &[
                Param::UInt(row.kid),
                Param::Bytes(&from),
                Param::UInt(want.saturating_add(1)),
            ],
        )
        .await?;
    let mut page: Vec<(super::Mh, Vec<u8>)> = rows.into_iter().filter_map(member_row).collect();
    let next = if page.len() as u64 > want {
        let rest = page.split_off(want as usize);
        let mut head = [0u8; 8];
        head.copy_from_slice(&rest[0].0[..8]);
        u64::from_be_bytes(head)
    } else {
        0
    };
    let members: Vec<&[u8]> = page
        .iter()
        .map(|(_, m)| m.as_slice())
        .filter(|m| pattern.is_none_or(|p| glob_match(p, m)))
        .collect();
    let mut reply = cx.reply();
    reply
        .array_len(2)
        .bulk(next.to_string().as_bytes())
        .array_len(members.len());
    for m in members {
        reply.bulk(m);
    }
    Ok(())
}

/// Deepest nesting of `*` the matcher follows (Redis 7.2's bound; deeper never matches).
const MAX_NESTING: usize = 1000;

/// Redis's `stringmatchlen` (case-sensitive): `*`, `?`, `[...]` with `^`, ranges and `\`
/// escapes, `\` escapes outside. Bytes past the pattern's end read as NUL, as C reads the
/// terminator.
pub(super) fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    let mut skip_longer = false;
    matches(pattern, s, &mut skip_longer, 0)
}

fn matches(pattern: &[u8], s: &[u8], skip_longer: &mut bool, nesting: usize) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    let at = |p: &[u8], i: usize| p.get(i).copied().unwrap_or(0);
    let (mut p, mut plen) = (0usize, pattern.len());
    let (mut q, mut slen) = (0usize, s.len());
    while plen > 0 && slen > 0 {
        match at(pattern, p) {
            b'*' => {
                while plen > 0 && at(pattern, p + 1) == b'*' {
                    p += 1;
                    plen -= 1;
                }
                if plen == 1 {
                    return true;
                }
                while slen > 0 {
                    let rest = pattern.get(p + 1..).unwrap_or_default();
                    if matches(
                        rest,
                        s.get(q..).unwrap_or_default(),
                        skip_longer,
                        nesting + 1,
                    ) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    q += 1;
                    slen -= 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => {
                q += 1;
                slen -= 1;
            }
            b'[' => {
                p += 1;
                plen -= 1;
                let not = at(pattern, p) == b'^';
                if not {
                    p += 1;
                    plen -= 1;
                }
                let c = at(s, q);
                let mut matched = false;
                loop {
                    let pc = at(pattern, p);
                    if pc == b'\\' && plen >= 2 {
                        p += 1;
                        plen -= 1;
                        if at(pattern, p) == c {
                            matched = true;
                        }
                    } else if pc == b']' {
                        break;
                    } else if plen == 0 {
                        p -= 1;
                        plen += 1;
                        break;
                    } else if plen >= 3 && at(pattern, p + 1) == b'-' {
                        // C's `char` is signed here: bytes over 127 sort below 0.
                        let signed = |b: u8| i32::from(b as i8);
                        let (mut start, mut end) = (signed(pc), signed(at(pattern, p + 2)));
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        p += 2;
                        plen -= 2;
                        if (start..=end).contains(&signed(c)) {
                            matched = true;
                        }
                    } else if pc == c {
                        matched = true;
                    }
                    p += 1;
                    plen -= 1;
                }
                if not {
                    matched = !matched;
                }
                if !matched {
                    return false;
                }
                q += 1;
                slen -= 1;
            }
            first => {
                let mut pc = first;
                if pc == b'\\' && plen >= 2 {
                    p += 1;
                    plen -= 1;
                    pc = at(pattern, p);
                }
                if pc != at(s, q) {
                    return false;
                }
                q += 1;
                slen -= 1;
            }
        }
        p += 1;
        plen = plen.saturating_sub(1);
        if slen == 0 {
            while at(pattern, p) == b'*' && plen > 0 {
                p += 1;
                plen -= 1;
            }
            break;
        }
    }
    plen == 0 && slen == 0
}

#[cfg(test)]
mod tests {
    use super::{glob_match, parse_cursor};

    #[test]
    fn glob_as_redis() {
        assert!(glob_match(b"*", b"anything"));
        assert!(glob_match(b"a*", b"abc"));
        assert!(!glob_match(b"a*", b"bac"));
        assert!(glob_match(b"*c", b"abc"));
        assert!(glob_match(b"a?c", b"abc"));
        assert!(!glob_match(b"a?c", b"ac"));
        assert!(glob_match(b"[abc]x", b"bx"));
        assert!(!glob_match(b"[^abc]x", b"bx"));
        assert!(glob_match(b"[a-c]x", b"bx"));
        assert!(glob_match(b"[c-a]x", b"bx"));
        assert!(glob_match(b"a\\*", b"a*"));
        assert!(!glob_match(b"a\\*", b"ab"));
        assert!(glob_match(b"[\\]]", b"]"));
        assert!(glob_match(b"*a*b*c", b"xxaxxbxxc"));
        assert!(!glob_match(b"*a*b*c", b"xxaxxbxx"));
        assert!(glob_match(b"ab*", b"ab"));
        assert!(!glob_match(b"[ab", b"x"));
        assert!(glob_match(b"[ab", b"a"));
        assert!(!glob_match(b"", b"a"));
        assert!(glob_match(b"", b""));
        let deep: Vec<u8> = b"*a".repeat(5000);
        assert!(!glob_match(&deep, &b"a".repeat(100)));
    }

    #[test]
    fn cursors_as_strtoul() {
        assert_eq!(parse_cursor(b""), Some(0));
        assert_eq!(parse_cursor(b"0"), Some(0));
        assert_eq!(parse_cursor(b"007"), Some(7));
        assert_eq!(parse_cursor(b"+5"), Some(5));
        assert_eq!(parse_cursor(b"-1"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551616"), None);
        assert_eq!(parse_cursor(b" 1"), None);
        assert_eq!(parse_cursor(b"1 "), None);
        assert_eq!(parse_cursor(b"-"), None);
        assert_eq!(parse_cursor(b"x"), None);
    }
}
