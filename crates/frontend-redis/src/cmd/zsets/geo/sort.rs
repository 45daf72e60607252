//! The two sorts a geo search's results go through in redis-server 7.0.15, ported so that
//! points at the same distance come out in Redis's order: glibc's `qsort` (a merge sort in
//! glibc 2.36, Debian 12's, which keeps equal points in the order found) when every result
//! is returned, Redis's `pqsort` (a partial quicksort, `pqsort.c`, which does not) when
//! `COUNT` returns fewer. The comparison is Redis's `sort_gp_asc`/`sort_gp_desc` on
//! distances, which calls a NaN distance smaller than anything, as C does.

use std::cmp::Ordering;

/// `sort_gp_asc`: 1, 0 or -1 as `a` is farther, as far or (also when one is NaN) nearer.
pub fn asc(a: f64, b: f64) -> Ordering {
    a.partial_cmp(&b).unwrap_or(Ordering::Less)
}

/// `sort_gp_desc`.
pub fn desc(a: f64, b: f64) -> Ordering {
    asc(a, b).reverse()
}

/// glibc's `msort_with_tmp`: top-down merge sort taking from the left run while it is not
/// greater. Never panics, whatever `cmp` answers.
pub fn merge_sort<T: Clone>(v: &mut [T], cmp: &impl Fn(&T, &T) -> Ordering) {
    if v.len() <= 1 {
        return;
    }
    let mut tmp = v.to_vec();
    merge_sort_with(v, &mut tmp, cmp);
}

fn merge_sort_with<T: Clone>(v: &mut [T], tmp: &mut [T], cmp: &impl Fn(&T, &T) -> Ordering) {
    let n = v.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    merge_sort_with(&mut v[..n1], &mut tmp[..n1], cmp);
    merge_sort_with(&mut v[n1..], &mut tmp[n1..], cmp);
    let (mut i, mut j, mut out) = (0, n1, 0);
    while i < n1 && j < n {
        if cmp(&v[i], &v[j]) == Ordering::Greater {
            tmp[out] = v[j].clone();
            j += 1;
        } else {
            tmp[out] = v[i].clone();
            i += 1;
        }
        out += 1;
    }
    while i < n1 {
        tmp[out] = v[i].clone();
        i += 1;
        out += 1;
    }
    // What is left of the right run is in place already.
    v[..out].clone_from_slice(&tmp[..out]);
}

/// Redis's `pqsort(a, n, size, cmp, lrange, rrange)`: sorts enough of `v` that the
/// elements at `lrange..=rrange` are the ones a full sort puts there, in its order up to
/// ties.
pub fn partial_sort<T>(
    v: &mut [T],
    cmp: &impl Fn(&T, &T) -> Ordering,
    lrange: usize,
    rrange: usize,
) {
    pqsort(v, 0, v.len(), cmp, lrange, rrange);
}

fn med3<T>(v: &[T], a: usize, b: usize, c: usize, cmp: &impl Fn(&T, &T) -> Ordering) -> usize {
    let lt = |x: usize, y: usize| cmp(&v[x], &v[y]) == Ordering::Less;
    let gt = |x: usize, y: usize| cmp(&v[x], &v[y]) == Ordering::Greater;
    if lt(a, b) {
        if lt(b, c) {
            b
        } else if lt(a, c) {
            c
        } else {
            a
        }
    } else if gt(b, c) {
        b
    } else if lt(a, c) {
        a
    } else {
        c
    }
}

/// `vecswap`: the `n` elements from `a` with the `n` from `b`.
fn vecswap<T>(v: &mut [T], a: usize, b: usize, n: usize) {
    for i in 0..n {
        v.swap(a + i, b + i);
    }
}

