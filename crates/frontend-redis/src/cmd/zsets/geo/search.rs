//! `GEOSEARCH`, `GEOSEARCHSTORE`, `GEORADIUS`, `GEORADIUSBYMEMBER` and their `_RO` forms,
//! as Redis 7.0's `georadiusGeneric` runs them.
//!
//! Redis reads its arguments while it looks at the data: `WRONGTYPE` comes before any
//! argument error, a `FROMMEMBER` (or `GEORADIUSBYMEMBER`'s member) missing from the set is
//! refused where it stands among the arguments, and `GEORADIUSBYMEMBER` on a missing key
//! never reads its radius. So the parser here reads every argument and keeps the first error
//! it meets ([`Search::error`]) with the members to find before it; the command replies with
//! it in Redis's place ([`Search::apply`]).
//!
//! The search itself is Redis's ([`area`]): up to nine geohash cells around the centre, each
//! one range scan of the set's score index (`kid, sk`), in one statement (one per cell with
//! `ANY`, which stops once it has `COUNT` points), their points kept when Redis keeps them,
//! put in Redis's order (cell by cell, by score then member in each), then sorted as Redis
//! sorts them ([`sort`]). Like Redis, it holds the points kept, not the rows read.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::OnceLock;

use manifold_backend::Param;

use super::super::{geohash, member_row, score, scores_of, upsert};
use super::area::{Area, Shape};
use super::sort;
use super::{spec, unit, GeoCommand};
use crate::cmd::data::Spec;
use crate::cmd::sqltext::{padded, shape};
use crate::cmd::typed::{self, DataCommand, ParseError, SYNTAX};
use crate::cmd::Args;
use crate::errors;
use crate::store::context::Cx;
use crate::store::keys::{hash, kind};
use crate::store::{int, StoreError};

const NO_MEMBER: &[u8] = b"could not decode requested zset member";
const COUNT_NOT_POSITIVE: &[u8] = b"COUNT must be > 0";
const ANY_WITHOUT_COUNT: &[u8] = b"the ANY argument requires COUNT argument";
const NEGATIVE_RADIUS: &[u8] = b"radius cannot be negative";
const NEGATIVE_BOX: &[u8] = b"height or width cannot be negative";
const STORE_WITH_SEARCH: &[u8] =
    b"GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options";
const STORE_WITH_RADIUS: &[u8] =
    b"STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options";

pub static COMMANDS: [Spec; 6] = [
    spec("georadius", -6, true, |a| Ok(parse(a, Form::Radius).into())),
    spec("georadius_ro", -6, false, |a| {
        Ok(parse(a, Form::RadiusRo).into())
    }),
    spec("georadiusbymember", -5, true, |a| {
        Ok(parse(a, Form::ByMember).into())
    }),
    spec("georadiusbymember_ro", -5, false, |a| {
        Ok(parse(a, Form::ByMemberRo).into())
    }),
    spec(
        "geosearch",
        -7,
        false,
        |a| Ok(parse(a, Form::Search).into()),
    ),
    spec("geosearchstore", -8, true, |a| {
        Ok(parse(a, Form::SearchStore).into())
    }),
];

/// Which command (Redis's `RADIUS_COORDS`, `RADIUS_MEMBER`, `RADIUS_NOSTORE`, `GEOSEARCH`,
/// `GEOSEARCHSTORE` flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Radius,
    RadiusRo,
    ByMember,
    ByMemberRo,
    Search,
    SearchStore,
}

impl Form {
    fn search(self) -> bool {
        matches!(self, Form::Search | Form::SearchStore)
    }

    /// `STORE key` / `STOREDIST key` are options of this command.
    fn store_option(self) -> bool {
        matches!(self, Form::Radius | Form::ByMember)
    }
}

/// `ASC`, `DESC`, or neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sort {
    None,
    Asc,
    Desc,
}

