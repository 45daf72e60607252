//! Why a batch could not run, and what it does next: decided once, where the error is made.
//!
//! The model is Pingora's single error type, as the backend crate's [`BackendError`] follows
//! it: the code that makes an error knows how far the batch got and records on it what the
//! batch may do ([`Retry`]); the loops that run batches (`exec::run_batch`, `EXEC`, a
//! blocking command's attempt) hand it to [`Attempts::next`], which only counts.
//!
//! - A deadlock (1213), a lock wait timeout (1205) or a duplicate key (1062): a conflict with
//!   another transaction, which rolled this one back. Writes run in read committed, where a
//!   locking read of an absent key locks no gap: two batches creating the same key both find
//!   it absent, and the second's `INSERT` fails with 1062 once the first commits; run again,
//!   it finds the key. The batch runs again from its start after a pause
//!   ([`Retry::AfterPause`]), at most [`TRANSIENT_RETRIES`] times; a conflict after those
//!   fails the command it stopped at alone, as a refusal does.
//! - Any other refusal of one statement (a value over `max_allowed_packet`...): the batch
//!   runs again without that command, which answers the error alone
//!   ([`Retry::WithoutCommand`]). Nothing was committed: the transaction is rolled back.
//! - No connection, a lost one, a refused `COMMIT`: whether a write committed is unknown, or
//!   it is no one command's: every command of the batch answers the error, none is
//!   acknowledged ([`Retry::Never`]).
//! - Anything failing on a replica (a read-only batch, `redis.read_from = "replicas"`): the
//!   batch runs again on the primary ([`Retry::OnPrimary`]).

use std::time::Duration;

use manifold_backend::BackendError;
use manifold_mysql_proto::packets::ErrPacket;

/// `ER_LOCK_DEADLOCK`.
const DEADLOCK: u16 = 1213;
/// `ER_LOCK_WAIT_TIMEOUT`.
const LOCK_WAIT_TIMEOUT: u16 = 1205;
/// `ER_DUP_ENTRY`: another batch created the key this one found absent.
const DUPLICATE_KEY: u16 = 1062;

/// Times a batch runs again after conflicts with other transactions.
pub const TRANSIENT_RETRIES: usize = 5;

/// What a batch stopped by an error may do: set where the error is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// A conflict with another transaction: run the whole batch again after a pause.
    AfterPause,
    /// The server refused one command's statement: run the batch again without that
    /// command, which answers the error alone.
    WithoutCommand,
    /// A read failed on a replica: run it again on the primary.
    OnPrimary,
    /// Whether a write committed is unknown (or the failure is no one command's): every
    /// command answers the error.
    Never,
}

/// What failed.
#[derive(Debug)]
pub enum Cause {
    /// No connection, or the one borrowed broke.
    Backend(BackendError),
    /// The server refused a statement.
    Server(ErrPacket),
}

/// Why a batch could not run: its commands get this error, none gets a reply it did not
/// earn. Carries what the batch may do next ([`StoreError::retry`]).
#[derive(Debug)]
pub struct StoreError {
    cause: Cause,
    retry: Retry,
}

impl StoreError {
    /// The server refused a statement: a conflict with another transaction runs the batch
    /// again, any other refusal fails the command alone.
    pub fn refused(e: ErrPacket) -> Self {
        let retry = match e.code {
            DEADLOCK | LOCK_WAIT_TIMEOUT | DUPLICATE_KEY => Retry::AfterPause,
            _ => Retry::WithoutCommand,
        };
        Self {
            cause: Cause::Server(e),
            retry,
        }
    }

    /// The server refused `COMMIT`: the transaction was rolled back; a conflict runs the
    /// batch again, any other refusal is no one command's and fails them all.
    pub(crate) fn refused_commit(e: ErrPacket) -> Self {
        let mut error = Self::refused(e);
        if error.retry == Retry::WithoutCommand {
            error.retry = Retry::Never;
        }
        error
    }

    /// The error arose on a replica: whatever it is, the primary serves the batch.
    pub(crate) fn on_replica(mut self) -> Self {
        self.retry = Retry::OnPrimary;
        self
    }

    /// What the batch may do next.
    pub fn retry(&self) -> Retry {
        self.retry
    }

    /// What failed.
    pub fn cause(&self) -> &Cause {
        &self.cause
    }

    /// The text of the `-ERR` reply a command gets for this failure.
    pub fn reply_text(&self) -> Vec<u8> {
        match &self.cause {
            Cause::Backend(e) => format!("manifold: backend unavailable: {e}").into_bytes(),
            Cause::Server(e) => {
                let mut t = format!("manifold: backend error {}: ", e.code).into_bytes();
                t.extend(
                    e.message
                        .iter()
                        .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
                );
                t
            }
        }
    }
}

