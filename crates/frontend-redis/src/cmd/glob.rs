//! Redis's glob patterns (`stringmatchlen` of `src/util.c`, 7.0): what `KEYS`, `SCAN ...
//! MATCH`, `HSCAN`/`SSCAN`/`ZSCAN ... MATCH` and `PSUBSCRIBE` match names with.
//!
//! - `*` any run of bytes (`**` is one `*`), `?` any one byte, `\x` the byte `x`;
//! - `[abc]` one of the bytes, `[^abc]` none of them, `[a-z]` a range (either way round:
//!   `[z-a]` is `[a-z]`), `[\]]` an escaped byte; a `[` with no `]` takes the rest of the
//!   pattern as its set; a `\` ending the pattern is a literal `\`;
//! - the empty string matches the empty pattern only: Redis's `*` needs at least one byte
//!   there (`KEYS *` and `SCAN` without `MATCH` skip the matcher, so they do list the empty
//!   key).
//!
//! Redis matches by recursion at each `*`; here the pattern is read once into elements that
//! each take one byte (or a `*`), then matched with only the last `*` to go back to: the same
//! answers, at most pattern × text steps, no recursion whatever the client sends.
//!
//! redis-server 7.0.15 (as 7.2) stops its recursion past [`MAX_NESTING`] nested `*`: a
//! pattern whose `*` (a run of them counting as one) number 1001 is not its last element
//! matches nothing, which is what that limit amounts to; so does this one.

/// Redis's bound on nested `*` in `stringmatchlen_impl`.
const MAX_NESTING: usize = 1000;

/// One element of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Elem {
    Star,
    Any,
    Byte(u8),
    Set { negated: bool, items: Vec<Item> },
}

/// One item of a `[...]` set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Item {
    Byte(u8),
    /// `\x` in a set: compared exactly, even without case.
    Escaped(u8),
    /// `a-z`, as written (bounds in any order).
    Range(u8, u8),
}

/// A pattern read once, to match many names.
#[derive(Debug, Clone)]
pub struct Glob {
    elems: Vec<Elem>,
    nocase: bool,
    /// Past Redis's nesting limit: matches nothing (but the empty name, as any pattern).
    dead: bool,
}

impl Glob {
    /// `pattern`, matched with case (`nocase`: ASCII letters in any case, as Redis's
    /// `stringmatchlen(..., 1)`, which `CONFIG GET` uses).
    pub fn new(pattern: &[u8], nocase: bool) -> Self {
        let elems = parse(pattern);
        let dead = elems
            .iter()
            .enumerate()
            .filter(|(_, e)| **e == Elem::Star)
            .nth(MAX_NESTING)
            .is_some_and(|(at, _)| at + 1 < elems.len());
        Self {
            elems,
            nocase,
            dead,
        }
    }

    /// `s` matches the whole pattern.
    pub fn matches(&self, s: &[u8]) -> bool {
        if s.is_empty() {
            return self.elems.is_empty();
        }
        if self.dead {
            return false;
        }
        let elems = &self.elems;
        let (mut p, mut i) = (0, 0);
        // After the last `*`: where the pattern resumes, and the text it took up to.
        let mut star: Option<(usize, usize)> = None;
        while i < s.len() {
            match elems.get(p) {
                Some(Elem::Star) => {
                    p += 1;
                    star = Some((p, i));
                    continue;
                }
                Some(e) if self.one(e, s[i]) => {
                    p += 1;
                    i += 1;
                    continue;
                }
                _ => {}
            }
            let Some((after, took)) = star else {
                return false;
            };
            // The last `*` takes one more byte.
            star = Some((after, took + 1));
            p = after;
            i = took + 1;
        }
        elems[p.min(elems.len())..].iter().all(|e| *e == Elem::Star)
    }

    /// The element `e` (not a `*`) takes the byte `c`.
    fn one(&self, e: &Elem, c: u8) -> bool {
        let low = |b: u8| {
            if self.nocase {
                b.to_ascii_lowercase()
            } else {
                b
            }
        };
        match e {
            Elem::Star => false,
            Elem::Any => true,
            Elem::Byte(b) => low(*b) == low(c),
            Elem::Set { negated, items } => {
                let hit = items.iter().any(|item| match *item {
                    Item::Byte(b) => low(b) == low(c),
                    Item::Escaped(b) => b == c,
                    Item::Range(a, b) => {
                        let (start, end) = (low(a.min(b)), low(a.max(b)));
                        (start..=end).contains(&low(c))
                    }
                });
                hit != *negated
            }
        }
    }
}