/// A search, parsed.
#[derive(Debug, PartialEq)]
pub struct Search<'a> {
    pub src: &'a [u8],
    /// `GEOSEARCHSTORE`'s destination, or `STORE`/`STOREDIST`'s key.
    pub dst: Option<&'a [u8]>,
    /// The destination's scores are the distances (`STOREDIST`), not the geohashes.
    pub storedist: bool,
    /// The members whose positions are read, in order, when the key exists
    /// (`GEORADIUSBYMEMBER`'s, each `FROMMEMBER`'s): the last one is the centre.
    pub from_members: Vec<&'a [u8]>,
    /// The search (its centre from `FROMLONLAT` or `GEORADIUS`, else from the member).
    pub area: Area,
    pub sort: Sort,
    /// `COUNT` (0: none).
    pub count: u64,
    pub any: bool,
    pub withdist: bool,
    pub withhash: bool,
    pub withcoord: bool,
    /// `GEORADIUSBYMEMBER`'s radius refused: replied only when the key exists (Redis reads
    /// the radius after finding the member, and not at all without the key).
    pub radius_error: Option<ParseError>,
    /// The first argument refused, replied after `WRONGTYPE` and after a missing member
    /// named before it.
    pub error: Option<ParseError>,
}

impl<'a> From<Search<'a>> for DataCommand<'a> {
    fn from(s: Search<'a>) -> Self {
        GeoCommand::Search(s).into()
    }
}

/// A float argument as `getDoubleFromObjectOrReply` reads it, refused with `text`.
fn float(arg: &[u8], text: &'static [u8]) -> Result<f64, ParseError> {
    score::parse_value(arg).ok_or(ParseError::Text(text))
}

/// `extractLongLatOrReply` at `at`.
fn lon_lat(a: Args<'_>, at: usize) -> Result<(f64, f64), ParseError> {
    let lon = float(a.get(at), errors::NOT_FLOAT)?;
    let lat = float(a.get(at + 1), errors::NOT_FLOAT)?;
    if !geohash::valid(lon, lat) {
        return Err(ParseError::Formatted(
            format!("invalid longitude,latitude pair {lon:.6},{lat:.6}").into_bytes(),
        ));
    }
    Ok((lon, lat))
}

/// `extractDistanceOrReply` at `at`: the radius and metres per unit.
fn radius(a: Args<'_>, at: usize) -> Result<(f64, f64), ParseError> {
    let r = float(a.get(at), b"need numeric radius")?;
    if r < 0.0 {
        return Err(ParseError::Text(NEGATIVE_RADIUS));
    }
    Ok((r, unit(a.get(at + 1))?))
}

/// `extractBoxOrReply` at `at`: the box and metres per unit.
fn box_shape(a: Args<'_>, at: usize) -> Result<(Shape, f64), ParseError> {
    let width = float(a.get(at), b"need numeric width")?;
    let height = float(a.get(at + 1), b"need numeric height")?;
    if height < 0.0 || width < 0.0 {
        return Err(ParseError::Text(NEGATIVE_BOX));
    }
    Ok((Shape::Box { width, height }, unit(a.get(at + 2))?))
}

