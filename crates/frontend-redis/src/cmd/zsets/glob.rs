//! `ZSCAN ... MATCH`'s patterns: Redis's `stringmatchlen` (case-sensitive), quirks included
//! (an empty string matches the empty pattern only; `[` without `]` runs to the end), as a
//! loop that backtracks to the last `*` only (what Redis's `skipLongerMatches` amounts to),
//! so no pattern can exhaust the stack. A private stand-in until a shared matcher lands.

/// The byte at `i`, or 0 past the end (where C reads the string's terminator).
fn at(p: &[u8], i: usize) -> u8 {
    p.get(i).copied().unwrap_or(0)
}

/// A `[...]` class at `p` (just past the `[`) against `c`: whether it matched, and where
/// the pattern goes on (past the `]`, or at its end).
fn class(pat: &[u8], mut p: usize, c: u8) -> (bool, usize) {
    let not = at(pat, p) == b'^';
    if not {
        p += 1;
    }
    let mut matched = false;
    loop {
        let left = pat.len().saturating_sub(p);
        if at(pat, p) == b'\\' && left >= 2 {
            p += 1;
            if at(pat, p) == c {
                matched = true;
            }
        } else if at(pat, p) == b']' {
            break;
        } else if left == 0 {
            // Unterminated: Redis steps back one so the common step lands on the end.
            p -= 1;
            break;
        } else if left >= 3 && at(pat, p + 1) == b'-' {
            let (mut start, mut end) = (at(pat, p), at(pat, p + 2));
            if start > end {
                std::mem::swap(&mut start, &mut end);
            }
            p += 2;
            if (start..=end).contains(&c) {
                matched = true;
            }
        } else if at(pat, p) == c {
            matched = true;
        }
        p += 1;
    }
    (matched != not, p + 1)
}

/// Whether `s` matches the glob `pat`, as Redis's `stringmatchlen(pat, s, 0)` answers.
pub fn glob_match(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    // The last `*`: the pattern after it, and where in `s` its match ends now.
    let mut star: Option<(usize, usize)> = None;
    if s.is_empty() {
        return pat.is_empty();
    }
    loop {
        // One step of the loop `while (patternLen && stringLen)`.
        let ok = if p >= pat.len() {
            false
        } else {
            match pat[p] {
                b'*' => {
                    while p + 1 < pat.len() && pat[p + 1] == b'*' {
                        p += 1;
                    }
                    if p + 1 == pat.len() {
                        return true;
                    }
                    star = Some((p + 1, i));
                    p += 1;
                    continue;
                }
                b'?' => {
                    i += 1;
                    p += 1;
                    true
                }
                b'[' => {
                    let (m, next) = class(pat, p + 1, s[i]);
                    if m {
                        i += 1;
                        p = next;
                    }
                    m
                }
                b => {
                    let (lit, next) = if b == b'\\' && pat.len() - p >= 2 {
                        (pat[p + 1], p + 2)
                    } else {
                        (b, p + 1)
                    };
                    let m = lit == s[i];
                    if m {
                        i += 1;
                        p = next;
                    }
                    m
                }
            }
        };
        if ok && i < s.len() {
            continue;
        }
        if ok {
            // The string is used up: trailing stars match nothing.
            while p < pat.len() && pat[p] == b'*' {
                p += 1;
            }
            if p >= pat.len() {
                return true;
            }
        }
        // No match from here: the last star takes one more byte, while one is left after.
        match star {
            Some((sp, si)) if si + 1 < s.len() => {
                star = Some((sp, si + 1));
                p = sp;
                i = si + 1;
            }
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn as_redis() {
        let cases: &[(&[u8], &[u8], bool)] = &[
            (b"*", b"abc", true),
            (b"a*", b"abc", true),
            (b"a*c", b"abc", true),
            (b"a*d", b"abc", false),
            (b"*b*", b"abc", true),
            (b"?b?", b"abc", true),
            (b"?", b"", false),
            (b"**", b"", false),
            (b"", b"", true),
            (b"[a-c]*", b"b1", true),
            (b"[^a-c]*", b"b1", false),
            (b"[c-a]", b"b", true),
            (b"\\*", b"*", true),
            (b"\\*", b"a", false),
            (b"[abc", b"c", true),
            (b"a[", b"a", false),
            (b"*a*a*a*a*b", b"aaaaaaaaaaaaaaaaaaaaaaaaa", false),
            (b"a*b*c", b"aXbYc", true),
            (b"a*", b"a", true),
            (b"a**", b"a", true),
            (b"a?", b"a", false),
            (b"[\\]]", b"]", true),
        ];
        for &(p, s, want) in cases {
            assert_eq!(
                glob_match(p, s),
                want,
                "{:?} {:?}",
                String::from_utf8_lossy(p),
                String::from_utf8_lossy(s)
            );
        }
    }
}
