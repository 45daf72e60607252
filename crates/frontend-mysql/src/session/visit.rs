//! A statement that names a schema another cluster holds runs on that cluster: with several
//! clusters, `SHOW CREATE TABLE shop.t`, `SELECT ... FROM information_schema.columns WHERE
//! table_schema = 'shop'` or `INSERT INTO shop.t ...` from a session whose own schema (or
//! none) puts it on another cluster go to the cluster listing `shop` — for that statement
//! only. CDC consumers ask such questions about the tables of the global binlog with no
//! schema of their own.
//!
//! Only a session holding no backend connection, in autocommit mode and not pinned moves:
//! one in a transaction, or pinned by state on its connection, stays where that state is.
//! The statement must name exactly one schema (besides those every server has) and a
//! `[[clusters]]` entry must list it: one statement runs on one cluster. On that cluster the
//! connection has the named schema current (the session's own, which that cluster may not
//! have, is neither made current there nor changed); the session's next command goes where
//! its schema and user say, unless the statement left it holding the connection (a
//! `SQL_CALC_FOUND_ROWS` read, a lock), which keeps it there like any held connection.

use manifold_mysql_proto::consts::status;
use manifold_sql_lex::{Scan, SchemaOf, Verb};

use super::Session;

/// The session's statements run on another cluster than its schema's for now.
pub(super) struct Visit {
    /// The cluster of the schema the statement named (a `KILL QUERY` of a session elsewhere
    /// may borrow a connection on another one meanwhile).
    cluster: usize,
    /// The schema the statement named, current on the connection there.
    schema: Vec<u8>,
    /// The session's schema when it moved: once that changes (a `USE` on the held
    /// connection), the connection's schema is the session's again.
    from: Option<Vec<u8>>,
}

/// Where a statement naming a schema another cluster holds goes.
pub(super) struct Destination {
    cluster: usize,
    /// The schema it names.
    schema: Vec<u8>,
}

/// The schema the statement the session visits `cluster` for named, unless the session's
/// schema changed since (`visit` and `schema`: the session's fields, as callers hold
/// others).
pub(super) fn visiting_schema<'a>(
    visit: Option<&'a Visit>,
    schema: Option<&[u8]>,
    cluster: usize,
) -> Option<&'a [u8]> {
    visit
        .filter(|v| v.cluster == cluster && v.from.as_deref() == schema)
        .map(|v| v.schema.as_slice())
}

/// The schema a connection to `cluster` the session borrows now must have current: the one
/// of the statement visiting that cluster, else the session's own.
pub(super) fn wanted_schema<'a>(
    visit: Option<&'a Visit>,
    schema: Option<&'a [u8]>,
    cluster: usize,
) -> Option<&'a [u8]> {
    visiting_schema(visit, schema, cluster).or(schema)
}

impl Session {
    /// The cluster a query (`sql`, scanned as `scan`) goes to by the schema it names, and that
    /// schema, when that is not the cluster the session would use; `None` for nearly every
    /// statement at the cost of a flag test (the lexer marks qualified table names).
    pub(super) fn statement_cluster(&self, scan: &Scan, sql: &[u8]) -> Option<Destination> {
        let shared = &self.fe.shared;
        if shared.clusters.len() <= 1
            || !(scan.has(Scan::QUALIFIED_TABLE)
                || matches!(
                    scan.verb,
                    Verb::Show | Verb::Create | Verb::Drop | Verb::Alter
                ))
            || scan.statements != 1
            || self.lease.is_some()
            || self.pins.is_pinned()
            || self.status & status::IN_TRANS != 0
            || self.status & status::AUTOCOMMIT == 0
        {
            return None;
        }
        let SchemaOf::One(schema) = manifold_sql_lex::schema_of(sql) else {
            return None;
        };
        let cluster = shared.cluster_listing(schema)?;
        (cluster != shared.cluster_for(self.schema.as_deref(), &self.user.name)).then(|| {
            // A database it creates or drops cannot be current there: one every server has is.
            let current: &[u8] = if manifold_sql_lex::names_database(sql) {
                b"information_schema"
            } else {
                schema
            };
            Destination {
                cluster,
                schema: current.to_vec(),
            }
        })
    }

    /// The command about to run goes to `cluster` for the schema it names (from
    /// [`Session::statement_cluster`]).
    pub(super) fn visit(&mut self, to: Destination) {
        self.cluster = to.cluster;
        self.visit = Some(Visit {
            cluster: to.cluster,
            schema: to.schema,
            from: self.schema.clone(),
        });
    }
}