fn parse(a: Args<'_>, form: Form) -> Search<'_> {
    let mut s = Search {
        src: a.get(1),
        dst: None,
        storedist: false,
        from_members: Vec::new(),
        area: Area {
            centre: (0.0, 0.0),
            shape: Shape::Radius(0.0),
            conversion: 1.0,
        },
        sort: Sort::None,
        count: 0,
        any: false,
        withdist: false,
        withhash: false,
        withcoord: false,
        radius_error: None,
        error: None,
    };
    if let Err(e) = parse_into(&mut s, a, form) {
        s.error = Some(e);
    }
    s
}

fn parse_into<'a>(s: &mut Search<'a>, a: Args<'a>, form: Form) -> Result<(), ParseError> {
    let base = match form {
        Form::Radius | Form::RadiusRo => {
            s.area.centre = lon_lat(a, 2)?;
            let (r, conversion) = radius(a, 4)?;
            s.area.shape = Shape::Radius(r);
            s.area.conversion = conversion;
            6
        }
        Form::ByMember | Form::ByMemberRo => {
            s.from_members.push(a.get(2));
            match radius(a, 3) {
                Ok((r, conversion)) => {
                    s.area.shape = Shape::Radius(r);
                    s.area.conversion = conversion;
                }
                Err(e) => s.radius_error = Some(e),
            }
            5
        }
        Form::Search => 2,
        Form::SearchStore => {
            s.dst = Some(a.get(1));
            s.src = a.get(2);
            3
        }
    };
    let (mut frommember, mut fromloc, mut byradius, mut bybox) = (false, false, false, false);
    let n = a.len();
    let mut i = base;
    while i < n {
        let arg = a.get(i);
        let is = |name: &[u8]| arg.eq_ignore_ascii_case(name);
        // Arguments after this one.
        let after = n - i - 1;
        if is(b"withdist") {
            s.withdist = true;
        } else if is(b"withhash") {
            s.withhash = true;
        } else if is(b"withcoord") {
            s.withcoord = true;
        } else if is(b"any") {
            s.any = true;
        } else if is(b"asc") {
            s.sort = Sort::Asc;
        } else if is(b"desc") {
            s.sort = Sort::Desc;
        } else if is(b"count") && after >= 1 {
            let count = typed::integer(a.get(i + 1))?;
            if count <= 0 {
                return Err(ParseError::Text(COUNT_NOT_POSITIVE));
            }
            s.count = count as u64;
            i += 1;
        } else if (is(b"store") || is(b"storedist")) && after >= 1 && form.store_option() {
            s.dst = Some(a.get(i + 1));
            s.storedist = is(b"storedist");
            i += 1;
        } else if is(b"storedist") && form == Form::SearchStore {
            s.storedist = true;
        } else if is(b"frommember") && after >= 1 && form.search() && !fromloc {
            s.from_members.push(a.get(i + 1));
            frommember = true;
            i += 1;
        } else if is(b"fromlonlat") && after >= 2 && form.search() && !frommember {
            s.area.centre = lon_lat(a, i + 1)?;
            fromloc = true;
            i += 2;
        } else if is(b"byradius") && after >= 2 && form.search() && !bybox {
            let (r, conversion) = radius(a, i + 1)?;
            s.area.shape = Shape::Radius(r);
            s.area.conversion = conversion;
            byradius = true;
            i += 2;
        } else if is(b"bybox") && after >= 3 && form.search() && !byradius {
            let (shape, conversion) = box_shape(a, i + 1)?;
            s.area.shape = shape;
            s.area.conversion = conversion;
            bybox = true;
            i += 3;
        } else {
            return Err(SYNTAX);
        }
        i += 1;
    }
    if s.dst.is_some() && (s.withdist || s.withhash || s.withcoord) {
        return Err(ParseError::Text(if form == Form::SearchStore {
            STORE_WITH_SEARCH
        } else {
            STORE_WITH_RADIUS
        }));
    }
    // Redis names the command as the client wrote it.
    let name = || String::from_utf8_lossy(a.get(0));
    if form.search() && !(frommember || fromloc) {
        return Err(ParseError::Formatted(
            format!(
                "exactly one of FROMMEMBER or FROMLONLAT can be specified for {}",
                name()
            )
            .into_bytes(),
        ));
    }
    if form.search() && !(byradius || bybox) {
        return Err(ParseError::Formatted(
            format!(
                "exactly one of BYRADIUS and BYBOX can be specified for {}",
                name()
            )
            .into_bytes(),
        ));
    }
    if s.any && s.count == 0 {
        return Err(ParseError::Text(ANY_WITHOUT_COUNT));
    }
    Ok(())
}

/// A point found: the cell it was found in, its member, score, position (its cell's
/// centre) and distance in metres.
#[derive(Clone)]
struct Point {
    cell: i64,
    member: Vec<u8>,
    score: f64,
    lon: f64,
    lat: f64,
    dist: f64,
}

/// The most cells a search reads.
const CELLS: usize = 9;

/// Redis's order of the points found: cell by cell, by score then member bytes in each.
fn found_order(a: &Point, b: &Point) -> Ordering {
    a.cell
        .cmp(&b.cell)
        .then(a.score.partial_cmp(&b.score).unwrap_or(Ordering::Equal))
        .then_with(|| a.member.cmp(&b.member))
}

