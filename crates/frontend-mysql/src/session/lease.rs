//! The session's backend connection: borrowing one from the pool of the node a command runs
//! on (or riding behind another session's command), bringing it to the session's state, and
//! giving it back.

use manifold_backend::state::state_signature;
use manifold_backend::{Acquired, BackendConn, BackendError, ConnKey, ErrorKind, Lease, Schema};
use manifold_mysql_proto::packets::ErrPacket;
use manifold_router::NodeId;

use super::{visit, Session};
use crate::metrics::FrontendMetrics;
use crate::pins::PinReason;
use crate::users::User;

/// The key of the session's backend connections (its backend login, capabilities, character
/// set and whether it came over TLS), built at its first borrow and kept in `slot` until what
/// it is made of changes.
fn conn_key<'a>(
    slot: &'a mut Option<ConnKey>,
    user: &User,
    capabilities: u32,
    charset: u8,
    tls: bool,
) -> &'a ConnKey {
    slot.get_or_insert_with(|| {
        ConnKey::new(
            &user.backend_user,
            &user.backend_password,
            capabilities,
            charset,
            tls,
        )
    })
}

/// Why the session has no backend connection ready for its command.
pub(super) enum Unready {
    /// The server (or manifold) refused: the client gets this ERR, the connection is fine.
    Refused(ErrPacket),
    /// No connection could be had, or the one borrowed broke while being made ready. The
    /// error says whether the command may try another.
    Failed(BackendError),
}

impl Unready {
    /// The ERR the client gets.
    pub(super) fn to_err_packet(&self) -> ErrPacket {
        match self {
            Unready::Refused(e) => e.clone(),
            Unready::Failed(e) => e.to_err_packet(),
        }
    }

    /// A connection lost while manifold made it ready with its own commands: nothing of the
    /// client's command had been sent, so it may go to another connection.
    pub(super) fn lost_before_sending(mut e: BackendError) -> Self {
        e.set_retry(true);
        Unready::Failed(e)
    }
}

/// Why a connection could not be brought to the session's state.
enum Unrestored {
    /// The server refused (the session's schema does not exist): the connection is fine
    /// and stays with the session.
    Refused(ErrPacket),
    /// The connection's state is now unknown, or it broke: it is closed.
    Discard(Unready),
}

impl Session {
    /// Borrows a backend connection if the session holds none and brings it to the session's
    /// state: schema, changed variables, and (when the statement asks for it)
    /// `LAST_INSERT_ID()`. The ERR to send the client is returned on failure.
    /// A session holding a connection keeps it, whatever `node` says.
    pub(super) async fn ensure_backend(
        &mut self,
        node: NodeId,
        wants_last_insert_id: bool,
    ) -> Result<&mut Lease, Unready> {
        let mut lease = match self.lease.take() {
            Some(lease) => lease,
            None => self.borrow(node).await?,
        };
        match self.restore_state(lease.conn(), wants_last_insert_id).await {
            Ok(()) => Ok(self.lease.insert(lease)),
            Err(Unrestored::Refused(e)) => {
                self.lease = Some(lease);
                Err(Unready::Refused(e))
            }
            Err(Unrestored::Discard(e)) => {
                lease.discard();
                self.lease_killable = false;
                self.handle.publish_backend_thread(0, 0, 0);
                Err(e)
            }
        }
    }

    /// A connection to `node` from the pool, published as the session's.
    async fn borrow(&mut self, node: NodeId) -> Result<Lease, Unready> {
        let key = conn_key(
            &mut self.conn_key,
            &self.user,
            self.capabilities,
            self.charset,
            self.io.stream.is_tls(),
        );
        let signature = state_signature(&self.vars, &self.user_vars);
        let schema =
            visit::wanted_schema(self.visit.as_ref(), self.schema.as_deref(), self.cluster);
        match self.fe.pools[self.cluster][node]
            .acquire(key, schema, signature)
            .await
        {
            Ok(mut lease) => {
                self.handle
                    .publish_backend_thread(self.cluster, node, lease.conn().connection_id);
                self.lease_node = node;
                Ok(lease)
            }
            Err(e) => Err(self.borrow_failed(node, e)),
        }
    }

    /// No connection to `node` could be had: a node found down is shunned, and the command,
    /// nothing of which was sent, may go to another node or wait for a new primary.
    fn borrow_failed(&mut self, node: NodeId, mut e: BackendError) -> Unready {
        if matches!(e.kind, ErrorKind::Connect | ErrorKind::ConnectTimeout) {
            // The next read goes elsewhere, and writes wait for a primary, at once rather
            // than after the monitor's next checks; the monitor takes the node back when it
            // answers.
            self.topology().nodes[node].shun(&e.message);
        }
        if !self.topology().nodes[node].in_service() {
            // Whatever the node answered (a full pool, a refusal, a failed login), it is
            // down or being taken out: nothing of the command was sent, so it goes to
            // another node, or waits for the new primary.
            e.set_retry(true);
        }
        FrontendMetrics::inc(&self.fe.shared.metrics.backend_errors);
        tracing::warn!(connection = self.id, error = %e, "no backend connection");
        Unready::Failed(e)
    }

