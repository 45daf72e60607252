//! Why a session keeps its backend connection between statements.
//!
//! A multiplexed session gives its backend connection back after every statement unless
//! something lives on that connection that cannot be moved to another one. Each such thing is
//! a pin reason; the session stays pinned while any reason holds, and each reason is counted
//! (per worker, when a session becomes pinned for it) and logged at debug level.

use std::sync::atomic::{AtomicU64, Ordering};

use manifold_sql_lex::Scan;

/// Reasons a session is pinned to its backend connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinReason {
    /// Multiplexing is off in the configuration.
    Disabled,
    /// An open transaction (explicit, or implicit under `autocommit=0`).
    Transaction,
    /// `LOCK TABLES` / `FLUSH TABLES ... WITH READ LOCK` until `UNLOCK TABLES`.
    LockTables,
    /// `GET_LOCK()` until as many `RELEASE_LOCK()`s, or `RELEASE_ALL_LOCKS()`.
    NamedLock,
    /// `CREATE TEMPORARY TABLE` until as many `DROP TEMPORARY TABLE`s.
    TemporaryTable,
    /// A prepared statement's open cursor, until fetched to the end, reset or closed.
    Cursor,
    /// `COM_STMT_SEND_LONG_DATA` sent parameter data ahead of the execute.
    LongData,
    /// SQL-level `PREPARE`/`EXECUTE`/`DEALLOCATE`.
    SqlPrepare,
    /// User variables (`@x`) an assignment left that manifold could not read back.
    UserVariable,
    /// `HANDLER ... OPEN`.
    Handler,
    /// `SET ROLE`.
    Role,
    /// `SET TRANSACTION`: holds for the next transaction.
    SetTransaction,
    /// `sql_log_bin` turned off (restoring it needs privileges sessions may lack).
    SqlLogBin,
    /// The session changed `session_track_*` itself: manifold can no longer see its changes.
    SessionTracking,
    /// The backend does not report state changes.
    NoTracking,
    /// The server reported a state change manifold cannot attribute.
    UntrackedState,
    /// `LAST_INSERT_ID(expr)`: the value lives on the connection until the next insert id.
    LastInsertIdExpr,
    /// The previous statement left something the next may ask this connection about:
    /// `SQL_CALC_FOUND_ROWS`, or, for a session that prepared a statement reading
    /// `ROW_COUNT()`, `FOUND_ROWS()` or warnings, affected rows, warnings or an insert id.
    /// Held for one statement.
    PreviousStatement,
}

pub const REASONS: [PinReason; 18] = [
    PinReason::Disabled,
    PinReason::Transaction,
    PinReason::LockTables,
    PinReason::NamedLock,
    PinReason::TemporaryTable,
    PinReason::Cursor,
    PinReason::LongData,
    PinReason::SqlPrepare,
    PinReason::UserVariable,
    PinReason::Handler,
    PinReason::Role,
    PinReason::SetTransaction,
    PinReason::SqlLogBin,
    PinReason::SessionTracking,
    PinReason::NoTracking,
    PinReason::UntrackedState,
    PinReason::LastInsertIdExpr,
    PinReason::PreviousStatement,
];

impl PinReason {
    pub fn name(self) -> &'static str {
        match self {
            PinReason::Disabled => "multiplexing_disabled",
            PinReason::Transaction => "transaction",
            PinReason::LockTables => "lock_tables",
            PinReason::NamedLock => "get_lock",
            PinReason::TemporaryTable => "temporary_table",
            PinReason::Cursor => "open_cursor",
            PinReason::LongData => "long_data",
            PinReason::SqlPrepare => "sql_prepare",
            PinReason::UserVariable => "user_variable",
            PinReason::Handler => "handler",
            PinReason::Role => "set_role",
            PinReason::SetTransaction => "set_transaction",
            PinReason::SqlLogBin => "sql_log_bin",
            PinReason::SessionTracking => "session_tracking_changed",
            PinReason::NoTracking => "backend_without_tracking",
            PinReason::UntrackedState => "untracked_state_change",
            PinReason::LastInsertIdExpr => "last_insert_id_expr",
            PinReason::PreviousStatement => "previous_statement_info",
        }
    }

    fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// Times sessions became pinned, per reason, and statements written behind another
/// session's (pipelining). Each worker owns one and is its only writer (plain load + store,
/// no read-modify-write); readers sum over workers.
#[derive(Debug, Default)]
pub struct PinCounters([AtomicU64; REASONS.len()], AtomicU64);

