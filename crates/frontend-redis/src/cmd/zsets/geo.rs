//! `GEOADD`, `GEOPOS`, `GEODIST`, `GEOHASH`: points kept as Redis keeps them, members of a
//! sorted set whose score is the point's 52-bit geohash ([`super::geohash`]), so `ZSCORE`
//! and `ZRANGE` answer what redis-server answers and the zset commands work on them.
//! The searches (`GEOSEARCH`, `GEORADIUS`...) are in [`search`].

mod area;
mod search;
mod sort;
#[cfg(test)]
mod tests;

pub use search::COMMANDS as SEARCH_COMMANDS;

use std::collections::HashMap;

use super::geohash;
use super::parse::ZAddFlags;
use super::score;
use crate::cmd::checks::{self, Absent};
use crate::cmd::data::{Family, Spec};
use crate::cmd::typed::{DataCommand, Parse, ParseError, SYNTAX};
use crate::cmd::Args;
use crate::errors;
use crate::store::context::Cx;
use crate::store::keys::{hash, kind};
use crate::store::StoreError;

const UNIT: &[u8] = b"unsupported unit provided. please use M, KM, FT, MI";

const fn spec(name: &'static str, arity: i32, write: bool, parse: Parse) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::ZSets,
        parse,
    }
}

pub static COMMANDS: [Spec; 4] = [
    spec("geoadd", -5, true, parse_geoadd),
    spec("geopos", -2, false, |a| {
        Ok(GeoCommand::GeoPos {
            key: a.get(1),
            members: a,
        }
        .into())
    }),
    spec("geodist", -4, false, parse_geodist),
    spec("geohash", -2, false, |a| {
        Ok(GeoCommand::GeoHash {
            key: a.get(1),
            members: a,
        }
        .into())
    }),
];

/// A geo command, parsed. Lists of members keep the whole request (from argument 2 on).
#[derive(Debug, PartialEq)]
pub enum GeoCommand<'a> {
    /// `GEOADD key [NX|XX] [CH] lon lat member...`: the members' scores computed.
    GeoAdd {
        key: &'a [u8],
        flags: ZAddFlags,
        pairs: Vec<(f64, &'a [u8])>,
    },
    GeoPos {
        key: &'a [u8],
        members: Args<'a>,
    },
    /// `GEODIST key m1 m2 [unit]`: metres per unit.
    GeoDist {
        key: &'a [u8],
        a: &'a [u8],
        b: &'a [u8],
        per_unit: f64,
    },
    GeoHash {
        key: &'a [u8],
        members: Args<'a>,
    },
    /// `GEOSEARCH`, `GEOSEARCHSTORE`, `GEORADIUS*`.
    Search(search::Search<'a>),
}

impl<'a> From<GeoCommand<'a>> for DataCommand<'a> {
    fn from(c: GeoCommand<'a>) -> Self {
        DataCommand::Geo(c)
    }
}

/// Redis's `extractUnitOrReply`: metres per unit.
fn unit(arg: &[u8]) -> Result<f64, ParseError> {
    let is = |u: &[u8]| arg.eq_ignore_ascii_case(u);
    if is(b"m") {
        Ok(1.0)
    } else if is(b"km") {
        Ok(1000.0)
    } else if is(b"ft") {
        Ok(0.3048)
    } else if is(b"mi") {
        Ok(1609.34)
    } else {
        Err(ParseError::Text(UNIT))
    }
}

fn parse_geoadd(a: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let (mut nx, mut xx, mut ch) = (false, false, false);
    let mut at = 2;
    while at < a.len() {
        let opt = a.get(at);
        if opt.eq_ignore_ascii_case(b"nx") {
            nx = true;
        } else if opt.eq_ignore_ascii_case(b"xx") {
            xx = true;
        } else if opt.eq_ignore_ascii_case(b"ch") {
            ch = true;
        } else {
            break;
        }
        at += 1;
    }
    // No point left after the flags (`GEOADD k CH CH CH`) is a syntax error too, as Redis
    // answers it.
    if at == a.len() || !(a.len() - at).is_multiple_of(3) || (nx && xx) {
        return Err(SYNTAX);
    }
    let mut pairs = Vec::with_capacity((a.len() - at) / 3);
    while at < a.len() {
        let lon = score::parse_value(a.get(at)).ok_or(ParseError::Text(errors::NOT_FLOAT))?;
        let lat = score::parse_value(a.get(at + 1)).ok_or(ParseError::Text(errors::NOT_FLOAT))?;
        let Some(bits) = geohash::valid(lon, lat)
            .then(|| geohash::encode(lon, lat))
            .flatten()
        else {
            return Err(ParseError::Formatted(
                format!("invalid longitude,latitude pair {lon:.6},{lat:.6}").into_bytes(),
            ));
        };
        pairs.push((bits as f64, a.get(at + 2)));
        at += 3;
    }
    let flags = ZAddFlags {
        nx,
        xx,
        gt: false,
        lt: false,
        ch,
        incr: false,
    };
    Ok(GeoCommand::GeoAdd {
        key: a.get(1),
        flags,
        pairs,
    }
    .into())
}