/// No connection, or the one borrowed broke: whether a write committed is unknown.
impl From<BackendError> for StoreError {
    fn from(e: BackendError) -> Self {
        Self {
            cause: Cause::Backend(e),
            retry: Retry::Never,
        }
    }
}

/// What a batch's loop does after a failed try ([`Attempts::next`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Run the batch again from its start once this has passed (zero: at once); the
    /// commands [`Attempts::failed`] holds answer their error in their place.
    Again(Duration),
    /// Run the batch again, on the primary.
    OnPrimary,
    /// An `EXEC` with `WATCH` met a conflict: it answers as for a changed watched key (a
    /// null array): nothing was written, and the client's own retry reads the keys again.
    WatchConflict,
    /// Every command answers the error.
    FailAll,
}

/// The tries of one batch (or `EXEC`, or blocking attempt): the conflicts met so far, and
/// the commands that answer their error alone.
#[derive(Debug)]
pub struct Attempts {
    /// Per command: the error it answers instead of running.
    failed: Vec<Option<Vec<u8>>>,
    conflicts: usize,
    /// An `EXEC` with `WATCH`: a conflict answers as a changed watched key.
    watching: bool,
}

impl Attempts {
    /// The tries of a batch of `commands` commands.
    pub fn new(commands: usize) -> Self {
        Self {
            failed: vec![None; commands],
            conflicts: 0,
            watching: false,
        }
    }

    /// For an `EXEC` that checks watched keys (`watching`): a conflict ends it as a changed
    /// watched key does.
    #[must_use]
    pub fn watching(mut self, watching: bool) -> Self {
        self.watching = watching;
        self
    }

    /// Per command: the error it answers in its place instead of running.
    pub fn failed(&self) -> &[Option<Vec<u8>>] {
        &self.failed
    }

    /// A try found more of its keys existing than any try before: the conflicts before it
    /// were with batches creating them, which have committed since (batches that lock their
    /// existing keys in one order meet no other conflict with each other). They do not count
    /// against [`TRANSIENT_RETRIES`]; this happens at most once per key of the batch, so
    /// the tries stay bounded.
    pub fn progressed(&mut self) {
        self.conflicts = 0;
    }

    /// Conflicts met so far (each was followed by a pause).
    pub fn conflicts(&self) -> usize {
        self.conflicts
    }

    /// After a failed try stopped by `e` at command `at` (`None`: at no command, say the
    /// commit or a `WATCH` check), what the batch does next, as `e` says it may
    /// ([`Retry`]); counts the conflicts, and records a command that now fails alone.
    pub fn next(&mut self, at: Option<usize>, e: &StoreError) -> Decision {
        match e.retry() {
            Retry::OnPrimary => return Decision::OnPrimary,
            Retry::Never => return Decision::FailAll,
            Retry::AfterPause if self.watching => return Decision::WatchConflict,
            Retry::AfterPause if self.conflicts < TRANSIENT_RETRIES => {
                self.conflicts += 1;
                return Decision::Again(pause(self.conflicts));
            }
            // Past the retries, the command it stopped at fails alone.
            Retry::AfterPause | Retry::WithoutCommand => {}
        }
        match at.and_then(|i| self.failed.get_mut(i)) {
            Some(slot @ None) => {
                *slot = Some(e.reply_text());
                Decision::Again(Duration::ZERO)
            }
            // A command already failed cannot stop a try again: never loop on it.
            _ => Decision::FailAll,
        }
    }
}

/// Waits `pause` before a batch runs again ([`Decision::Again`]).
pub async fn pause_before_retry(pause: Duration) {
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
}

/// How long a batch waits before it runs again after its `attempt`th conflict (from 1):
/// longer at each, with jitter so that the transactions that collided do not collide
/// again.
fn pause(attempt: usize) -> Duration {
    let jitter = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()) % 4000);
    Duration::from_micros(1000 * attempt as u64 + jitter)
}

#[cfg(test)]
mod tests {
    use manifold_backend::ErrorKind;

    use super::*;

    fn server(code: u16) -> ErrPacket {
        ErrPacket {
            code,
            sqlstate: *b"HY000",
            message: format!("refused with {code}\r\nsecond line").into_bytes(),
        }
    }

    fn lost() -> StoreError {
        BackendError::new(ErrorKind::Lost, "connection reset").into()
    }

    #[test]
    fn conflicts_run_again_other_refusals_fail_alone_a_lost_connection_fails_all() {
        for code in [DEADLOCK, LOCK_WAIT_TIMEOUT, DUPLICATE_KEY] {
            assert_eq!(StoreError::refused(server(code)).retry(), Retry::AfterPause);
        }
        // A packet over max_allowed_packet, a missing table, a syntax error.
        for code in [1153, 1146, 1064] {
            assert_eq!(
                StoreError::refused(server(code)).retry(),
                Retry::WithoutCommand
            );
        }
        assert_eq!(lost().retry(), Retry::Never);
        for kind in [
            ErrorKind::Connect,
            ErrorKind::PoolTimeout,
            ErrorKind::Protocol,
        ] {
            assert_eq!(
                StoreError::from(BackendError::new(kind, "no")).retry(),
                Retry::Never
            );
        }
    }

