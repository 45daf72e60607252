//! HyperLogLog as Redis 7.0 keeps it, byte for byte: a string value of a 16-byte header
//! (`HYLL`, the encoding, three unused bytes, the cached cardinality in 8 little-endian
//! bytes whose top bit marks it stale) and 16384 registers, either dense (6 bits each,
//! packed from the low bits up) or sparse (run-length opcodes `ZERO`, `XZERO`, `VAL`),
//! promoted from sparse to dense past `hll-sparse-max-bytes` (3000) or when a register
//! passes 32. Elements are hashed with MurmurHash64A (seed `0xadc83b19`), as Redis does, so
//! a value written here reads the same in redis-server and the reverse.
//!
//! Pure functions on the value's bytes, no database: the commands are in [`super::pf`].

/// The header: magic, encoding, 3 unused bytes, 8 bytes of cached cardinality.
pub const HEADER: usize = 16;
/// Registers (`2^14`).
pub const REGISTERS: usize = 1 << P;
/// Bits of the hash that choose the register.
const P: u32 = 14;
/// Bits of the hash left for the run of zeros.
const Q: u32 = 64 - P;
/// A dense value's exact length.
pub const DENSE_SIZE: usize = HEADER + (REGISTERS * 6).div_ceil(8);
/// `hll-sparse-max-bytes`, Redis's default: a sparse value grows no larger.
pub const SPARSE_MAX_BYTES: usize = 3000;
/// The largest register a sparse `VAL` opcode holds.
const SPARSE_VAL_MAX_VALUE: u8 = 32;
/// The longest run of a `VAL` opcode.
const SPARSE_VAL_MAX_LEN: usize = 4;
/// The longest run of a `ZERO` opcode.
const SPARSE_ZERO_MAX_LEN: usize = 64;
/// The longest run of an `XZERO` opcode.
const SPARSE_XZERO_MAX_LEN: usize = 16384;

const DENSE: u8 = 0;
const SPARSE: u8 = 1;

/// A value that is not a well-formed HLL of its encoding (Redis's `INVALIDOBJ`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt;

/// Redis's `MurmurHash64A` (little-endian reads, as on the machines Redis runs on).
pub fn murmur64a(data: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = u64::from(seed) ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes(c.try_into().unwrap_or_default());
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// Redis's `hllPatLen`: the register an element goes to and its run of zeros plus one.
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, 0xadc8_3b19);
    let index = (hash & (REGISTERS as u64 - 1)) as usize;
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// An empty HLL as `PFADD` creates it: sparse, one `XZERO` of every register, cache 0.
pub fn new_sparse() -> Vec<u8> {
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(b"HYLL");
    v.push(SPARSE);
    v.extend_from_slice(&[0; 11]);
    let mut left = REGISTERS;
    while left > 0 {
        let run = left.min(SPARSE_XZERO_MAX_LEN);
        push_xzero(&mut v, run);
        left -= run;
    }
    v
}

/// Redis's `isHLLObjectOrReply` on a string: the magic, a known encoding, a dense value's
/// exact length.
pub fn is_hll(v: &[u8]) -> bool {
    v.len() >= HEADER
        && &v[..4] == b"HYLL"
        && v[4] <= SPARSE
        && (v[4] != DENSE || v.len() == DENSE_SIZE)
}

/// Whether the value is dense (checked by [`is_hll`] first).
pub fn is_dense(v: &[u8]) -> bool {
    v[4] == DENSE
}

/// The cached cardinality, unless marked stale.
pub fn cached(v: &[u8]) -> Option<u64> {
    let card = u64::from_le_bytes(v[8..16].try_into().ok()?);
    (v[15] & 0x80 == 0).then_some(card)
}

/// Writes the cached cardinality.
pub fn set_cached(v: &mut [u8], card: u64) {
    v[8..16].copy_from_slice(&card.to_le_bytes());
}

/// Marks the cached cardinality stale (`HLL_INVALIDATE_CACHE`).
pub fn invalidate(v: &mut [u8]) {
    v[15] |= 0x80;
}

fn dense_get(regs: &[u8], i: usize) -> u8 {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let b0 = u16::from(regs[byte]);
    let b1 = u16::from(regs.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> fb) | (b1 << (8 - fb))) & 63) as u8
}