/// `_pqsort` on the `n` elements of `v` from `a`, indices for pointers (`lrange`, `rrange`:
/// the elements whose order matters).
fn pqsort<T>(
    v: &mut [T],
    mut a: usize,
    mut n: usize,
    cmp: &impl Fn(&T, &T) -> Ordering,
    lrange: usize,
    rrange: usize,
) {
    // Whether the `n` elements from `a` hold some of `lrange..=rrange`.
    let overlaps = |a: usize, n: usize| !(rrange < a || lrange >= a + n);
    loop {
        if n < 7 {
            for pm in a + 1..a + n {
                let mut pl = pm;
                while pl > a && cmp(&v[pl - 1], &v[pl]) == Ordering::Greater {
                    v.swap(pl, pl - 1);
                    pl -= 1;
                }
            }
            return;
        }
        let mut pm = a + n / 2;
        if n > 7 {
            let mut pl = a;
            let mut pn = a + n - 1;
            if n > 40 {
                let d = n / 8;
                pl = med3(v, pl, pl + d, pl + 2 * d, cmp);
                pm = med3(v, pm - d, pm, pm + d, cmp);
                pn = med3(v, pn - 2 * d, pn - d, pn, cmp);
            }
            pm = med3(v, pl, pm, pn, cmp);
        }
        v.swap(a, pm);
        let (mut pa, mut pb) = (a + 1, a + 1);
        let (mut pc, mut pd) = (a + n - 1, a + n - 1);
        loop {
            while pb <= pc {
                let c = cmp(&v[pb], &v[a]);
                if c == Ordering::Greater {
                    break;
                }
                if c == Ordering::Equal {
                    v.swap(pa, pb);
                    pa += 1;
                }
                pb += 1;
            }
            while pb <= pc {
                let c = cmp(&v[pc], &v[a]);
                if c == Ordering::Less {
                    break;
                }
                if c == Ordering::Equal {
                    v.swap(pc, pd);
                    pd -= 1;
                }
                pc -= 1;
            }
            if pb > pc {
                break;
            }
            v.swap(pb, pc);
            pb += 1;
            pc -= 1;
        }
        let pn = a + n;
        let r = (pa - a).min(pb - pa);
        vecswap(v, a, pb - r, r);
        let r = (pd - pc).min(pn - pd - 1);
        vecswap(v, pb, pn - r, r);
        let r = pb - pa;
        if r > 1 && overlaps(a, r) {
            pqsort(v, a, r, cmp, lrange, rrange);
        }
        let r = pd - pc;
        if r > 1 {
            a = pn - r;
            n = r;
            if overlaps(a, n) {
                continue;
            }
        }
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_key(a: &(f64, u32), b: &(f64, u32)) -> Ordering {
        asc(a.0, b.0)
    }

    #[test]
    fn merge_sort_keeps_ties_in_order() {
        let mut v: Vec<(f64, u32)> = [3.0, 1.0, 3.0, 2.0, 1.0, 3.0]
            .iter()
            .enumerate()
            .map(|(i, &d)| (d, i as u32))
            .collect();
        merge_sort(&mut v, &by_key);
        let order: Vec<u32> = v.iter().map(|p| p.1).collect();
        assert_eq!(order, [1, 4, 3, 0, 2, 5]);
        // A NaN is "less" than everything and nothing is less than it: no panic.
        let mut w = vec![(f64::NAN, 0), (1.0, 1), (f64::NAN, 2), (0.5, 3)];
        merge_sort(&mut w, &by_key);
        assert_eq!(w.len(), 4);
    }

    #[test]
    fn partial_sort_puts_the_nearest_first() {
        let mut seed = 12_345u64;
        for n in [1usize, 5, 7, 8, 30, 41, 100, 500] {
            for count in [1usize, 2, 10, 50] {
                let count = count.min(n);
                let mut v: Vec<(f64, u32)> = (0..n)
                    .map(|i| {
                        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                        (((seed >> 33) % 20) as f64, i as u32)
                    })
                    .collect();
                let mut full: Vec<f64> = v.iter().map(|p| p.0).collect();
                full.sort_by(|a, b| a.partial_cmp(b).unwrap());
                partial_sort(&mut v, &by_key, 0, count - 1);
                let got: Vec<f64> = v[..count].iter().map(|p| p.0).collect();
                assert_eq!(got, full[..count], "n {n} count {count}");
            }
        }
    }
}