    #[test]
    fn a_refused_commit_is_no_one_commands_but_a_conflict_there_runs_again() {
        assert_eq!(
            StoreError::refused_commit(server(1180)).retry(),
            Retry::Never
        );
        assert_eq!(
            StoreError::refused_commit(server(DEADLOCK)).retry(),
            Retry::AfterPause
        );
    }

    #[test]
    fn anything_on_a_replica_runs_again_on_the_primary_uncounted() {
        let mut attempts = Attempts::new(2);
        for e in [
            lost().on_replica(),
            StoreError::refused(server(DEADLOCK)).on_replica(),
            StoreError::refused(server(1146)).on_replica(),
        ] {
            assert_eq!(e.retry(), Retry::OnPrimary);
            assert_eq!(attempts.next(Some(0), &e), Decision::OnPrimary);
        }
        assert_eq!(attempts.conflicts(), 0);
        assert_eq!(attempts.failed(), &[None, None]);
    }

    #[test]
    fn conflicts_pause_longer_each_time_then_the_command_fails_alone() {
        let deadlock = StoreError::refused(server(DEADLOCK));
        let mut attempts = Attempts::new(3);
        for n in 1..=TRANSIENT_RETRIES {
            let Decision::Again(pause) = attempts.next(Some(1), &deadlock) else {
                panic!("conflict {n} not run again");
            };
            assert_eq!(attempts.conflicts(), n);
            // 1 ms more per attempt, under 4 ms of jitter.
            assert!(pause >= Duration::from_millis(n as u64));
            assert!(pause < Duration::from_millis(n as u64 + 4));
            assert_eq!(attempts.failed(), &[None, None, None]);
        }
        // Past the retries: command 1 answers the deadlock alone, the others run again.
        assert_eq!(
            attempts.next(Some(1), &deadlock),
            Decision::Again(Duration::ZERO)
        );
        assert_eq!(attempts.conflicts(), TRANSIENT_RETRIES);
        assert_eq!(
            attempts.failed()[1].as_deref(),
            Some(&deadlock.reply_text()[..])
        );
        assert!(attempts.failed()[0].is_none() && attempts.failed()[2].is_none());
        // And at no command (the commit), every command answers it.
        assert_eq!(attempts.next(None, &deadlock), Decision::FailAll);
    }

    #[test]
    fn a_refused_command_fails_alone_and_the_batch_runs_again_at_once() {
        let refused = StoreError::refused(server(1153));
        let mut attempts = Attempts::new(3);
        assert_eq!(
            attempts.next(Some(2), &refused),
            Decision::Again(Duration::ZERO)
        );
        assert_eq!(
            attempts.failed()[2].as_deref(),
            Some(&b"manifold: backend error 1153: refused with 1153  second line"[..])
        );
        assert_eq!(
            attempts.next(Some(0), &refused),
            Decision::Again(Duration::ZERO)
        );
        assert_eq!(attempts.conflicts(), 0);
        assert!(attempts.failed()[0].is_some() && attempts.failed()[1].is_none());
        // The same command again, or none: never a loop.
        assert_eq!(attempts.next(Some(2), &refused), Decision::FailAll);
        assert_eq!(attempts.next(None, &refused), Decision::FailAll);
        assert_eq!(attempts.next(Some(7), &refused), Decision::FailAll);
    }

    #[test]
    fn a_lost_connection_fails_every_command_at_once() {
        let mut attempts = Attempts::new(2);
        assert_eq!(attempts.next(Some(1), &lost()), Decision::FailAll);
        assert_eq!(attempts.failed(), &[None, None]);
        assert_eq!(
            lost().reply_text(),
            b"manifold: backend unavailable: connection reset"
        );
    }

    #[test]
    fn exec_with_watch_answers_a_conflict_as_a_changed_key() {
        let mut attempts = Attempts::new(2).watching(true);
        for code in [DEADLOCK, LOCK_WAIT_TIMEOUT, DUPLICATE_KEY] {
            let e = StoreError::refused(server(code));
            assert_eq!(attempts.next(Some(0), &e), Decision::WatchConflict);
        }
        assert_eq!(attempts.conflicts(), 0);
        // Other errors as without WATCH.
        let refused = StoreError::refused(server(1153));
        assert_eq!(
            attempts.next(Some(0), &refused),
            Decision::Again(Duration::ZERO)
        );
        assert_eq!(attempts.next(None, &lost()), Decision::FailAll);
    }
}
