//! `WAIT numreplicas timeout`: how many replicas of the door's cluster have applied the
//! client's last write, waiting (up to `timeout` ms, 0: no limit) until `numreplicas` have.
//! Redis counts its replicas' acknowledged offsets; the door counts the replicas in service
//! that have the GTID of the client's last commit ([`crate::store::replicas`]). Inside
//! `MULTI` it does not wait, as Redis does not block there.

use std::time::{Duration, Instant};

use manifold_redis_proto::Reply;

use super::Session;
use crate::cmd::{parse_i64, Args};
use crate::store::replicas;

/// `WAIT`'s arguments: how many replicas, and until when (`None`: no limit). Redis reads
/// `numreplicas` first, then the timeout.
fn parse(args: Args<'_>) -> Result<(i64, Option<Instant>), &'static [u8]> {
    let want = parse_i64(args.get(1)).ok_or(crate::errors::NOT_INTEGER)?;
    let ms = parse_i64(args.get(2)).ok_or(&b"timeout is not an integer or out of range"[..])?;
    if ms < 0 {
        return Err(b"timeout is negative");
    }
    let deadline = (ms > 0).then(|| Instant::now().checked_add(Duration::from_millis(ms as u64)));
    // A deadline past what the clock can hold is none.
    Ok((want, deadline.flatten()))
}

/// Answers `WAIT`, waiting for the replicas.
pub async fn apply(session: &Session<'_>, args: Args<'_>, out: &mut Vec<u8>) {
    let (want, deadline) = match parse(args) {
        Ok(parsed) => parsed,
        Err(text) => {
            Reply::new(out, session.proto).error(text);
            return;
        }
    };
    let store = &session.fe.worker.store;
    let have = match &session.login {
        Some(key) => {
            replicas::replicas_with_write(store, key, &session.causal, want, deadline, true).await
        }
        None => replicas::replicas_known_with_write(store, &session.causal),
    };
    Reply::new(out, session.proto).integer(have);
}

/// Answers `WAIT` inside `MULTI`: what the monitor knows now, without waiting.
pub fn apply_now(session: &Session<'_>, args: Args<'_>, out: &mut Vec<u8>) {
    match parse(args) {
        Ok(_) => {
            let have =
                replicas::replicas_known_with_write(&session.fe.worker.store, &session.causal);
            Reply::new(out, session.proto).integer(have);
        }
        Err(text) => {
            Reply::new(out, session.proto).error(text);
        }
    }
}
