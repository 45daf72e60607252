//! Geohashes as Redis 7.0 computes them (`geohash.c`, `geohash_helper.c`): a point's 52-bit
//! interleaved hash (26 steps of latitude in the even bits, longitude in the odd ones, over
//! Web Mercator's latitudes), which is its score in the sorted set; the cell's centre back
//! from a score; the haversine distance on Redis's Earth radius; the standard 11-character
//! geohash text. Pure functions, no database.

pub const LONG_MIN: f64 = -180.0;
pub const LONG_MAX: f64 = 180.0;
pub const LAT_MIN: f64 = -85.051_128_78;
pub const LAT_MAX: f64 = 85.051_128_78;
/// Steps of each coordinate (26 each: 52 bits, exact in a double).
pub const STEP: u32 = 26;
pub(super) const EARTH_RADIUS_IN_METERS: f64 = 6_372_797.560_856;

/// Whether Redis accepts the point (`GEOADD`'s range check).
pub fn valid(lon: f64, lat: f64) -> bool {
    (LONG_MIN..=LONG_MAX).contains(&lon) && (LAT_MIN..=LAT_MAX).contains(&lat)
}

/// Bit `i` of `v` to bit `2i`.
pub(super) fn spread(v: u32) -> u64 {
    let mut out = 0u64;
    for i in 0..32 {
        out |= u64::from((v >> i) & 1) << (2 * i);
    }
    out
}

/// Bits `2i` of `v` to bit `i`.
pub(super) fn squash(v: u64) -> u32 {
    let mut out = 0u32;
    for i in 0..32 {
        out |= (((v >> (2 * i)) & 1) as u32) << i;
    }
    out
}

/// Redis's `geohashEncode` over the given ranges at 26 steps (`None` outside them).
fn encode_in(lon: f64, lat: f64, lat_range: (f64, f64), long_range: (f64, f64)) -> Option<u64> {
    if !(-180.0..=180.0).contains(&lon) || !(LAT_MIN..=LAT_MAX).contains(&lat) {
        return None;
    }
    if lat < lat_range.0 || lat > lat_range.1 || lon < long_range.0 || lon > long_range.1 {
        return None;
    }
    let lat_offset = (lat - lat_range.0) / (lat_range.1 - lat_range.0) * (1u64 << STEP) as f64;
    let long_offset = (lon - long_range.0) / (long_range.1 - long_range.0) * (1u64 << STEP) as f64;
    // C's conversion to `uint32_t`: truncation.
    Some(spread(lat_offset as u32) | spread(long_offset as u32) << 1)
}

/// The score of a point (Redis's `geohashEncodeWGS84` then `geohashAlign52Bits`).
pub fn encode(lon: f64, lat: f64) -> Option<u64> {
    encode_in(lon, lat, (LAT_MIN, LAT_MAX), (LONG_MIN, LONG_MAX))
}

/// The centre of a score's cell, `(longitude, latitude)`, as Redis's `decodeGeohash`
/// answers it (clamped to the valid range), its arithmetic as Redis's.
#[allow(clippy::manual_midpoint)]
pub fn decode(score: f64) -> (f64, f64) {
    let bits = c_u64(score);
    let ilat = f64::from(squash(bits));
    let ilon = f64::from(squash(bits >> 1));
    let cells = (1u64 << STEP) as f64;
    let lat_scale = LAT_MAX - LAT_MIN;
    let long_scale = LONG_MAX - LONG_MIN;
    let lat_lo = LAT_MIN + (ilat * 1.0 / cells) * lat_scale;
    let lat_hi = LAT_MIN + ((ilat + 1.0) * 1.0 / cells) * lat_scale;
    let lon_lo = LONG_MIN + (ilon * 1.0 / cells) * long_scale;
    let lon_hi = LONG_MIN + ((ilon + 1.0) * 1.0 / cells) * long_scale;
    let lon = ((lon_lo + lon_hi) / 2.0).clamp(LONG_MIN, LONG_MAX);
    let lat = ((lat_lo + lat_hi) / 2.0).clamp(LAT_MIN, LAT_MAX);
    (lon, lat)
}

/// 2^63, past `i64`.
const TWO_63: f64 = 9_223_372_036_854_775_808.0;

/// C's `(uint64_t)d` as gcc compiles it for x86-64 (Redis's `decodeGeohash`): a negative
/// score wraps (`-5` is `2^64 - 5`), one of `2^64` or more is 0. Rust's `as` saturates, which
/// would put such a member (a plain `ZADD` score) at the other corner of the map.
pub(super) fn c_u64(d: f64) -> u64 {
    // `cvttsd2si` gives `i64::MIN` for what it cannot convert, as Rust's saturation gives
    // for the negative side.
    let cvt = |x: f64| {
        if x.is_nan() || x >= TWO_63 {
            i64::MIN
        } else {
            x as i64
        }
    };
    if d < TWO_63 {
        cvt(d) as u64
    } else {
        (cvt(d - TWO_63) as u64) ^ (1 << 63)
    }
}

pub(super) fn deg_rad(d: f64) -> f64 {
    d * (std::f64::consts::PI / 180.0)
}

