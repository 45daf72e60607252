//! The geo searches' parsers, from raw request bytes, without a database: every argument
//! error is kept for the command to reply after `WRONGTYPE` and the members (Redis's order).

// The values parsed are compared exactly: they are what Redis computes with.
#![allow(clippy::float_cmp)]

use super::area::Shape;
use super::search::{Search, Sort};
use super::GeoCommand;
use crate::cmd::typed::testing::parsed;
use crate::cmd::typed::{DataCommand, ParseError};

/// What a request parses to: the search's fields as `check` reads them.
fn search<R>(bytes: &[u8], check: impl FnOnce(&Search<'_>) -> R) -> R {
    parsed(bytes, |r| match r {
        Ok(DataCommand::Geo(GeoCommand::Search(s))) => check(&s),
        other => panic!("{} parsed as {other:?}", bytes.escape_ascii()),
    })
}

/// The argument error a request keeps (`None`: none).
fn kept_error(bytes: &[u8]) -> Option<String> {
    search(bytes, |s| {
        s.error
            .clone()
            .map(|e| String::from_utf8(e.text()).unwrap())
    })
}

fn arity(bytes: &[u8]) -> String {
    parsed(bytes, |r| match r {
        Err(e) => String::from_utf8(e.text()).unwrap(),
        Ok(c) => panic!("parsed as {c:?}"),
    })
}

#[test]
fn geosearch_from_lonlat_by_radius() {
    search(
        b"*10\r\n$9\r\nGEOSEARCH\r\n$1\r\ng\r\n$10\r\nFROMLONLAT\r\n$2\r\n15\r\n$2\r\n37\r\n$8\r\nBYRADIUS\r\n$3\r\n200\r\n$2\r\nKM\r\n$3\r\nASC\r\n$8\r\nWITHDIST\r\n",
        |s| {
            assert_eq!(s.src, b"g");
            assert_eq!(s.dst, None);
            assert_eq!(s.area.centre, (15.0, 37.0));
            assert_eq!(s.area.shape, Shape::Radius(200.0));
            assert_eq!(s.area.conversion, 1000.0);
            assert_eq!(s.sort, Sort::Asc);
            assert!(s.withdist && !s.withhash && !s.withcoord);
            assert!(s.error.is_none() && s.from_members.is_empty());
        },
    );
}

#[test]
fn geosearch_from_member_by_box_with_count_any() {
    search(
        b"geosearch g frommember m bybox 4 2.5 mi count 3 any desc withcoord withhash\r\n",
        |s| {
            assert_eq!(s.from_members, [b"m".as_slice()]);
            assert_eq!(
                s.area.shape,
                Shape::Box {
                    width: 4.0,
                    height: 2.5
                }
            );
            assert_eq!(s.area.conversion, 1609.34);
            assert_eq!((s.count, s.any, s.sort), (3, true, Sort::Desc));
            assert!(s.withcoord && s.withhash && !s.withdist);
            assert!(s.error.is_none());
        },
    );
}

#[test]
fn geosearchstore_and_store_options() {
    search(
        b"geosearchstore dst src fromlonlat 0 0 byradius 1 m storedist\r\n",
        |s| {
            assert_eq!((s.dst, s.src), (Some(b"dst".as_slice()), b"src".as_slice()));
            assert!(s.storedist && s.error.is_none());
        },
    );
    search(b"georadius g 1 2 3 ft store d1 storedist d2\r\n", |s| {
        assert_eq!(s.dst, Some(b"d2".as_slice()));
        assert!(s.storedist);
        assert_eq!(s.area.centre, (1.0, 2.0));
        assert_eq!(s.area.conversion, 0.3048);
    });
    search(
        b"georadiusbymember g m 3 m storedist d1 store d2\r\n",
        |s| {
            assert_eq!(s.dst, Some(b"d2".as_slice()));
            assert!(!s.storedist);
            assert_eq!(s.from_members, [b"m".as_slice()]);
        },
    );
    // The _RO forms and GEOSEARCH have no STORE.
    for req in [
        b"georadius_ro g 1 2 3 m store d\r\n".as_slice(),
        b"georadiusbymember_ro g m 3 m storedist d\r\n",
        b"geosearch g fromlonlat 0 0 byradius 1 m storedist\r\n",
        b"geosearch g fromlonlat 0 0 byradius 1 m store d\r\n",
        b"georadius g 1 2 3 m store\r\n",
    ] {
        assert_eq!(
            kept_error(req).as_deref(),
            Some("syntax error"),
            "{}",
            req.escape_ascii()
        );
    }
}

#[test]
fn argument_errors_kept_in_redis_order() {
    let cases: &[(&[u8], &str)] = &[
        (b"geosearch g fromlonlat 0 0 byradius 1 m count 0\r\n", "COUNT must be > 0"),
        (b"geosearch g fromlonlat 0 0 byradius 1 m count -3\r\n", "COUNT must be > 0"),
        (b"geosearch g fromlonlat 0 0 byradius 1 m count x\r\n", "value is not an integer or out of range"),
        (b"geosearch g fromlonlat 0 0 byradius 1 m any\r\n", "the ANY argument requires COUNT argument"),
        (b"geosearch g fromlonlat 0 0 byradius 1 m count\r\n", "syntax error"),
        (b"geosearch g byradius 1 m withdist asc\r\n", "exactly one of FROMMEMBER or FROMLONLAT can be specified for geosearch"),
        (b"GeoSearch g fromlonlat 1 2 asc withdist\r\n", "exactly one of BYRADIUS and BYBOX can be specified for GeoSearch"),
        (b"geosearch g fromlonlat 0 0 frommember m byradius 1 m\r\n", "syntax error"),
        (b"geosearch g frommember m fromlonlat 0 0 byradius 1 m\r\n", "syntax error"),
        (b"geosearch g fromlonlat 0 0 byradius 1 m bybox 1 1 m\r\n", "syntax error"),
        (b"geosearch g fromlonlat 0 0 bybox 1 1 m byradius 1 m\r\n", "syntax error"),
        (b"geosearch g fromlonlat 200 0 byradius 1 m\r\n", "invalid longitude,latitude pair 200.000000,0.000000"),
        (b"geosearch g fromlonlat 0 86 byradius 1 m\r\n", "invalid longitude,latitude pair 0.000000,86.000000"),
        (b"geosearch g fromlonlat x 0 byradius 1 m\r\n", "value is not a valid float"),
        (b"geosearch g fromlonlat 0 0 byradius x m\r\n", "need numeric radius"),
        (b"geosearch g fromlonlat 0 0 byradius -1 m\r\n", "radius cannot be negative"),
        (b"geosearch g fromlonlat 0 0 byradius 1 yd\r\n", "unsupported unit provided. please use M, KM, FT, MI"),
        (b"geosearch g fromlonlat 0 0 bybox x 1 m\r\n", "need numeric width"),
        (b"geosearch g fromlonlat 0 0 bybox 1 x m\r\n", "need numeric height"),
        (b"geosearch g fromlonlat 0 0 bybox 1 -1 m\r\n", "height or width cannot be negative"),
        (b"geosearch g fromlonlat 0 0 bybox 1 1 parsec\r\n", "unsupported unit provided. please use M, KM, FT, MI"),
        (b"geosearch g fromlonlat 0 0 byradius 1 m frob\r\n", "syntax error"),
        (b"geosearchstore d g fromlonlat 0 0 byradius 1 m withdist\r\n", "GEOSEARCHSTORE is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
        (b"georadius g 0 0 1 m withhash store d\r\n", "STORE option in GEORADIUS is not compatible with WITHDIST, WITHHASH and WITHCOORD options"),
        (b"georadius g 0 0 1 m frommember m\r\n", "syntax error"),
        (b"georadius g 0 0 -1 m\r\n", "radius cannot be negative"),
        (b"georadius g 0 x 1 m\r\n", "value is not a valid float"),
        // The first error stops the reading: the later one is not reached.
        (b"geosearch g fromlonlat 0 0 byradius x m count 0\r\n", "need numeric radius"),
        (b"geosearch g count 0 fromlonlat 0 0 byradius x m\r\n", "COUNT must be > 0"),
    ];
    for (req, want) in cases {
        assert_eq!(
            kept_error(req).as_deref(),
            Some(*want),
            "{}",
            req.escape_ascii()
        );
    }
}

#[test]
fn members_before_the_error_are_kept() {
    // Redis looks each FROMMEMBER up where it stands: a missing one before an error wins.
    search(
        b"geosearch g frommember a frommember b byradius x m\r\n",
        |s| {
            assert_eq!(s.from_members, [b"a".as_slice(), b"b".as_slice()]);
            assert!(s.error.is_some());
        },
    );
    search(b"geosearch g byradius x m frommember a\r\n", |s| {
        assert!(s.from_members.is_empty());
    });
    // GEORADIUSBYMEMBER: its radius is read only when the key exists; the options are
    // read either way.
    search(b"georadiusbymember g m x m count 0\r\n", |s| {
        assert_eq!(
            s.radius_error.clone().map(ParseError::text),
            Some(b"need numeric radius".to_vec())
        );
        assert_eq!(
            s.error.clone().map(ParseError::text),
            Some(b"COUNT must be > 0".to_vec())
        );
    });
}

#[test]
fn arity_is_the_command_table_s() {
    assert_eq!(
        arity(b"geosearch g fromlonlat 0 0 byradius\r\n"),
        "wrong number of arguments for 'geosearch' command"
    );
    assert_eq!(
        arity(b"geosearchstore d g fromlonlat 0 0 byradius\r\n"),
        "wrong number of arguments for 'geosearchstore' command"
    );
    assert_eq!(
        arity(b"georadius g 0 0 1\r\n"),
        "wrong number of arguments for 'georadius' command"
    );
    assert_eq!(
        arity(b"georadiusbymember_ro g m 1\r\n"),
        "wrong number of arguments for 'georadiusbymember_ro' command"
    );
}
