//! `HSCAN ... MATCH`'s pattern: Redis's `stringmatchlen` (`src/util.c`, 7.0), case
//! sensitive. A stopgap private to the hash commands until the shared `cmd/glob.rs` lands.
//!
//! The C code reads one byte past the pattern's end (its NUL terminator); `at` answers 0
//! there the same way. Unlike 7.0 (as 7.2 does), nesting of `*` is bounded, so a pattern of
//! a great many `*` cannot exhaust the stack: past [`MAX_NESTING`] it does not match.

/// Most nested `*` expansions.
const MAX_NESTING: usize = 1000;

/// Whether `s` matches the glob `pattern`.
pub fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    let mut skip_longer = false;
    matches(pattern, s, &mut skip_longer, 0)
}

fn matches(pattern: &[u8], string: &[u8], skip_longer: &mut bool, nesting: usize) -> bool {
    if nesting > MAX_NESTING {
        return false;
    }
    let at = |i: usize| pattern.get(i).copied().unwrap_or(0);
    let (mut p, mut plen) = (0usize, pattern.len());
    let (mut si, mut slen) = (0usize, string.len());
    while plen > 0 && slen > 0 {
        let sc = string.get(si).copied().unwrap_or(0);
        match at(p) {
            b'*' => {
                while plen > 0 && at(p + 1) == b'*' {
                    p += 1;
                    plen -= 1;
                }
                if plen == 1 {
                    return true;
                }
                while slen > 0 {
                    let rest_p = pattern.get(p + 1..).unwrap_or_default();
                    let rest_s = string.get(si..).unwrap_or_default();
                    if matches(rest_p, rest_s, skip_longer, nesting + 1) {
                        return true;
                    }
                    if *skip_longer {
                        return false;
                    }
                    si += 1;
                    slen -= 1;
                }
                *skip_longer = true;
                return false;
            }
            b'?' => {
                si += 1;
                slen -= 1;
            }
            b'[' => {
                p += 1;
                plen -= 1;
                let not = at(p) == b'^';
                if not {
                    p += 1;
                    plen = plen.saturating_sub(1);
                }
                let mut hit = false;
                loop {
                    if at(p) == b'\\' && plen >= 2 {
                        p += 1;
                        plen -= 1;
                        if at(p) == sc {
                            hit = true;
                        }
                    } else if at(p) == b']' {
                        break;
                    } else if plen == 0 {
                        p -= 1;
                        plen += 1;
                        break;
                    } else if plen >= 3 && at(p + 1) == b'-' {
                        let (mut start, mut end) = (at(p), at(p + 2));
                        if start > end {
                            std::mem::swap(&mut start, &mut end);
                        }
                        p += 2;
                        plen -= 2;
                        if sc >= start && sc <= end {
                            hit = true;
                        }
                    } else if at(p) == sc {
                        hit = true;
                    }
                    p += 1;
                    plen = plen.saturating_sub(1);
                }
                if not {
                    hit = !hit;
                }
                if !hit {
                    return false;
                }
                si += 1;
                slen -= 1;
            }
            c => {
                let c = if c == b'\\' && plen >= 2 {
                    p += 1;
                    plen -= 1;
                    at(p)
                } else {
                    c
                };
                if c != sc {
                    return false;
                }
                si += 1;
                slen -= 1;
            }
        }
        p += 1;
        plen = plen.saturating_sub(1);
        if slen == 0 {
            while at(p) == b'*' && plen > 0 {
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
    use super::glob_match;

    #[test]
    fn globs() {
        let yes = [
            ("*", "abc"),
            ("a*", "abc"),
            ("*c", "abc"),
            ("a?c", "abc"),
            ("[ab]bc", "bbc"),
            ("[^x]bc", "abc"),
            ("[a-c]x", "bx"),
            ("[c-a]x", "bx"),
            ("a\\*", "a*"),
            ("f*o*", "foo"),
            ("", ""),
            ("a**", "a"),
        ];
        for (p, s) in yes {
            assert!(glob_match(p.as_bytes(), s.as_bytes()), "{p} {s}");
        }
        let no = [
            ("a", "b"),
            ("a?", "a"),
            ("[^a]", "a"),
            ("*x", "abc"),
            ("[ab", "c"),
            ("", "a"),
        ];
        for (p, s) in no {
            assert!(!glob_match(p.as_bytes(), s.as_bytes()), "{p} {s}");
        }
        let deep = "*a".repeat(5000);
        assert!(!glob_match(deep.as_bytes(), "b".repeat(3000).as_bytes()));
    }
}
