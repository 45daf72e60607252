//! Data commands as typed values: a request's arguments are parsed once ([`Parse`], the
//! parser each [`super::data::Spec`] carries) into its family's command (`StringCommand`,
//! ...), which is then applied in the batch's transaction ([`crate::exec::run_one`]).
//!
//! A parser does every check Redis does before it looks at the data (syntax, integers,
//! ranges, a subform's number of arguments), with Redis 7.0's texts ([`ParseError`]); it
//! reads no row, so it runs (and is tested) without a database. A check Redis makes only
//! after reading the key (say `GETEX`'s expire time, checked after `WRONGTYPE`) stays in the
//! command's `apply`, which says so. A parse error is the command's reply, in its place in
//! the batch.

use std::fmt;

use super::expiry::ExpiryCommand;
use super::hashes::HashCommand;
use super::keys::object::ObjectCommand;
use super::keys::KeyCommand;
use super::lists::ListCommand;
use super::sets::SetCommand;
use super::streams::StreamCommand;
use super::strings::bitfield::BitField;
use super::strings::bits::BitCommand;
use super::strings::pf::HllCommand;
use super::strings::StringCommand;
use super::zsets::geo::GeoCommand;
use super::zsets::ZSetCommand;
use super::Args;
use crate::errors;
use crate::store::context::Cx;
use crate::store::StoreError;

/// A command's parser: its arguments (arity checked by the command table) to a typed
/// command, or the error Redis answers before touching data.
pub type Parse = for<'a> fn(Args<'a>) -> Result<DataCommand<'a>, ParseError>;

/// A data command, parsed.
#[derive(Debug, PartialEq)]
pub enum DataCommand<'a> {
    Strings(StringCommand<'a>),
    Hashes(HashCommand<'a>),
    Keys(KeyCommand<'a>),
    Expiry(ExpiryCommand<'a>),
    Lists(ListCommand<'a>),
    Sets(SetCommand<'a>),
    ZSets(ZSetCommand<'a>),
    Streams(StreamCommand<'a>),
    /// `PFADD`, `PFCOUNT`, `PFMERGE` (of the strings family).
    Hll(HllCommand<'a>),
    Bits(BitCommand<'a>),
    BitField(BitField<'a>),
    /// `GEOADD`, `GEOPOS`, `GEODIST`, `GEOHASH` (of the sorted sets family).
    Geo(GeoCommand<'a>),
    /// `OBJECT`, `MEMORY` (of the keys family).
    Object(ObjectCommand<'a>),
}

impl DataCommand<'_> {
    /// Runs the command in the batch's transaction through its family, appending its
    /// reply.
    pub async fn apply(self, cx: &mut Cx<'_>) -> Result<(), StoreError> {
        match self {
            DataCommand::Strings(c) => c.apply(cx).await,
            DataCommand::Hashes(c) => c.apply(cx).await,
            DataCommand::Keys(c) => c.apply(cx).await,
            DataCommand::Expiry(c) => c.apply(cx).await,
            DataCommand::Lists(c) => c.apply(cx).await,
            DataCommand::Sets(c) => c.apply(cx).await,
            DataCommand::ZSets(c) => c.apply(cx).await,
            DataCommand::Streams(c) => c.apply(cx).await,
            DataCommand::Hll(c) => c.apply(cx).await,
            DataCommand::Bits(c) => c.apply(cx).await,
            DataCommand::BitField(c) => c.apply(cx).await,
            DataCommand::Geo(c) => c.apply(cx).await,
            DataCommand::Object(c) => c.apply(cx).await,
        }
    }
}

/// Why a request's arguments are refused before any data is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParseError {
    /// `-ERR <text>` (or the text's own code when it starts with `-`).
    Text(&'static [u8]),
    /// A text made with the arguments (`Unsupported option <opt>`), built only when refused.
    Formatted(Vec<u8>),
    /// `ERR wrong number of arguments for '<name>' command`: a subform's count, past the
    /// command table's arity.
    Arity(&'static str),
}

impl ParseError {
    /// The error reply's text, as [`manifold_redis_proto::Reply::error`] takes it.
    pub fn text(self) -> Vec<u8> {
        match self {
            ParseError::Text(t) => t.to_vec(),
            ParseError::Formatted(t) => t,
            ParseError::Arity(name) => {
                let mut text = Vec::with_capacity(64);
                errors::arity(&mut text, name);
                text
            }
        }
    }

    /// Replies with the error.
    pub fn reply(self, cx: &mut Cx<'_>) {
        match self {
            ParseError::Text(t) => {
                cx.reply().error(t);
            }
            ParseError::Formatted(t) => {
                cx.reply().error(&t);
            }
            ParseError::Arity(name) => super::checks::arity(cx, name),
        }
    }
}

/// Shorthand for the parsers: a syntax error.
pub const SYNTAX: ParseError = ParseError::Text(errors::SYNTAX);
/// Shorthand for the parsers: not an integer (or out of `i64`'s range).
pub const NOT_INTEGER: ParseError = ParseError::Text(errors::NOT_INTEGER);

/// An integer argument as Redis's `getLongLongFromObjectOrReply` takes it.
pub fn integer(arg: &[u8]) -> Result<i64, ParseError> {
    super::parse_i64(arg).ok_or(NOT_INTEGER)
}

/// Arguments compare by their bytes (typed commands keep whole requests for their lists of
/// keys, and tests compare commands).
impl PartialEq for Args<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.from(0).eq(other.from(0))
    }
}

impl fmt::Debug for Args<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.from(0).map(|a| a.escape_ascii().to_string()))
            .finish()
    }
}

/// Test helpers: requests in raw protocol bytes, parsed as the door parses them.
#[cfg(test)]
pub mod testing {
    use manifold_redis_proto::{Limits, Request};

    use super::{DataCommand, ParseError};
    use crate::cmd::{data, Args};

    /// Parses `bytes` (one request, multibulk or inline) through the command table (the
    /// arity refusal included) and the command's parser, and hands the result to `check`.
    pub fn parsed<R>(
        bytes: &[u8],
        check: impl FnOnce(Result<DataCommand<'_>, ParseError>) -> R,
    ) -> R {
        let mut req = Request::new();
        let used = req.parse(bytes, &Limits::default()).unwrap().unwrap();
        assert_eq!(used, bytes.len(), "one whole request");
        let args = Args::new(&req, bytes);
        let spec = data::lookup(args.get(0)).expect("a data command");
        let entry = crate::cmd::table::table()
            .get(spec.name)
            .expect("every data command is in the table");
        if !entry.arity_ok(args.len()) {
            return check(Err(ParseError::Arity(spec.name)));
        }
        check((spec.parse)(args))
    }

    /// The error text a request is refused with (panics when it parses).
    pub fn error(bytes: &[u8]) -> String {
        parsed(bytes, |r| match r {
            Ok(c) => panic!("{} parsed as {c:?}", bytes.escape_ascii()),
            Err(e) => String::from_utf8(e.text()).unwrap(),
        })
    }

    /// The command a request parses to, as `Debug` shows it (panics when refused).
    pub fn command(bytes: &[u8]) -> String {
        parsed(bytes, |r| match r {
            Ok(c) => format!("{c:?}"),
            Err(e) => panic!(
                "{} refused: {}",
                bytes.escape_ascii(),
                String::from_utf8_lossy(&e.text())
            ),
        })
    }
}
