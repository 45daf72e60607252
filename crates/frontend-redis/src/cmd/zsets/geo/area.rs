//! Where a geo search looks and what it keeps, as Redis 7.0 decides it
//! (`geohashCalculateAreasByShapeWGS84` in `geohash_helper.c`, `membersOfAllNeighbors` and
//! `geoWithinShape` in `geo.c`): the search's centre cell at a step estimated from the radius
//! (one step coarser when a neighbour does not reach the bounding box), its eight neighbours
//! minus those the bounding box does not reach, each cell a range of scores; a point of those
//! ranges is kept when its cell's centre is within the radius (haversine) or the box.
//!
//! Every float operation is Redis's, in Redis's order, so a point near the edge is in or out
//! as redis-server decides, and its distance has the same bits. Pure functions, no database.

use std::f64::consts::PI;

use super::super::geohash::{
    self, deg_rad, spread, squash, EARTH_RADIUS_IN_METERS, LAT_MAX, LAT_MIN, LONG_MAX, LONG_MIN,
};

const MERCATOR_MAX: f64 = 20_037_726.37;

/// What is searched around the centre, in the request's unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// `BYRADIUS r unit` (and `GEORADIUS*`).
    Radius(f64),
    /// `BYBOX width height unit`.
    Box { width: f64, height: f64 },
}

/// A search: its centre `(longitude, latitude)`, shape and metres per unit (Redis's
/// `GeoShape`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Area {
    pub centre: (f64, f64),
    pub shape: Shape,
    pub conversion: f64,
}

/// A geohash cell: `bits` of `step` bits per coordinate (`GeoHashBits`); all zero is a
/// neighbour left out (`GZERO`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Cell {
    bits: u64,
    step: u32,
}

impl Cell {
    const ZERO: Cell = Cell { bits: 0, step: 0 };

    fn is_zero(self) -> bool {
        self.bits == 0 && self.step == 0
    }

    /// The scores of the cell's points: `min` (included) to `max` (excluded), as
    /// `scoresOfGeoHashBox` computes them.
    fn scores(self) -> (u64, u64) {
        let shift = 52 - self.step * 2;
        (self.bits << shift, (self.bits + 1) << shift)
    }
}

/// A cell's bounds (`GeoHashArea`).
#[derive(Debug, Clone, Copy)]
struct Bounds {
    lon_min: f64,
    lon_max: f64,
    lat_min: f64,
    lat_max: f64,
}

/// `geohashEncode` of a valid point over Web Mercator's latitudes at `step`.
fn encode(lon: f64, lat: f64, step: u32) -> Cell {
    let mut lat_offset = (lat - LAT_MIN) / (LAT_MAX - LAT_MIN);
    let mut long_offset = (lon - LONG_MIN) / (LONG_MAX - LONG_MIN);
    lat_offset *= (1u64 << step) as f64;
    long_offset *= (1u64 << step) as f64;
    // C's conversion to `uint32_t`: truncation (the offsets are in 0..=2^26).
    Cell {
        bits: spread(lat_offset as u32) | spread(long_offset as u32) << 1,
        step,
    }
}

/// `geohashDecode` over Web Mercator's latitudes.
fn decode(cell: Cell) -> Bounds {
    let lat_scale = LAT_MAX - LAT_MIN;
    let long_scale = LONG_MAX - LONG_MIN;
    let ilato = squash(cell.bits);
    let ilono = squash(cell.bits >> 1);
    let cells = (1u64 << cell.step) as f64;
    Bounds {
        lat_min: LAT_MIN + (f64::from(ilato) * 1.0 / cells) * lat_scale,
        lat_max: LAT_MIN + (f64::from(ilato.wrapping_add(1)) * 1.0 / cells) * lat_scale,
        lon_min: LONG_MIN + (f64::from(ilono) * 1.0 / cells) * long_scale,
        lon_max: LONG_MIN + (f64::from(ilono.wrapping_add(1)) * 1.0 / cells) * long_scale,
    }
}

const EVEN: u64 = 0x5555_5555_5555_5555;
const ODD: u64 = 0xaaaa_aaaa_aaaa_aaaa;