fn dense_put(regs: &mut [u8], i: usize, val: u8) {
    let byte = i * 6 / 8;
    let fb = (i * 6) & 7;
    let v = u16::from(val);
    regs[byte] &= !((63u16 << fb) as u8);
    regs[byte] |= (v << fb) as u8;
    if let Some(b) = regs.get_mut(byte + 1) {
        *b &= !((63u16 >> (8 - fb)) as u8);
        *b |= (v >> (8 - fb)) as u8;
    }
}

/// Redis's `hllDenseSet`: raises register `i` to `count`; whether it changed.
fn dense_set(v: &mut [u8], i: usize, count: u8) -> bool {
    let regs = &mut v[HEADER..];
    if count > dense_get(regs, i) {
        dense_put(regs, i, count);
        true
    } else {
        false
    }
}

/// A sparse opcode at `p`: `(registers it covers, its bytes)`; a missing second byte of
/// an `XZERO` reads as 0 (Redis reads the string's terminator there).
fn opcode(v: &[u8], p: usize) -> (usize, usize, Op) {
    let b = v[p];
    if b & 0xc0 == 0 {
        (usize::from(b & 0x3f) + 1, 1, Op::Zero)
    } else if b & 0xc0 == 0x40 {
        let lo = usize::from(v.get(p + 1).copied().unwrap_or(0));
        ((usize::from(b & 0x3f) << 8 | lo) + 1, 2, Op::XZero)
    } else {
        (usize::from(b & 3) + 1, 1, Op::Val(((b >> 2) & 0x1f) + 1))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Zero,
    XZero,
    Val(u8),
}

fn val_op(value: u8, len: usize) -> u8 {
    0x80 | ((value - 1) << 2) | (len - 1) as u8
}

fn push_xzero(out: &mut Vec<u8>, len: usize) {
    let l = len - 1;
    out.push(0x40 | (l >> 8) as u8);
    out.push((l & 0xff) as u8);
}

/// A run of zeros as Redis writes it when it splits an opcode: `ZERO` up to 64, else
/// `XZERO`.
fn push_zeros(out: &mut Vec<u8>, len: usize) {
    if len > SPARSE_ZERO_MAX_LEN {
        push_xzero(out, len);
    } else {
        out.push((len - 1) as u8);
    }
}

/// Redis's `hllSparseToDense`: the dense value of a sparse one, its header kept (cache
/// included), or `Corrupt` when the runs do not cover the registers exactly.
pub fn sparse_to_dense(v: &[u8]) -> Result<Vec<u8>, Corrupt> {
    let mut dense = vec![0u8; DENSE_SIZE];
    dense[..HEADER].copy_from_slice(&v[..HEADER]);
    dense[4] = DENSE;
    let mut idx = 0usize;
    let mut p = HEADER;
    while p < v.len() {
        let (run, len, op) = opcode(v, p);
        match op {
            Op::Zero | Op::XZero => idx += run,
            Op::Val(val) => {
                if run + idx > REGISTERS {
                    break;
                }
                for i in idx..idx + run {
                    dense_put(&mut dense[HEADER..], i, val);
                }
                idx += run;
            }
        }
        p += len;
    }
    if idx == REGISTERS {
        Ok(dense)
    } else {
        Err(Corrupt)
    }
}

/// Redis's `hllSparseSet`: raises register `index` to `count` in a sparse value, in place,
/// splitting and merging opcodes exactly as Redis does (so the bytes match), promoting the
/// value to dense when the register passes 32 or the value would pass
/// [`SPARSE_MAX_BYTES`]. Whether a register changed.
fn sparse_set(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote(v, index, count);
    }
    // Step 1: the opcode covering the register.
    let end = v.len();
    let (mut p, mut first, mut span, mut oplen) = (HEADER, 0usize, 0usize, 1usize);
    let mut prev = None;
    let mut op = Op::Zero;
    while p < end {
        (span, oplen, op) = opcode(v, p);
        if index < first + span {
            break;
        }
        prev = Some(p);
        p += oplen;
        first += span;
    }
    if span == 0 || p >= end {
        return Err(Corrupt);
    }
    let next = (p + oplen < end).then_some(p + oplen);
    // Step 2: the trivial cases, in place.
    let in_place = match op {
        Op::Val(old) if old >= count => return Ok(false),
        Op::Val(_) | Op::Zero if span == 1 => true,
        _ => false,
    };
    if in_place {
        v[p] = val_op(count, 1);
    } else {
        // The general case: the opcode split around the register.
        let last = first + span - 1;
        let mut seq = Vec::with_capacity(5);
        match op {
            Op::Zero | Op::XZero => {
                if index != first {
                    push_zeros(&mut seq, index - first);
                }
                seq.push(val_op(count, 1));
                if index != last {
                    push_zeros(&mut seq, last - index);
                }
            }
            Op::Val(cur) => {
                if index != first {
                    seq.push(val_op(cur, index - first));
                }
                seq.push(val_op(count, 1));
                if index != last {
                    seq.push(val_op(cur, last - index));
                }
            }
        }
        // Step 3: the new sequence in place of the old opcode.
        let old_len = if op == Op::XZero { 2 } else { 1 };
        let new_len = end + seq.len() - old_len;
        if seq.len() > old_len && new_len > SPARSE_MAX_BYTES {
            return promote(v, index, count);
        }
        let tail: Vec<u8> = next.map(|n| v[n..].to_vec()).unwrap_or_default();
        v.truncate(p);
        v.extend_from_slice(&seq);
        v.extend_from_slice(&tail);
        v.resize(new_len, 0);
    }
    // Step 4: adjacent `VAL`s of one value merged, up to 5 opcodes from the previous one.
    let mut p = prev.unwrap_or(HEADER);
    let mut scan = 5;
    while p < v.len() && scan > 0 {
        scan -= 1;
        match opcode(v, p) {
            (_, 2, _) => p += 2,
            (len1, _, Op::Val(v1)) => {
                if p + 1 < v.len() {
                    if let (len2, _, Op::Val(v2)) = opcode(v, p + 1) {
                        if v1 == v2 && len1 + len2 <= SPARSE_VAL_MAX_LEN {
                            v[p + 1] = val_op(v1, len1 + len2);
                            v.remove(p);
                            continue;
                        }
                    }
                }
                p += 1;
            }
            _ => p += 1,
        }
    }
    invalidate(v);
    Ok(true)
}