/// `SELECT ... UNION ALL ...` of `n` cells (a power of two, padded with empty ranges): the
/// members of each score range (a range scan of the score index), with the cell's number.
/// Unordered: the points kept are put in Redis's order here ([`found_order`]), which spares
/// the server sorting the rows dropped and compares members whole.
fn cells_sql(n: usize) -> &'static str {
    static SQL: OnceLock<Vec<String>> = OnceLock::new();
    shape(
        &SQL,
        |n| {
            let parts: Vec<String> = (0..n)
                .map(|c| {
                    format!(
                        "SELECT member, score, sk, {c} AS cell FROM {{s}}.redis_zset \
                         WHERE kid = ? AND sk >= ? AND sk < ?"
                    )
                })
                .collect();
            parts.join(" UNION ALL ")
        },
        n,
    )
}

impl Search<'_> {
    /// Runs the search in the batch's transaction, appending its reply.
    pub(in crate::cmd::zsets) async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        // A store form locks what it reads, as the other `STORE` commands do.
        let found = cx
            .tx
            .typed_key(cx.db, self.src, kind::ZSET, self.dst.is_some())
            .await?;
        let Some(row) = crate::cmd::checks::or_wrongtype(cx, found) else {
            return Ok(());
        };
        let mut area = self.area;
        if let Some(row) = &row {
            if !self.from_members.is_empty() {
                let hashes: Vec<[u8; 32]> = self.from_members.iter().map(|m| hash(m)).collect();
                let scores = scores_of(cx, row.kid, &hashes).await?;
                for h in &hashes {
                    let Some(&s) = scores.get(h) else {
                        cx.reply().error(NO_MEMBER);
                        return Ok(());
                    };
                    area.centre = geohash::decode(s);
                }
            }
            if let Some(e) = self.radius_error {
                e.reply(cx);
                return Ok(());
            }
        }
        if let Some(e) = self.error {
            e.reply(cx);
            return Ok(());
        }
        let Some(row) = row else {
            match self.dst {
                Some(dst) => {
                    delete(cx, dst).await?;
                    cx.reply().integer(0);
                }
                None => {
                    cx.reply().array_len(0);
                }
            }
            return Ok(());
        };
        let limit = if self.any { self.count as usize } else { 0 };
        let Some(mut points) = find(cx, row.kid, &area, limit).await? else {
            cx.reply().error(TOO_MANY);
            return Ok(());
        };
        if points.is_empty() && self.dst.is_none() {
            cx.reply().array_len(0);
            return Ok(());
        }
        // COUNT without ASC/DESC returns the nearest (but ANY, the first found).
        let mut sort = self.sort;
        if self.count != 0 && sort == Sort::None && !self.any {
            sort = Sort::Asc;
        }
        let returned = match self.count as usize {
            0 => points.len(),
            count => count.min(points.len()),
        };
        if sort != Sort::None {
            let by = if sort == Sort::Asc {
                sort::asc
            } else {
                sort::desc
            };
            let cmp = |a: &Point, b: &Point| by(a.dist, b.dist);
            if returned == points.len() {
                sort::merge_sort(&mut points, &cmp);
            } else {
                sort::partial_sort(&mut points, &cmp, 0, returned - 1);
            }
        }
        points.truncate(returned);
        let conversion = area.conversion;
        if let Some(dst) = self.dst {
            return store(cx, dst, &points, self.storedist.then_some(conversion)).await;
        }
        let options =
            usize::from(self.withdist) + usize::from(self.withhash) + usize::from(self.withcoord);
        let mut r = cx.reply();
        r.array_len(points.len());
        let mut text = [0u8; 32];
        for p in &points {
            if options > 0 {
                r.array_len(options + 1);
            }
            r.bulk(&p.member);
            if self.withdist {
                let n = geohash::distance_text(p.dist / conversion, &mut text);
                r.bulk(&text[..n]);
            }
            if self.withhash {
                // C's conversion of the score to `long long`.
                r.integer(p.score as i64);
            }
            if self.withcoord {
                r.array_len(2)
                    .double_text(geohash::human(p.lon).as_bytes())
                    .double_text(geohash::human(p.lat).as_bytes());
            }
        }
        Ok(())
    }
}

/// Most bytes of points one search holds (Redis holds every point found too, unbounded).
pub const HELD_MAX: usize = 128 << 20;