impl PinCounters {
    pub fn add_pipelined(&self, n: u64) {
        self.1
            .store(self.1.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    pub fn pipelined(&self) -> u64 {
        self.1.load(Ordering::Relaxed)
    }

    fn bump(&self, r: PinReason) {
        let c = &self.0[r as usize];
        c.store(c.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
    }

    pub fn get(&self, r: PinReason) -> u64 {
        self.0[r as usize].load(Ordering::Relaxed)
    }
}

/// A session's pin state.
#[derive(Debug, Default)]
pub struct Pins {
    /// Reasons that hold until the session is reset (`COM_RESET_CONNECTION`,
    /// `COM_CHANGE_USER`), or until a statement lifts them.
    reasons: u32,
    named_locks: u32,
    temporary_tables: u32,
}

impl Pins {
    pub fn is_pinned(&self) -> bool {
        self.reasons != 0
    }

    /// Something other than the previous statement's leftovers lives on the connection:
    /// losing the connection loses session state.
    pub fn holds_server_state(&self) -> bool {
        self.reasons & !PinReason::PreviousStatement.bit() != 0
    }

    /// Nothing but the transaction lives on the connection (what multiplexing being off or
    /// the previous statement holds aside): running the transaction's statements again on
    /// another connection rebuilds all of it.
    pub fn replayable(&self) -> bool {
        let allowed = PinReason::Disabled.bit()
            | PinReason::Transaction.bit()
            | PinReason::PreviousStatement.bit();
        self.reasons & !allowed == 0
    }

    pub fn has(&self, r: PinReason) -> bool {
        self.reasons & r.bit() != 0
    }

    fn set(&mut self, r: PinReason, on: bool, counters: &PinCounters, session: u32) {
        if on && !self.has(r) {
            counters.bump(r);
            tracing::debug!(connection = session, reason = r.name(), "session pinned");
        }
        if on {
            self.reasons |= r.bit();
        } else if self.has(r) {
            self.reasons &= !r.bit();
            tracing::debug!(connection = session, reason = r.name(), "pin released");
        }
    }

    pub fn pin(&mut self, r: PinReason, counters: &PinCounters, session: u32) {
        self.set(r, true, counters, session);
    }

    pub fn clear(&mut self) {
        *self = Pins::default();
    }

    /// Whether any of the session's prepared statements has an open cursor or parameter
    /// data sent ahead, after a prepared-statement command.
    pub fn statements(
        &mut self,
        cursor: bool,
        long_data: bool,
        counters: &PinCounters,
        session: u32,
    ) {
        self.set(PinReason::Cursor, cursor, counters, session);
        self.set(PinReason::LongData, long_data, counters, session);
    }

    /// Updates the pins after a query ran: `scan` is what the lexer saw in it, `ok` whether
    /// it succeeded, `in_transaction` the server's status after it.
    pub fn after_query(
        &mut self,
        scan: &Scan,
        ok: bool,
        in_transaction: bool,
        counters: &PinCounters,
        session: u32,
    ) {
        let c = counters;
        if scan.has(Scan::LOCK_TABLES) {
            self.set(PinReason::LockTables, true, c, session);
        } else if scan.has(Scan::UNLOCK_TABLES) && ok {
            self.set(PinReason::LockTables, false, c, session);
        }
        if scan.has(Scan::GET_LOCK) {
            self.named_locks += 1;
        }
        if scan.has(Scan::RELEASE_ALL_LOCKS) && ok {
            self.named_locks = 0;
        } else if scan.has(Scan::RELEASE_LOCK) && ok {
            self.named_locks = self.named_locks.saturating_sub(1);
        }
        self.set(PinReason::NamedLock, self.named_locks > 0, c, session);
        if scan.has(Scan::CREATE_TEMPORARY) {
            self.temporary_tables += 1;
        } else if scan.has(Scan::DROP_TEMPORARY) && ok {
            self.temporary_tables = self.temporary_tables.saturating_sub(1);
        }
        self.set(
            PinReason::TemporaryTable,
            self.temporary_tables > 0,
            c,
            session,
        );
        for (flag, reason) in [
            (Scan::SQL_PREPARE, PinReason::SqlPrepare),
            (Scan::HANDLER, PinReason::Handler),
            (Scan::SET_ROLE, PinReason::Role),
            (Scan::SETS_LAST_INSERT_ID, PinReason::LastInsertIdExpr),
        ] {
            if scan.has(flag) {
                self.set(reason, true, c, session);
            }
        }
        if scan.has(Scan::SET_TRANSACTION) {
            self.set(PinReason::SetTransaction, true, c, session);
        } else if !in_transaction {
            self.set(PinReason::SetTransaction, false, c, session);
        }
    }

    /// The server's status after a command says whether a transaction is open.
    pub fn transaction(&mut self, open: bool, counters: &PinCounters, session: u32) {
        self.set(PinReason::Transaction, open, counters, session);
    }

    /// Holds the connection for the next statement (or releases that hold).
    /// The reasons the session is pinned, by name.
    pub fn describe(&self) -> String {
        describe_bits(self.reasons)
    }

    /// The reasons as a bit set, for publishing ([`describe_bits`] reads it).
    pub fn bits(&self) -> u32 {
        self.reasons
    }

    pub fn hold_for_next(&mut self, hold: bool, counters: &PinCounters, session: u32) {
        self.set(PinReason::PreviousStatement, hold, counters, session);
    }

    pub fn release(&mut self, r: PinReason, counters: &PinCounters, session: u32) {
        self.set(r, false, counters, session);
    }
}

/// The reasons in a bit set from [`Pins::bits`], by name, comma-separated.
pub fn describe_bits(bits: u32) -> String {
    let names: Vec<&str> = REASONS
        .iter()
        .filter(|r| bits & r.bit() != 0)
        .map(|r| r.name())
        .collect();
    names.join(", ")
}