/// The sparse value made dense, then register `index` raised to `count`.
fn promote(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    *v = sparse_to_dense(v)?;
    dense_set(v, index, count);
    Ok(true)
}

/// Raises register `index` to `count` in a value of either encoding (Redis's `hllAdd`
/// after the hash); whether it changed.
pub fn set_register(v: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, Corrupt> {
    if is_dense(v) {
        Ok(dense_set(v, index, count))
    } else {
        sparse_set(v, index, count)
    }
}

/// Redis's `hllAdd`: adds an element; whether a register changed.
pub fn add(v: &mut Vec<u8>, element: &[u8]) -> Result<bool, Corrupt> {
    let (index, count) = pattern(element);
    set_register(v, index, count)
}

/// Redis's `hllMerge`: `max[i] = MAX(max[i], register i)`.
pub fn merge_into(max: &mut [u8; REGISTERS], v: &[u8]) -> Result<(), Corrupt> {
    if is_dense(v) {
        let regs = &v[HEADER..];
        for (i, m) in max.iter_mut().enumerate() {
            *m = (*m).max(dense_get(regs, i));
        }
        return Ok(());
    }
    let (mut i, mut p) = (0usize, HEADER);
    while p < v.len() {
        let (run, len, op) = opcode(v, p);
        match op {
            Op::Zero | Op::XZero => i += run,
            Op::Val(val) => {
                if run + i > REGISTERS {
                    break;
                }
                for m in &mut max[i..i + run] {
                    *m = (*m).max(val);
                }
                i += run;
            }
        }
        p += len;
    }
    if i == REGISTERS {
        Ok(())
    } else {
        Err(Corrupt)
    }
}

/// `PFMERGE`'s write: the registers `max` into the destination `v` (created sparse when
/// absent by the caller), made dense first when any source was (`use_dense`), its cache
/// marked stale.
pub fn store_merged(
    v: &mut Vec<u8>,
    max: &[u8; REGISTERS],
    use_dense: bool,
) -> Result<(), Corrupt> {
    if use_dense && !is_dense(v) {
        *v = sparse_to_dense(v)?;
    }
    for (i, &m) in max.iter().enumerate() {
        if m != 0 {
            // Redis ignores a corrupt destination here (checked when it was merged).
            let _ = set_register(v, i, m);
        }
    }
    invalidate(v);
    Ok(())
}

/// Redis's `hllSigma` (its exact comparisons kept).
#[allow(clippy::float_cmp)]
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prev = z;
        z += x * y;
        y += y;
        if z_prev == z {
            return z;
        }
    }
}