    /// Brings `conn` to the session's state: its schema, the variables it changed, and
    /// `LAST_INSERT_ID()` when `wants_last_insert_id`.
    async fn restore_state(
        &mut self,
        conn: &mut BackendConn,
        wants_last_insert_id: bool,
    ) -> Result<(), Unrestored> {
        let schema_differs = match (&conn.schema, &self.schema) {
            (Schema::Known(have), Some(want)) => have != want,
            (Schema::None, None) => false,
            _ => true,
        };
        if let Some(visited) =
            visit::visiting_schema(self.visit.as_ref(), self.schema.as_deref(), self.cluster)
        {
            // A statement run on the cluster of the schema it names: that schema is current
            // there; the session's own (which that cluster may not have) stays as it is.
            if !matches!(&conn.schema, Schema::Known(have) if have == visited) {
                match conn.use_schema(Some(visited)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => return Err(Unrestored::Refused(e)),
                    Err(e) => return Err(Unrestored::Discard(Unready::lost_before_sending(e))),
                }
            }
        } else if (!self.schema_checked || schema_differs) && !self.schema_follows_statement {
            match conn.use_schema(self.schema.as_deref()).await {
                Ok(Ok(())) => self.schema_checked = true,
                Ok(Err(e)) => {
                    // As a server would at login: the schema does not exist or is not allowed.
                    self.schema = None;
                    self.schema_checked = true;
                    return Err(Unrestored::Refused(e));
                }
                Err(e) => return Err(Unrestored::Discard(Unready::lost_before_sending(e))),
            }
        }
        if !conn.tracking {
            // Changes made on this connection cannot be seen: the session stays on it.
            self.pins.pin(PinReason::NoTracking, &self.fe.pins, self.id);
        }
        let last_insert_id = (wants_last_insert_id && conn.last_insert_id != self.last_insert_id)
            .then_some(self.last_insert_id);
        if conn.vars == self.vars && conn.user_vars == self.user_vars && last_insert_id.is_none() {
            return Ok(());
        }
        match conn
            .sync_vars(&self.vars, &self.user_vars, last_insert_id)
            .await
        {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => {
                // The backend's own code and SQLSTATE, with what manifold was doing.
                let message = format!(
                    "manifold could not restore the session's variables on a backend connection: {}",
                    e.message_lossy()
                );
                Err(Unrestored::Discard(Unready::Refused(ErrPacket {
                    message: message.into_bytes(),
                    ..e
                })))
            }
            Err(e) => Err(Unrestored::Discard(Unready::lost_before_sending(e))),
        }
    }

    /// Borrows a connection, or if none is free, waits for one with the command riding
    /// behind another session's (true: the command is sent and its answer is next).
    pub(super) async fn acquire_or_follow(
        &mut self,
        node: NodeId,
        raw_len: usize,
    ) -> Result<bool, Unready> {
        let pool = self.fe.pools[self.cluster][node].clone();
        let key = conn_key(
            &mut self.conn_key,
            &self.user,
            self.capabilities,
            self.charset,
            self.io.stream.is_tls(),
        );
        let acquired = pool
            .acquire_or_follow(
                key,
                visit::wanted_schema(self.visit.as_ref(), self.schema.as_deref(), self.cluster),
                state_signature(&self.vars, &self.user_vars),
                &self.io.rbuf[..raw_len],
            )
            .await;
        let (mut lease, followed) = match acquired {
            Ok(Acquired::Lease(l)) => (l, false),
            Ok(Acquired::Followed(l, command)) => {
                // Kept while its answer is read: it may have to run again (see
                // `remember_previous_statement`).
                self.exec_buf.clear();
                self.exec_buf.extend_from_slice(&command);
                (l, true)
            }
            Err(e) => return Err(self.borrow_failed(node, e)),
        };
        self.handle
            .publish_backend_thread(self.cluster, node, lease.conn().connection_id);
        self.lease = Some(lease);
        self.lease_node = node;
        Ok(followed)
    }

    /// A connection to the primary borrowed for a query of manifold's own (not the
    /// session's: it is not published), in the session's variables but any schema.
    pub(super) async fn borrow_primary(&mut self) -> Result<Lease, BackendError> {
        self.borrow_primary_of(self.cluster).await
    }

    /// Like [`Session::borrow_primary`], on the primary of `cluster` (any of them).
    pub(super) async fn borrow_primary_of(
        &mut self,
        cluster: usize,
    ) -> Result<Lease, BackendError> {
        let primary = self.fe.shared.clusters[cluster].topology.primary();
        let pool = self.fe.pools[cluster][primary].clone();
        let key = conn_key(
            &mut self.conn_key,
            &self.user,
            self.capabilities,
            self.charset,
            self.io.stream.is_tls(),
        );
        pool.acquire(key, None, state_signature(&self.vars, &self.user_vars))
            .await
    }

    /// Lets go of the backend connection (the caller returns or discards it).
    /// A connection whose statement a `KILL QUERY` interrupted is closed instead: the kill
    /// may still be on its way to it, and must not reach another session's statement.
    pub(super) fn take_lease(&mut self) -> Option<Lease> {
        let lease = self.lease.take()?;
        let killable = std::mem::take(&mut self.lease_killable);
        if self.handle.release_backend_thread() || killable {
            lease.discard();
            return None;
        }
        Some(lease)
    }

    /// Gives the backend connection back when nothing pins the session to it. The pool keeps
    /// it as it is (no reset): its state is known, and a session wanting it is served first.
    pub(super) fn release_if_unpinned(&mut self) {
        if self.pins.is_pinned() {
            return;
        }
        if let Some(mut lease) = self.take_lease() {
            lease.mark_clean();
        }
    }

    /// Returns the held connection to the pool as it is (its state is the session's, known).
    pub(super) fn give_back_lease(&mut self) {
        if let Some(mut lease) = self.take_lease() {
            lease.mark_clean();
        }
    }
}
