//! The payload codec, in raw bytes: payloads redis-server 7.0.15 wrote (`DUMP`), payloads
//! built here, and malformed or random ones (refused, never a panic).

use super::*;

pub(super) fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub(super) fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

const LIMIT: u64 = 64 << 20;

#[test]
fn crc64_is_jones_as_redis() {
    // Redis's crc64.c self-test value.
    assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    assert_eq!(crc64(b""), 0);
}

#[test]
fn reads_what_redis_7_0_dumps() {
    // `SET s hello`
    let v = decode(&hex("000568656c6c6f0a006372df766534200a"), LIMIT);
    assert_eq!(v, Ok(Value::String(b("hello"))));
    // `SET i 12345`: an int16.
    let v = decode(&hex("00c139300a009d94ea2793fc08b9"), LIMIT);
    assert_eq!(v, Ok(Value::String(b("12345"))));
    // `SET big ab*100`: LZF.
    let v = decode(
        &hex("00c30a40c802616261e0ba010161620a0024a6e84170c0c68c"),
        LIMIT,
    );
    assert_eq!(v, Ok(Value::String(b("ab").repeat(100))));
    // `RPUSH l a b 7 -3 1000000`: a quicklist of one listpack (7-bit, 13-bit, 24-bit ints).
    let v = decode(
        &hex("120102171700000005008161028162020701dffd02f240420f04ff0a00af65f25a984953a5"),
        LIMIT,
    );
    assert_eq!(
        v,
        Ok(Value::List(vec![
            b("a"),
            b("b"),
            b("7"),
            b("-3"),
            b("1000000")
        ]))
    );
    // `SADD si 1 2 3`: an intset.
    let v = decode(
        &hex("0b0e02000000030000000100020003000a00a5025ce26d6e4d1b"),
        LIMIT,
    );
    assert_eq!(v, Ok(Value::Set(vec![b("1"), b("2"), b("3")])));
    // `SADD ss a b`.
    let v = decode(&hex("0202016101620a00fe642125eb033d0d"), LIMIT);
    assert_eq!(v, Ok(Value::Set(vec![b("a"), b("b")])));
    // `ZADD z 1.5 a 2 b inf c`: a listpack.
    let v = decode(
        &hex("111c1c000000060081610283312e3504816202020181630283696e6604ff0a0089597f26062da8a1"),
        LIMIT,
    );
    assert_eq!(
        v,
        Ok(Value::ZSet(vec![
            (b("a"), 1.5),
            (b("b"), 2.0),
            (b("c"), f64::INFINITY)
        ]))
    );
    // `HSET h f v n 5`: a listpack.
    let v = decode(
        &hex("1012120000000400816602817602816e020501ff0a008490939f57b4f3c2"),
        LIMIT,
    );
    assert_eq!(v, Ok(Value::Hash(vec![(b("f"), b("v")), (b("n"), b("5"))])));
}

#[test]
fn footer_checks() {
    let good = hex("000568656c6c6f0a006372df766534200a");
    // A flipped bit anywhere: the checksum.
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 1;
        assert_eq!(decode(&bad, LIMIT), Err(Refused::Footer), "byte {i}");
    }
    assert_eq!(decode(b"", LIMIT), Err(Refused::Footer));
    assert_eq!(decode(&good[..9], LIMIT), Err(Refused::Footer));
    // Version 9 (Redis 6) is read; 11 is not, whatever its checksum.
    let mut w = Writer::new(rdb_type::STRING);
    w.string(b"x");
    let mut p = w.finish(0);
    let body = p.len() - 10;
    p[body] = 9;
    let crc = crc64(&p[..body + 2]);
    p[body + 2..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(decode(&p, LIMIT), Ok(Value::String(b("x"))));
    p[body] = 11;
    let crc = crc64(&p[..body + 2]);
    p[body + 2..].copy_from_slice(&crc.to_le_bytes());
    assert_eq!(decode(&p, LIMIT), Err(Refused::Footer));
}