/// `geohash_move_x`/`geohash_move_y`: one cell east (`d > 0`) or west, north or south,
/// wrapping around.
fn moved(cell: Cell, dx: i8, dy: i8) -> Cell {
    let mut bits = cell.bits;
    let keep = 64 - cell.step * 2;
    if dx != 0 {
        let mut x = bits & ODD;
        let y = bits & EVEN;
        let zz = EVEN >> keep;
        if dx > 0 {
            x = x.wrapping_add(zz + 1);
        } else {
            x |= zz;
            x = x.wrapping_sub(zz + 1);
        }
        x &= ODD >> keep;
        bits = x | y;
    }
    if dy != 0 {
        let x = bits & ODD;
        let mut y = bits & EVEN;
        let zz = ODD >> keep;
        if dy > 0 {
            y = y.wrapping_add(zz + 1);
        } else {
            y |= zz;
            y = y.wrapping_sub(zz + 1);
        }
        y &= EVEN >> keep;
        bits = x | y;
    }
    Cell {
        bits,
        step: cell.step,
    }
}

/// Which of the nine cells, in `membersOfAllNeighbors`' order.
const CENTRE: usize = 0;
const NORTH: usize = 1;
const SOUTH: usize = 2;
const EAST: usize = 3;
const WEST: usize = 4;
const NORTH_EAST: usize = 5;
const NORTH_WEST: usize = 6;
const SOUTH_EAST: usize = 7;
const SOUTH_WEST: usize = 8;

/// The cell and its neighbours, in `membersOfAllNeighbors`' order (centre, N, S, E, W, NE,
/// NW, SE, SW).
fn nine(cell: Cell) -> [Cell; 9] {
    [
        cell,
        moved(cell, 0, 1),
        moved(cell, 0, -1),
        moved(cell, 1, 0),
        moved(cell, -1, 0),
        moved(cell, 1, 1),
        moved(cell, -1, 1),
        moved(cell, 1, -1),
        moved(cell, -1, -1),
    ]
}

fn rad_deg(r: f64) -> f64 {
    r / (PI / 180.0)
}

/// `geohashEstimateStepsByRadius`.
fn estimate_steps(mut range_meters: f64, lat: f64) -> u32 {
    if range_meters == 0.0 {
        return 26;
    }
    let mut step: i32 = 1;
    while range_meters < MERCATOR_MAX {
        range_meters *= 2.0;
        step += 1;
    }
    step -= 2;
    if !(-66.0..=66.0).contains(&lat) {
        step -= 1;
        if !(-80.0..=80.0).contains(&lat) {
            step -= 1;
        }
    }
    step.clamp(1, 26) as u32
}

impl Area {
    /// `geohashBoundingBox`: min longitude, min latitude, max longitude, max latitude.
    fn bounding_box(&self) -> [f64; 4] {
        let (longitude, latitude) = self.centre;
        let (height, width) = match self.shape {
            Shape::Radius(r) => (self.conversion * r, self.conversion * r),
            Shape::Box { width, height } => (
                self.conversion * (height / 2.0),
                self.conversion * (width / 2.0),
            ),
        };
        let lat_delta = rad_deg(height / EARTH_RADIUS_IN_METERS);
        let long_delta_top =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude + lat_delta).cos());
        let long_delta_bottom =
            rad_deg(width / EARTH_RADIUS_IN_METERS / deg_rad(latitude - lat_delta).cos());
        let southern = latitude < 0.0;
        let long_delta = if southern {
            long_delta_bottom
        } else {
            long_delta_top
        };
        [
            longitude - long_delta,
            latitude - lat_delta,
            longitude + long_delta,
            latitude + lat_delta,
        ]
    }

    /// The cells searched, in Redis's order, as score ranges: `None` for a neighbour left out
    /// (not reaching the bounding box, or the same as the cell searched just before it).
    pub fn ranges(&self) -> [Option<(u64, u64)>; 9] {
        let [min_lon, min_lat, max_lon, max_lat] = self.bounding_box();
        let (longitude, latitude) = self.centre;
        let radius_meters = match self.shape {
            Shape::Radius(r) => r,
            Shape::Box { width, height } => {
                ((width / 2.0) * (width / 2.0) + (height / 2.0) * (height / 2.0)).sqrt()
            }
        } * self.conversion;
        let mut steps = estimate_steps(radius_meters, latitude);
        let mut cell = encode(longitude, latitude, steps);
        let mut cells = nine(cell);
        let decrease_step = decode(cells[NORTH]).lat_max < max_lat
            || decode(cells[SOUTH]).lat_min > min_lat
            || decode(cells[EAST]).lon_max < max_lon
            || decode(cells[WEST]).lon_min > min_lon;
        if steps > 1 && decrease_step {
            steps -= 1;
            cell = encode(longitude, latitude, steps);
            cells = nine(cell);
        }
        let area = decode(cell);
        if steps >= 2 {
            let mut drop = |which: [usize; 3]| which.iter().for_each(|&i| cells[i] = Cell::ZERO);
            if area.lat_min < min_lat {
                drop([SOUTH, SOUTH_WEST, SOUTH_EAST]);
            }
            if area.lat_max > max_lat {
                drop([NORTH, NORTH_EAST, NORTH_WEST]);
            }
            if area.lon_min < min_lon {
                drop([WEST, SOUTH_WEST, NORTH_WEST]);
            }
            if area.lon_max > max_lon {
                drop([EAST, SOUTH_EAST, NORTH_EAST]);
            }
        }
        let mut out = [None; 9];
        // Redis skips a cell equal to the last one searched, unless that was the centre
        // (`last_processed` is 0 then).
        let mut last_processed = CENTRE;
        for (i, c) in cells.iter().enumerate() {
            if c.is_zero() || (last_processed != CENTRE && *c == cells[last_processed]) {
                continue;
            }
            out[i] = Some(c.scores());
            last_processed = i;
        }
        out
    }

    /// `geoWithinShape`: the point of `score` (its cell's centre) and its distance from the
    /// centre in metres, when it is in the area.
    pub fn within(&self, score: f64) -> Option<(f64, f64, f64)> {
        let (lon, lat) = geohash::decode(score);
        let (x1, y1) = self.centre;
        match self.shape {
            Shape::Radius(r) => {
                let d = geohash::distance(x1, y1, lon, lat);
                (d <= r * self.conversion).then_some((lon, lat, d))
            }
            Shape::Box { width, height } => {
                let (width_m, height_m) = (width * self.conversion, height * self.conversion);
                let lat_distance = EARTH_RADIUS_IN_METERS * (deg_rad(y1) - deg_rad(lat)).abs();
                if lat_distance > height_m / 2.0 {
                    return None;
                }
                if geohash::distance(lon, lat, x1, lat) > width_m / 2.0 {
                    return None;
                }
                Some((lon, lat, geohash::distance(x1, y1, lon, lat)))
            }
        }
    }
}