/// Past [`HELD_MAX`].
const TOO_MANY: &[u8] = b"manifold: the search found more points than one command may hold (128 MiB); narrow it, or use COUNT n ANY";

/// The points of the area in the set `kid`, in Redis's order; with `limit`, the first
/// `limit` found (`ANY`). `None`: they would take more than [`HELD_MAX`].
async fn find(
    cx: &mut Cx<'_>,
    kid: u64,
    area: &Area,
    limit: usize,
) -> Result<Option<Vec<Point>>, StoreError> {
    let mut held = 0usize;
    let ranges = area.ranges();
    let ranges: Vec<(u64, u64)> = ranges.iter().flatten().copied().collect();
    let mut points = Vec::new();
    // With `ANY` a cell at a time: Redis reads no cell past the `COUNT`th point.
    let run_len = if limit > 0 { 1 } else { CELLS };
    for (at, run) in ranges.chunks(run_len).enumerate() {
        if limit > 0 && points.len() >= limit {
            break;
        }
        let n = padded(run.len());
        let mut params = Vec::with_capacity(3 * n);
        for c in 0..n {
            // Padding: empty ranges.
            let (lo, hi) = run.get(c).copied().unwrap_or((0, 0));
            params.push(Param::UInt(kid));
            params.push(Param::Int(score::order_key(lo as f64)));
            params.push(Param::Int(score::order_key(hi as f64)));
        }
        let first = points.len();
        cx.tx
            .exec_each(cells_sql(n), &params, |row| {
                let cell = row.get(3).and_then(int).unwrap_or(0);
                if let Some(m) = member_row(row) {
                    if let Some((lon, lat, dist)) = area.within(m.score) {
                        held += m.member.len() + std::mem::size_of::<Point>();
                        points.push(Point {
                            cell: (at * run_len) as i64 + cell,
                            member: m.member,
                            score: m.score,
                            lon,
                            lat,
                            dist,
                        });
                        // With `ANY`, only the first `limit` in Redis's order are kept:
                        // the rest are dropped as they come (sorted at twice that).
                        if limit > 0 && points.len() - first >= 2 * limit {
                            points[first..].sort_by(found_order);
                            points.truncate(first + limit);
                            held = points
                                .iter()
                                .map(|p| p.member.len() + std::mem::size_of::<Point>())
                                .sum();
                        }
                        if held > HELD_MAX {
                            return ControlFlow::Break(());
                        }
                    }
                }
                ControlFlow::Continue(())
            })
            .await?;
        if held > HELD_MAX {
            return Ok(None);
        }
        points[first..].sort_by(found_order);
        if limit > 0 {
            points.truncate(limit);
        }
    }
    Ok(Some(points))
}

/// Deletes `dst`, whatever it holds.
async fn delete(cx: &mut Cx<'_>, dst: &[u8]) -> Result<(), StoreError> {
    if let Some(old) = cx.tx.key_meta(cx.db, dst, true).await? {
        cx.tx.delete_key(cx.db, dst, &old).await?;
    }
    Ok(())
}

/// `STORE`/`STOREDIST`/`GEOSEARCHSTORE`: `dst` replaced by a sorted set of the points
/// (scored by their geohash, or by their distance in the unit: `per_unit`), deleted when
/// there are none; replies with their number.
async fn store(
    cx: &mut Cx<'_>,
    dst: &[u8],
    points: &[Point],
    per_unit: Option<f64>,
) -> Result<(), StoreError> {
    delete(cx, dst).await?;
    if !points.is_empty() {
        // A member found twice (Redis would stop on it) is written once.
        let mut seen = HashSet::with_capacity(points.len());
        let writes: Vec<(&[u8], f64)> = points
            .iter()
            .filter(|p| seen.insert(p.member.as_slice()))
            .map(|p| {
                let s = per_unit.map_or(p.score, |u| p.dist / u);
                (p.member.as_slice(), s)
            })
            .collect();
        let row = cx.tx.create_key(cx.db, dst, kind::ZSET).await?;
        upsert(cx, row.kid, &writes).await?;
        cx.tx
            .collection_written(cx.db, dst, &row, writes.len() as i64)
            .await?;
    }
    cx.reply().integer(points.len() as i64);
    Ok(())
}