/// A payload of `body` with a good footer.
fn payload(body: &[u8]) -> Vec<u8> {
    let mut p = body.to_vec();
    p.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64(&p);
    p.extend_from_slice(&crc.to_le_bytes());
    p
}

#[test]
fn writes_what_it_reads() {
    let values = [
        Value::String(Vec::new()),
        Value::String(vec![7u8; 70_000]),
        Value::List(vec![b("a"), b(""), vec![0u8; 300]]),
        Value::Set((0..100).map(|i| format!("m{i}").into_bytes()).collect()),
        Value::ZSet(vec![
            (b("a"), -0.5),
            (b("b"), f64::INFINITY),
            (b("c"), f64::NEG_INFINITY),
        ]),
        Value::Hash(vec![(b("f"), b("v")), (b("g"), Vec::new())]),
    ];
    for v in values {
        let (kind, parts) = match &v {
            Value::String(s) => (rdb_type::STRING, vec![s.clone()]),
            Value::List(l) => (rdb_type::LIST, l.clone()),
            Value::Set(l) => (rdb_type::SET, l.clone()),
            Value::ZSet(_) => (rdb_type::ZSET_2, Vec::new()),
            Value::Hash(h) => (
                rdb_type::HASH,
                h.iter().flat_map(|(f, v)| [f.clone(), v.clone()]).collect(),
            ),
            Value::Stream(_) => unreachable!("streams: stream_tests.rs"),
        };
        let mut w = Writer::new(kind);
        let count = match &v {
            Value::String(s) => {
                w.string(s);
                0
            }
            Value::ZSet(z) => {
                w.count_ahead();
                for (m, s) in z {
                    w.string(m);
                    w.double(*s);
                }
                z.len()
            }
            Value::Hash(h) => {
                w.count_ahead();
                for p in &parts {
                    w.string(p);
                }
                h.len()
            }
            _ => {
                w.count_ahead();
                for p in &parts {
                    w.string(p);
                }
                parts.len()
            }
        };
        let p = w.finish(count as u64);
        assert_eq!(decode(&p, LIMIT), Ok(v));
    }
}

#[test]
fn lengths_in_each_form() {
    for n in [0u64, 63, 64, 16383, 16384, 1 << 32] {
        let mut w = Writer::new(0);
        w.len(n);
        let p = w.finish(0);
        let mut r = Reader {
            buf: &p[1..],
            at: 0,
            budget: Budget {
                left: 0,
                exceeded: false,
            },
            too_many: false,
        };
        assert_eq!(r.len(), Some(n));
    }
}