/// Redis's `geohashGetDistance`: the haversine distance in metres.
pub fn distance(lon1: f64, lat1: f64, lon2: f64, lat2: f64) -> f64 {
    let (lon1r, lon2r) = (deg_rad(lon1), deg_rad(lon2));
    let v = ((lon2r - lon1r) / 2.0).sin();
    if v == 0.0 {
        return EARTH_RADIUS_IN_METERS * (deg_rad(lat2) - deg_rad(lat1)).abs();
    }
    let (lat1r, lat2r) = (deg_rad(lat1), deg_rad(lat2));
    let u = ((lat2r - lat1r) / 2.0).sin();
    let a = u * u + lat1r.cos() * lat2r.cos() * v * v;
    2.0 * EARTH_RADIUS_IN_METERS * a.sqrt().asin()
}

/// `GEOHASH`'s text of a score: the cell's centre encoded again over the standard
/// latitudes (±90), 10 characters of its 52 bits and a final `0`.
pub fn text(score: f64) -> [u8; 11] {
    const ALPHABET: &[u8; 32] = b"0123456789bcdefghjkmnpqrstuvwxyz";
    let (lon, lat) = decode(score);
    let bits = encode_in(lon, lat, (-90.0, 90.0), (-180.0, 180.0)).unwrap_or(0);
    let mut out = [b'0'; 11];
    for (i, c) in out.iter_mut().take(10).enumerate() {
        *c = ALPHABET[((bits >> (52 - (i + 1) * 5)) & 0x1f) as usize];
    }
    out
}

/// A distance as Redis 7.0 writes it (`addReplyDoubleDistance`, `fixedpoint_d2string` with
/// 4 digits): `llrint(d * 10000)` (ties to even, `i64::MIN` for what does not fit) as a
/// fixed-point number, into `buf`; returns the text's length.
pub fn distance_text(d: f64, buf: &mut [u8; 32]) -> usize {
    use std::io::Write;
    if d == 0.0 {
        buf[..6].copy_from_slice(b"0.0000");
        return 6;
    }
    let scaled = (d * 10_000.0).round_ties_even();
    let v = if scaled.is_nan() || !(-TWO_63..TWO_63).contains(&scaled) {
        i64::MIN
    } else {
        scaled as i64
    };
    let a = v.unsigned_abs();
    let mut w = &mut buf[..];
    let sign = if v < 0 { "-" } else { "" };
    let _ = write!(w, "{sign}{}.{:04}", a / 10_000, a % 10_000);
    let left = w.len();
    32 - left
}

/// A coordinate as `GEOPOS` writes it (`%.17Lf`, trailing zeros and dot dropped).
pub fn human(d: f64) -> String {
    let mut s = format!("{d:.17}");
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" {
        s = "0".into();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn palermo_as_redis_stores_and_returns_it() {
        // redis-server 7.0.15: GEOADD g 13.361389 38.115556 Palermo; ZSCORE; GEOPOS; GEOHASH.
        let score = encode(13.361_389, 38.115_556).unwrap();
        assert_eq!(score, 3_479_099_956_230_698);
        let (lon, lat) = decode(score as f64);
        assert_eq!(human(lon), "13.36138933897018433");
        assert_eq!(human(lat), "38.11555639549629859");
        assert_eq!(&text(score as f64), b"sqc8b49rny0");
    }

    #[test]
    fn distance_and_ranges() {
        let p = decode(encode(13.361_389, 38.115_556).unwrap() as f64);
        let c = decode(encode(15.087_269, 37.502_669).unwrap() as f64);
        // GEODIST g Palermo Catania: 166274.1516 m.
        assert_eq!(
            format!("{:.4}", distance(p.0, p.1, c.0, c.1)),
            "166274.1516"
        );
        assert!(encode(180.1, 0.0).is_none());
        assert!(encode(0.0, 85.06).is_none());
        assert!(encode(-180.0, -85.051_128_78).is_some());
        assert_eq!(squash(spread(0xdead_beef)), 0xdead_beef);
    }

    fn dist(d: f64) -> String {
        let mut buf = [0u8; 32];
        let n = distance_text(d, &mut buf);
        String::from_utf8(buf[..n].to_vec()).unwrap()
    }

    #[test]
    fn distances_as_fixedpoint_d2string_writes_them() {
        assert_eq!(dist(0.0), "0.0000");
        assert_eq!(dist(166_274.151_6), "166274.1516");
        assert_eq!(dist(0.000_04), "0.0000");
        assert_eq!(dist(0.000_06), "0.0001");
        // Ties go to even, as llrint rounds them.
        assert_eq!(dist(0.000_25), "0.0002");
        assert_eq!(dist(0.775), "0.7750");
        assert_eq!(dist(12.0), "12.0000");
        // llrint of NaN: LLONG_MIN, written as its magnitude.
        assert_eq!(dist(f64::NAN), "-922337203685477.5808");
    }

    #[test]
    fn scores_convert_as_gcc_converts_them() {
        // redis-server 7.0.15: ZADD k -5 neg 1e30 big; GEOPOS k neg big.
        assert_eq!(c_u64(-5.0), u64::MAX - 4);
        assert_eq!(c_u64(1e30), 0);
        assert_eq!(c_u64(5.7), 5);
        let (lon, lat) = decode(-5.0);
        assert_eq!(
            (human(lon).as_str(), human(lat).as_str()),
            ("180", "85.0511287799999991")
        );
        let (lon, lat) = decode(1e30);
        assert_eq!(human(lon), "-179.99999731779098511");
        assert_eq!(human(lat), "-85.05112751263942528");
    }
}