fn parse_geodist(a: Args<'_>) -> Result<DataCommand<'_>, ParseError> {
    let per_unit = match a.len() {
        4 => 1.0,
        5 => unit(a.get(4))?,
        _ => return Err(SYNTAX),
    };
    Ok(GeoCommand::GeoDist {
        key: a.get(1),
        a: a.get(2),
        b: a.get(3),
        per_unit,
    }
    .into())
}

impl GeoCommand<'_> {
    /// Runs the command in the batch's transaction, appending its reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        match self {
            GeoCommand::GeoAdd { key, flags, pairs } => super::zadd(cx, key, flags, &pairs).await,
            GeoCommand::GeoPos { key, members } => geopos(cx, key, members).await,
            GeoCommand::GeoDist {
                key,
                a,
                b,
                per_unit,
            } => geodist(cx, key, a, b, per_unit).await,
            GeoCommand::GeoHash { key, members } => geohash_texts(cx, key, members).await,
            GeoCommand::Search(s) => s.apply(cx).await,
        }
    }
}

/// The scores of the members from argument 2 on (none for an absent key); `None` once
/// `WRONGTYPE` is replied.
async fn member_scores(
    cx: &mut Cx<'_>,
    key: &[u8],
    members: Args<'_>,
) -> Result<Option<(Vec<[u8; 32]>, HashMap<[u8; 32], f64>)>, StoreError> {
    let Some(row) = checks::read(cx, key, kind::ZSET).await? else {
        return Ok(None);
    };
    let hashes: Vec<[u8; 32]> = members.from(2).map(hash).collect();
    let found = match row {
        Some(row) => super::scores_of(cx, row.kid, &hashes).await?,
        None => HashMap::new(),
    };
    Ok(Some((hashes, found)))
}

/// `GEOPOS key member...`: each member's `[longitude, latitude]`, or a null array.
async fn geopos(cx: &mut Cx<'_>, key: &[u8], members: Args<'_>) -> Result<(), StoreError> {
    let Some((hashes, found)) = member_scores(cx, key, members).await? else {
        return Ok(());
    };
    let mut r = cx.reply();
    r.array_len(hashes.len());
    for mh in &hashes {
        match found.get(mh) {
            Some(&s) => {
                let (lon, lat) = geohash::decode(s);
                r.array_len(2)
                    .double_text(geohash::human(lon).as_bytes())
                    .double_text(geohash::human(lat).as_bytes());
            }
            None => {
                r.null_array();
            }
        }
    }
    Ok(())
}

/// `GEOHASH key member...`: each member's 11-character geohash, or null.
async fn geohash_texts(cx: &mut Cx<'_>, key: &[u8], members: Args<'_>) -> Result<(), StoreError> {
    let Some((hashes, found)) = member_scores(cx, key, members).await? else {
        return Ok(());
    };
    let mut r = cx.reply();
    r.array_len(hashes.len());
    for mh in &hashes {
        match found.get(mh) {
            Some(&s) => r.bulk(&geohash::text(s)),
            None => r.null(),
        };
    }
    Ok(())
}

/// `GEODIST key m1 m2 [unit]`: the distance (4 decimals, [`geohash::distance_text`]), null when a member is missing.
async fn geodist(
    cx: &mut Cx<'_>,
    key: &[u8],
    a: &[u8],
    b: &[u8],
    per_unit: f64,
) -> Result<(), StoreError> {
    let Some(row) = checks::read_or(cx, key, kind::ZSET, Absent::Null).await? else {
        return Ok(());
    };
    let (ha, hb) = (hash(a), hash(b));
    let found = super::scores_of(cx, row.kid, &[ha, hb]).await?;
    let (Some(&sa), Some(&sb)) = (found.get(&ha), found.get(&hb)) else {
        cx.reply().null();
        return Ok(());
    };
    let (pa, pb) = (geohash::decode(sa), geohash::decode(sb));
    let d = geohash::distance(pa.0, pa.1, pb.0, pb.1) / per_unit;
    let mut text = [0u8; 32];
    let n = geohash::distance_text(d, &mut text);
    cx.reply().bulk(&text[..n]);
    Ok(())
}