// Cell bounds are compared exactly: they are Redis's arithmetic.
#[cfg(test)]
#[allow(clippy::float_cmp)]
mod tests {
    use super::*;

    #[test]
    fn neighbours_wrap_around_the_map() {
        let c = encode(179.9, 0.0, 3);
        let east = moved(c, 1, 0);
        assert!(decode(east).lon_min == -180.0);
        assert_eq!(moved(east, -1, 0), c);
        let top = encode(0.0, 85.0, 2);
        assert_eq!(moved(moved(top, 0, 1), 0, -1), top);
        assert_eq!(decode(moved(top, 0, 1)).lat_min, LAT_MIN);
    }

    #[test]
    fn steps_as_redis_estimates_them() {
        assert_eq!(estimate_steps(0.0, 0.0), 26);
        assert_eq!(estimate_steps(1000.0, 0.0), 14);
        assert_eq!(estimate_steps(1000.0, 70.0), 13);
        assert_eq!(estimate_steps(1000.0, -81.0), 12);
        assert_eq!(estimate_steps(f64::INFINITY, 0.0), 1);
        assert_eq!(estimate_steps(1e-9, 0.0), 26);
    }

    #[test]
    fn a_small_radius_searches_its_cell_and_the_neighbours_it_reaches() {
        let area = Area {
            centre: (13.361_389, 38.115_556),
            shape: Shape::Radius(200.0),
            conversion: 1000.0,
        };
        let ranges = area.ranges();
        assert!(ranges[CENTRE].is_some());
        let palermo = geohash::encode(13.361_389, 38.115_556).unwrap();
        let inside = ranges
            .iter()
            .flatten()
            .any(|&(lo, hi)| (lo..hi).contains(&palermo));
        assert!(inside);
        let (_, _, d) = area.within(palermo as f64).unwrap();
        assert!(d < 1.0);
        let catania = geohash::encode(15.087_269, 37.502_669).unwrap() as f64;
        // GEODIST Palermo Catania is 166.2742 km: within 200 km, not within 100 km.
        assert!(area.within(catania).is_some());
        let near = Area {
            shape: Shape::Radius(100.0),
            ..area
        };
        assert!(near.within(catania).is_none());
        let flat = Area {
            shape: Shape::Box {
                width: 400.0,
                height: 20.0,
            },
            ..area
        };
        assert!(flat.within(catania).is_none());
    }
}