#[test]
fn refuses_malformed_values() {
    let format = |body: &[u8]| decode(&payload(body), LIMIT);
    // Unknown types (a module, 200), streams cut short.
    for t in [6u8, 7, 15, 19, 200] {
        assert_eq!(format(&[t, 0]), Err(Refused::Format), "type {t}");
    }
    // Empty collections.
    for t in [1u8, 2, 4, 5, 18] {
        assert_eq!(format(&[t, 0]), Err(Refused::Format), "type {t}");
    }
    // A duplicate member, field.
    assert_eq!(format(&[2, 2, 1, b'a', 1, b'a']), Err(Refused::Format));
    assert_eq!(
        format(&[4, 2, 1, b'a', 1, b'1', 1, b'a', 1, b'2']),
        Err(Refused::Format)
    );
    // A NaN score.
    let mut z = vec![5u8, 1, 1, b'a'];
    z.extend_from_slice(&f64::NAN.to_le_bytes());
    assert_eq!(format(&z), Err(Refused::Format));
    // A count past the bytes left: refused before anything is allocated for it.
    assert_eq!(
        format(&[1, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        Err(Refused::Format)
    );
    assert_eq!(
        format(&[0, 0x80, 0x7f, 0xff, 0xff, 0xff, b'x']),
        Err(Refused::Format)
    );
    // LZF claiming 4 GiB out of 3 bytes (past the limit: nothing allocated), 1000 bytes
    // (malformed), or past a small limit.
    assert_eq!(
        format(&[0, 0xc3, 3, 0x80, 0xff, 0xff, 0xff, 0xff, 2, b'a', b'b', b'c']),
        Err(Refused::TooLarge)
    );
    assert_eq!(
        format(&[0, 0xc3, 3, 0x43, 0xe8, 2, b'a', b'b', b'c']),
        Err(Refused::Format)
    );
    assert_eq!(
        decode(&payload(&[0, 0xc3, 3, 4, 2, b'a', b'b', b'c']), 3),
        Err(Refused::TooLarge)
    );
    // A back reference before the start.
    assert_eq!(format(&[0, 0xc3, 2, 3, 0x20, 0x05]), Err(Refused::Format));
    // An intset out of order, of a bad width.
    let set = |blob: &[u8]| {
        let mut body = vec![11u8, blob.len() as u8];
        body.extend_from_slice(blob);
        format(&body)
    };
    assert_eq!(
        set(&[2, 0, 0, 0, 2, 0, 0, 0, 2, 0, 1, 0]),
        Err(Refused::Format)
    );
    assert_eq!(
        set(&[3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0]),
        Err(Refused::Format)
    );
    assert_eq!(
        set(&[2, 0, 0, 0, 2, 0, 0, 0, 0xff, 0xff, 1, 0]),
        Ok(Value::Set(vec![b("-1"), b("1")]))
    );
}

#[test]
fn lzf_round() {
    // Literal "abc", then a back reference of length 4 at distance 3: "abcabca".
    assert_eq!(
        lzf_decompress(&[2, b'a', b'b', b'c', 0x40, 2], 7),
        Some(b("abcabca"))
    );
    assert_eq!(lzf_decompress(&[2, b'a', b'b', b'c', 0x40, 2], 6), None);
    assert_eq!(lzf_decompress(&[2, b'a', b'b'], 3), None);
    assert_eq!(lzf_decompress(&[0xe0], 10), None);
}

#[test]
fn listpack_and_backlen() {
    // Backlen forms: the highest 7 bits first, the following bytes flagged.
    assert_eq!(backlen(5), vec![5]);
    assert_eq!(backlen(127), vec![127]);
    assert_eq!(backlen(128), vec![1, 0x80]);
    assert_eq!(backlen(300), vec![2, 0x80 | 0x2c]);
    // A 64-bit integer and a 12-bit-length string.
    let mut lp = vec![0, 0, 0, 0, 2, 0];
    lp.push(0xf4);
    lp.extend_from_slice(&i64::MIN.to_le_bytes());
    lp.push(9);
    let s = vec![b'x'; 100];
    lp.push(0xe0);
    lp.push(100);
    lp.extend_from_slice(&s);
    lp.extend_from_slice(&backlen(102));
    lp.push(0xff);
    let total = lp.len() as u32;
    lp[..4].copy_from_slice(&total.to_le_bytes());
    let mut got = Vec::new();
    assert_eq!(
        listpack(&lp, |e| {
            got.push(e);
            Some(())
        }),
        Some(())
    );
    assert_eq!(got, vec![i64::MIN.to_string().into_bytes(), s]);
    // A wrong count, a wrong backlen, a wrong total.
    let mut bad = lp.clone();
    bad[4] = 3;
    assert_eq!(listpack(&bad, |_| Some(())), None);
    let mut bad = lp.clone();
    bad[15] = 8;
    assert_eq!(listpack(&bad, |_| Some(())), None);
    let mut bad = lp.clone();
    bad[0] += 1;
    assert_eq!(listpack(&bad, |_| Some(())), None);
}

#[test]
fn ziplist_entries() {
    // Redis 6's ziplist of "a", 12 (immediate), -2 (int8), 1000 (int16).
    let mut zl = vec![0u8; 10];
    zl.extend_from_slice(&[0, 1, b'a']);
    zl.extend_from_slice(&[3, 0xfd]);
    zl.extend_from_slice(&[1, 0xfe, 0xfe]);
    zl.extend_from_slice(&[2, 0xc0, 0xe8, 0x03]);
    zl.push(0xff);
    let total = zl.len() as u32;
    zl[..4].copy_from_slice(&total.to_le_bytes());
    zl[8] = 4;
    let mut got = Vec::new();
    assert_eq!(
        ziplist(&zl, |e| {
            got.push(e);
            Some(())
        }),
        Some(())
    );
    assert_eq!(got, vec![b("a"), b("12"), b("-2"), b("1000")]);
    // As a Redis 6 quicklist (type 14, RDB 9).
    let mut body = vec![14u8, 1, zl.len() as u8];
    body.extend_from_slice(&zl);
    assert_eq!(decode(&payload(&body), LIMIT), Ok(Value::List(got.clone())));
}

/// A small deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn random_and_truncated_payloads_never_panic() {
    let seeds = [
        hex("120102171700000005008161028162020701dffd02f240420f04ff0a00af65f25a984953a5"),
        hex("0b0e02000000030000000100020003000a00a5025ce26d6e4d1b"),
        hex("111c1c000000060081610283312e3504816202020181630283696e6604ff0a0089597f26062da8a1"),
        hex("1012120000000400816602817602816e020501ff0a008490939f57b4f3c2"),
        hex("00c30a40c802616261e0ba010161620a0024a6e84170c0c68c"),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for seed in &seeds {
        let body = &seed[..seed.len() - 10];
        // Every truncation, with a good footer.
        for cut in 0..body.len() {
            let _ = decode(&payload(&body[..cut]), LIMIT);
        }
        // Random byte changes, with a good footer.
        for _ in 0..3000 {
            let mut b = body.to_vec();
            for _ in 0..=(rng.next() % 4) {
                let i = (rng.next() as usize) % b.len();
                b[i] = rng.next() as u8;
            }
            let _ = decode(&payload(&b), LIMIT);
        }
    }
    // Random bodies of every type byte.
    for _ in 0..20_000 {
        let n = (rng.next() % 40) as usize;
        let mut b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        if let Some(first) = b.first_mut() {
            *first %= 20;
        }
        let _ = decode(&payload(&b), 1 << 16);
    }
}

#[test]
fn the_decoded_value_is_bounded_in_memory() {
    // An intset of 1000 small integers: 2 bytes each in the payload, each an element once
    // decoded.
    let mut blob = vec![2, 0, 0, 0];
    blob.extend_from_slice(&1000u32.to_le_bytes());
    for i in 0..1000u16 {
        blob.extend_from_slice(&i.to_le_bytes());
    }
    let mut body = vec![rdb_type::SET_INTSET];
    let mut w = Writer::new(0);
    w.string(&blob);
    body.extend_from_slice(&w.out[1..]);
    let p = payload(&body);
    // The blob, then each element with its cost.
    let need = blob.len() as u64
        + ELEMENT_COST
        + (0..1000u64)
            .map(|i| i.to_string().len() as u64 + ELEMENT_COST)
            .sum::<u64>();
    match decode(&p, need) {
        Ok(Value::Set(m)) => assert_eq!(m.len(), 1000),
        other => panic!("{other:?}"),
    }
    assert_eq!(decode(&p, need - 1), Err(Refused::TooLarge));
    // A list of 300 elements.
    let mut w = Writer::new(rdb_type::LIST);
    w.len(300);
    for _ in 0..300 {
        w.string(b"x");
    }
    let p = w.finish(0);
    assert!(decode(&p, 300 * (1 + ELEMENT_COST)).is_ok());
    assert_eq!(
        decode(&p, 300 * (1 + ELEMENT_COST) - 1),
        Err(Refused::TooLarge)
    );
}

/// redis-server 7.0.15's `FUNCTION DUMP` of one library (its code LZF-compressed).
const FUNCTION_DUMP: &str = "f5c3405740671f23216c7561206e616d653d6d796c69620a72656469732e72656769737465725f0b66756e6374696f6e28276d79400b02272c2040066012136b2c2061292072657475726e202768656c6c6f20e00805052720656e64290a00cfb9869b781edc13";

#[test]
fn function_payloads_read_redis_servers_and_round_trip() {
    let code = b("#!lua name=mylib\nredis.register_function('myfunc', function(k, a) return 'hello hello hello hello' end)");
    assert_eq!(
        function_codes(&hex(FUNCTION_DUMP), 10, LIMIT),
        Ok(vec![code.clone()])
    );
    let two = functions_payload([&code[..], b"#!lua name=x\n"].into_iter());
    assert_eq!(
        function_codes(&two, 10, LIMIT),
        Ok(vec![code.clone(), b("#!lua name=x\n")])
    );
    // No library: the footer alone.
    let none = functions_payload(std::iter::empty());
    assert_eq!(none.len(), 10);
    assert_eq!(function_codes(&none, 10, LIMIT), Ok(vec![]));
    // Redis 7.0-rc1/rc2's form: name, engine, description, code.
    let mut old = vec![RDB_OPCODE_FUNCTION, 3];
    old.extend_from_slice(b"lib\x03LUA\x01\x01d\x05body1");
    assert_eq!(
        function_codes(&payload(&old), 10, LIMIT),
        Ok(vec![b("#!LUA name=lib\nbody1")])
    );
}

#[test]
fn function_payloads_are_refused_with_redis_texts_and_bounded() {
    let text = |p: &[u8], most: usize, limit: u64| function_codes(p, most, limit).unwrap_err();
    let good = hex(FUNCTION_DUMP);
    let mut bad_crc = good.clone();
    *bad_crc.last_mut().unwrap() ^= 1;
    assert_eq!(
        text(&bad_crc, 10, LIMIT),
        "DUMP payload version or checksum are wrong"
    );
    assert_eq!(
        text(b"short", 10, LIMIT),
        "DUMP payload version or checksum are wrong"
    );
    assert_eq!(
        text(&payload(b"\x00\x03abc"), 10, LIMIT),
        "given type is not a function"
    );
    assert_eq!(
        text(&payload(b"\xf5\x10ab"), 10, LIMIT),
        "Failed loading library payload"
    );
    assert_eq!(
        text(&payload(b"\xf6\x10ab"), 10, LIMIT),
        "Failed loading library name"
    );
    // More libraries than kept, more bytes than the limit (before decompressing them).
    let three = functions_payload([&b"a"[..], b"b", b"c"].into_iter());
    assert_eq!(
        text(&three, 2, LIMIT),
        "manifold: at most 2 libraries are loaded"
    );
    assert_eq!(
        text(&good, 10, 50),
        "manifold: the libraries' code is at most 50 bytes in all"
    );
}

#[test]
fn random_and_truncated_function_payloads_never_panic() {
    let good = hex(FUNCTION_DUMP);
    let body = &good[..good.len() - 10];
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    for cut in 0..body.len() {
        let _ = function_codes(&payload(&body[..cut]), 1000, LIMIT);
        // Truncated, footer and all.
        let _ = function_codes(&good[..cut], 1000, LIMIT);
    }
    for _ in 0..5000 {
        let mut b = body.to_vec();
        for _ in 0..=(rng.next() % 4) {
            let i = (rng.next() as usize) % b.len();
            b[i] = rng.next() as u8;
        }
        let _ = function_codes(&payload(&b), 1000, LIMIT);
    }
    for _ in 0..20_000 {
        let n = (rng.next() % 40) as usize;
        let mut b: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
        if let Some(first) = b.first_mut() {
            *first = if rng.next() & 1 == 0 { 245 } else { 246 };
        }
        let _ = function_codes(&payload(&b), 1000, 1 << 16);
    }
}