/// Reads a pattern as Redis's matcher walks it.
fn parse(p: &[u8]) -> Vec<Elem> {
    let n = p.len();
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        match p[i] {
            b'*' => {
                while i + 1 < n && p[i + 1] == b'*' {
                    i += 1;
                }
                out.push(Elem::Star);
            }
            b'?' => out.push(Elem::Any),
            b'[' => {
                i += 1;
                let negated = i < n && p[i] == b'^';
                if negated {
                    i += 1;
                }
                let mut items = Vec::new();
                loop {
                    if i + 2 <= n && p[i] == b'\\' {
                        i += 1;
                        items.push(Item::Escaped(p[i]));
                    } else if i < n && p[i] == b']' {
                        break;
                    } else if i >= n {
                        // No `]`: the set took the rest of the pattern.
                        i = n - 1;
                        break;
                    } else if i + 3 <= n && p[i + 1] == b'-' {
                        items.push(Item::Range(p[i], p[i + 2]));
                        i += 2;
                    } else {
                        items.push(Item::Byte(p[i]));
                    }
                    i += 1;
                }
                out.push(Elem::Set { negated, items });
            }
            b'\\' => {
                if i + 2 <= n {
                    i += 1;
                }
                out.push(Elem::Byte(p[i]));
            }
            b => out.push(Elem::Byte(b)),
        }
        i += 1;
    }
    out
}

/// `s` matches the glob `pattern`, with case (Redis's `stringmatchlen(..., 0)`).
pub fn glob_match(pattern: &[u8], s: &[u8]) -> bool {
    Glob::new(pattern, false).matches(s)
}

#[cfg(test)]
mod tests {
    use super::{glob_match, Glob};

    /// Redis 7.0's `stringmatchlen_impl`, transliterated (recursive, reading the pattern's
    /// terminating NUL as C does): the reference the matcher is checked against.
    fn redis(p: &[u8], s: &[u8], nocase: bool) -> bool {
        fn at(p: &[u8], i: usize) -> u8 {
            p.get(i).copied().unwrap_or(0)
        }
        fn go(p: &[u8], mut pi: usize, s: &[u8], mut si: usize, nocase: bool) -> bool {
            let low = |b: u8| if nocase { b.to_ascii_lowercase() } else { b };
            let (mut plen, mut slen) = (p.len() - pi, s.len() - si);
            while plen > 0 && slen > 0 {
                match p[pi] {
                    b'*' => {
                        while plen > 0 && at(p, pi + 1) == b'*' {
                            pi += 1;
                            plen -= 1;
                        }
                        if plen == 1 {
                            return true;
                        }
                        while slen > 0 {
                            if go(p, pi + 1, s, si, nocase) {
                                return true;
                            }
                            si += 1;
                            slen -= 1;
                        }
                        return false;
                    }
                    b'?' => {
                        si += 1;
                        slen -= 1;
                    }
                    b'[' => {
                        pi += 1;
                        plen -= 1;
                        let not = at(p, pi) == b'^';
                        if not {
                            pi += 1;
                            plen -= 1;
                        }
                        let mut m = false;
                        loop {
                            if at(p, pi) == b'\\' && plen >= 2 {
                                pi += 1;
                                plen -= 1;
                                if p[pi] == s[si] {
                                    m = true;
                                }
                            } else if at(p, pi) == b']' {
                                break;
                            } else if plen == 0 {
                                pi -= 1;
                                plen += 1;
                                break;
                            } else if plen >= 3 && p[pi + 1] == b'-' {
                                let (mut a, mut b) = (p[pi], p[pi + 2]);
                                if a > b {
                                    std::mem::swap(&mut a, &mut b);
                                }
                                let c = low(s[si]);
                                pi += 2;
                                plen -= 2;
                                if c >= low(a) && c <= low(b) {
                                    m = true;
                                }
                            } else if low(p[pi]) == low(s[si]) {
                                m = true;
                            }
                            pi += 1;
                            plen -= 1;
                        }
                        if not {
                            m = !m;
                        }
                        if !m {
                            return false;
                        }
                        si += 1;
                        slen -= 1;
                    }
                    c => {
                        let mut c = c;
                        if c == b'\\' && plen >= 2 {
                            pi += 1;
                            plen -= 1;
                            c = p[pi];
                        }
                        if low(c) != low(s[si]) {
                            return false;
                        }
                        si += 1;
                        slen -= 1;
                    }
                }
                pi += 1;
                plen -= 1;
                if slen == 0 {
                    while at(p, pi) == b'*' {
                        pi += 1;
                        plen -= 1;
                    }
                    break;
                }
            }
            plen == 0 && slen == 0
        }
        go(p, 0, s, 0, nocase)
    }