/// Redis's `hllTau` (its exact comparisons kept).
#[allow(clippy::float_cmp)]
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prev = z;
        y *= 0.5;
        // `pow(1 - x, 2)` through the C library, as Redis computes it.
        z -= (1.0 - x).powf(2.0) * y;
        if z_prev == z {
            return z / 3.0;
        }
    }
}

/// Redis's `hllCount` from a register histogram (Ertl's estimator).
fn estimate(histogram: &[u32; 64]) -> u64 {
    const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(histogram[Q as usize + 1])) / m);
    for j in (1..=Q as usize).rev() {
        z += f64::from(histogram[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(histogram[0]) / m);
    // `llroundl`: half away from zero; an empty HLL divides by infinity.
    (ALPHA_INF * m * m / z).round() as u64
}

/// The estimated cardinality of a value (cache not looked at), or `Corrupt` for a sparse
/// value whose runs do not cover the registers exactly.
pub fn count(v: &[u8]) -> Result<u64, Corrupt> {
    let mut histogram = [0u32; 64];
    if is_dense(v) {
        let regs = &v[HEADER..];
        for i in 0..REGISTERS {
            histogram[usize::from(dense_get(regs, i))] += 1;
        }
    } else {
        let (mut idx, mut p) = (0usize, HEADER);
        while p < v.len() {
            let (run, len, op) = opcode(v, p);
            let reg = match op {
                Op::Zero | Op::XZero => 0,
                Op::Val(val) => usize::from(val),
            };
            idx += run;
            histogram[reg] = histogram[reg].saturating_add(run as u32);
            p += len;
        }
        if idx != REGISTERS {
            return Err(Corrupt);
        }
    }
    Ok(estimate(&histogram))
}

/// The cardinality of registers merged by [`merge_into`] (`PFCOUNT` of several keys).
pub fn count_registers(max: &[u8; REGISTERS]) -> u64 {
    let mut histogram = [0u32; 64];
    for &r in max {
        histogram[usize::from(r & 63)] += 1;
    }
    estimate(&histogram)
}

/// The registers of a value, for `PFDEBUG GETREG` (`Corrupt` as [`merge_into`]).
pub fn registers(v: &[u8]) -> Result<Box<[u8; REGISTERS]>, Corrupt> {
    let mut max = Box::new([0u8; REGISTERS]);
    merge_into(&mut max, v)?;
    Ok(max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_matches_redis() {
        // Known values of MurmurHash64A (the reference implementation, seed 0 and Redis's).
        assert_eq!(murmur64a(b"", 0), 0);
        // Register and count as redis-server 7.0.15's `PFDEBUG DECODE` shows them after one
        // `PFADD` (1, 5, 8 and 11 bytes: a tail alone, a whole block, a block and a tail).
        assert_eq!(pattern(b"a"), (12711, 2));
        assert_eq!(pattern(b"hello"), (9216, 1));
        assert_eq!(pattern(b"12345678"), (10579, 3));
        assert_eq!(pattern(b"abcdefghijk"), (14121, 1));
        // Every tail length is taken (1..7 bytes past a block) and differs.
        let hashes: Vec<u64> = (0..17)
            .map(|n| murmur64a(&b"abcdefghijklmnopq"[..n], 0xadc8_3b19))
            .collect();
        for (i, a) in hashes.iter().enumerate() {
            for b in &hashes[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn new_sparse_is_redis_empty_hll() {
        let v = new_sparse();
        assert_eq!(v.len(), 18);
        assert_eq!(&v[..5], b"HYLL\x01");
        assert_eq!(&v[16..], &[0x7f, 0xff]);
        assert!(is_hll(&v));
        assert_eq!(count(&v), Ok(0));
        assert_eq!(cached(&v), Some(0));
    }

    #[test]
    fn dense_registers_pack_six_bits() {
        let mut regs = vec![0u8; REGISTERS * 6 / 8];
        for i in 0..REGISTERS {
            dense_put(&mut regs, i, (i % 64) as u8);
        }
        for i in 0..REGISTERS {
            assert_eq!(dense_get(&regs, i), (i % 64) as u8, "register {i}");
        }
        // Register 0 is the low 6 bits of byte 0, register 1 starts at bit 6.
        let mut regs = vec![0u8; 4];
        dense_put(&mut regs, 1, 0b10_1101);
        assert_eq!(regs[..2], [0b0100_0000, 0b0000_1011]);
    }

    #[test]
    fn sparse_split_merge_and_promotion() {
        let mut v = new_sparse();
        assert_eq!(sparse_set(&mut v, 100, 3), Ok(true));
        // XZERO(100) VAL(3,1) XZERO(16283).
        assert_eq!(
            &v[16..],
            &[
                0x40,
                99,
                val_op(3, 1),
                0x40 | (0x3f9a >> 8) as u8,
                (0x3f9a & 0xff) as u8
            ]
        );
        assert_eq!(sparse_set(&mut v, 100, 2), Ok(false));
        assert_eq!(sparse_set(&mut v, 101, 3), Ok(true));
        // Merged into VAL(3,2).
        assert_eq!(v[18], val_op(3, 2));
        assert_eq!(count(&v), Ok(2));
        let dense = sparse_to_dense(&v).unwrap();
        assert_eq!(dense.len(), DENSE_SIZE);
        assert_eq!(dense_get(&dense[HEADER..], 100), 3);
        assert_eq!(dense_get(&dense[HEADER..], 101), 3);
        assert_eq!(count(&dense), Ok(2));
        // A register past 32 promotes.
        assert_eq!(sparse_set(&mut v, 7, 40), Ok(true));
        assert!(is_dense(&v));
        assert_eq!(v.len(), DENSE_SIZE);
        // Many elements: sparse stays within its bound, then goes dense.
        let mut v = new_sparse();
        let mut went_dense = false;
        for i in 0..5000u32 {
            add(&mut v, format!("e{i}").as_bytes()).unwrap();
            if is_dense(&v) {
                went_dense = true;
                break;
            }
            assert!(v.len() <= SPARSE_MAX_BYTES);
        }
        assert!(went_dense);
    }

    #[test]
    fn counts_are_close_and_merge_agrees() {
        let (mut a, mut b) = (new_sparse(), new_sparse());
        for i in 0..20_000u32 {
            let e = format!("x{i}");
            if i % 2 == 0 {
                add(&mut a, e.as_bytes()).unwrap();
            } else {
                add(&mut b, e.as_bytes()).unwrap();
            }
        }
        let mut max = [0u8; REGISTERS];
        merge_into(&mut max, &a).unwrap();
        merge_into(&mut max, &b).unwrap();
        let n = count_registers(&max);
        assert!((19_000..21_000).contains(&n), "{n}");
        let mut dest = new_sparse();
        store_merged(&mut dest, &max, true).unwrap();
        assert_eq!(count(&dest), Ok(n));
        assert_eq!(cached(&dest), None);
    }

    #[test]
    fn corrupt_values_are_refused_without_panic() {
        let mut v = new_sparse();
        v.truncate(17); // half an XZERO
        assert!(count(&v).is_err());
        let mut max = [0u8; REGISTERS];
        assert!(merge_into(&mut max, &v).is_err());
        let mut v = b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\0\xff\xff\xff".to_vec();
        let _ = add(&mut v, b"a");
        assert!(!is_hll(b"HYLL\x00short"));
        assert!(!is_hll(b"HYLL\x02\0\0\0\0\0\0\0\0\0\0\0"));
    }
}