    #[test]
    fn redis_examples() {
        assert!(glob_match(b"h?llo", b"hello"));
        assert!(glob_match(b"h*llo", b"heeeello"));
        assert!(glob_match(b"h[ae]llo", b"hallo"));
        assert!(!glob_match(b"h[ae]llo", b"hillo"));
        assert!(glob_match(b"h[^e]llo", b"hallo"));
        assert!(!glob_match(b"h[^e]llo", b"hello"));
        assert!(glob_match(b"h[a-b]llo", b"hbllo"));
        assert!(
            glob_match(b"h[b-a]llo", b"hallo"),
            "a range either way round"
        );
        assert!(!glob_match(b"h[a-b]llo", b"hcllo"));
        assert!(glob_match(b"\\*x", b"*x"));
        assert!(!glob_match(b"\\*x", b"ax"));
        assert!(glob_match(b"[\\]]", b"]"));
        assert!(glob_match(b"a\\", b"a\\"), "a final backslash is itself");
        assert!(!glob_match(b"HELLO", b"hello"), "with case");
        assert!(Glob::new(b"HE[L-L]?O", true).matches(b"hello"));
        assert!(glob_match(b"*", b"anything"));
        assert!(glob_match(b"", b""));
        assert!(
            !glob_match(b"*", b""),
            "Redis's * needs a byte of an empty name"
        );
        assert!(!glob_match(b"", b"a"));
        assert!(glob_match(b"a*", b"a"));
        assert!(glob_match(b"a**b", b"ab"));
        // A `[` with no `]` takes the rest of the pattern as its set.
        assert!(glob_match(b"[abc", b"b"));
        assert!(!glob_match(b"[abc", b"["));
        assert!(
            !glob_match(b"x[", b"x["),
            "an empty unclosed set matches nothing"
        );
        assert!(glob_match(b"[a-]", b"^"), "`a-]` is the range ]..a");
        assert!(glob_match(b"k\xff*", b"k\xff\x00"), "bytes, not text");
    }

    #[test]
    fn same_answers_as_redis() {
        // Every pattern and name over a small alphabet, then random longer ones.
        let alphabet = b"ab*?[]^-\\";
        let mut patterns: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            let next: Vec<Vec<u8>> = patterns
                .iter()
                .flat_map(|p| {
                    alphabet.iter().map(move |&c| {
                        let mut q = p.clone();
                        q.push(c);
                        q
                    })
                })
                .collect();
            patterns.extend(next);
            patterns.dedup();
        }
        let names: Vec<&[u8]> = vec![
            b"", b"a", b"b", b"ab", b"ba", b"aab", b"*", b"[", b"]", b"^", b"-", b"\\", b"a]",
            b"a-b", b"[a", b"A", b"bA",
        ];
        for p in &patterns {
            let glob = Glob::new(p, false);
            let nocase = Glob::new(p, true);
            for s in &names {
                assert_eq!(glob.matches(s), redis(p, s, false), "{p:?} {s:?}");
                assert_eq!(nocase.matches(s), redis(p, s, true), "nocase {p:?} {s:?}");
            }
        }
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let chars = b"abAB*?[]^-\\z";
        for _ in 0..20_000 {
            let plen = (next() % 10) as usize;
            let slen = (next() % 10) as usize;
            let p: Vec<u8> = (0..plen)
                .map(|_| chars[(next() % chars.len() as u64) as usize])
                .collect();
            let s: Vec<u8> = (0..slen).map(|_| chars[(next() % 6) as usize]).collect();
            assert_eq!(glob_match(&p, &s), redis(&p, &s, false), "{p:?} {s:?}");
        }
    }

    #[test]
    fn a_hostile_pattern_is_cheap() {
        // Exponential for a plain recursive matcher, and deep enough to overflow its stack.
        let mut many = b"*a".repeat(60);
        many.push(b'z');
        assert!(!glob_match(&many, &[b'a'; 64]));
        assert!(glob_match(&vec![b'*'; 200_000], b"key"));
        assert!(!glob_match(&b"[".repeat(100_000), b"k"));
    }

    #[test]
    fn nesting_bounded_as_redis_server() {
        // What redis-server 7.0.15 answers for `KEYS` over a key of 1100 `a`.
        let key = [b'a'; 1100];
        assert!(glob_match(&b"*a".repeat(1000), &key));
        assert!(!glob_match(&b"*a".repeat(1001), &key));
        let mut last = b"*a".repeat(1000);
        last.extend_from_slice(b"**");
        assert!(glob_match(&last, &key), "star 1001 ends the pattern");
        assert!(!glob_match(&b"**a".repeat(1001), &key));
        assert!(
            glob_match(&b"\\*a".repeat(1001), &b"*a".repeat(1001)),
            "escaped stars do not nest"
        );
    }
}
