//! Commands about the session itself rather than its data: `KILL` (with manifold's session
//! ids), `COM_PING`, `COM_RESET_CONNECTION` and `COM_CHANGE_USER`.

use manifold_fleet::{Backend, Marked, PeerError, Request, Response};
use manifold_mysql_proto::consts::status;
use manifold_mysql_proto::handshake::ChangeUser;
use manifold_mysql_proto::packets::ErrPacket;
use manifold_mysql_proto::{codes, Command};
use manifold_sql_lex::Kill;

use super::previous::PreviousStatement;
use super::{End, Session};
use crate::handshake::{self, AuthFailure};

impl Session {
    /// `COM_PING`: answered by manifold, except that a schema named at login and not yet
    /// confirmed is confirmed first, as a server's login would have.
    pub(super) async fn ping(&mut self, seq: u8) -> Result<(), End> {
        if self.schema_checked || self.schema.is_none() {
            return self.send_ok(seq).await;
        }
        let checked = self.ensure_backend(self.primary(), false).await.map(|_| ());
        self.release_if_unpinned();
        match checked {
            Ok(()) => self.send_ok(seq).await,
            Err(e) => self.send_err_packet(seq, &e.to_err_packet()).await,
        }
    }

    /// `KILL [QUERY] id` and `COM_PROCESS_KILL`, with manifold's connection ids: the target
    /// session's statement is interrupted on its backend connection (`KILL QUERY` of that
    /// connection's server thread, sent on one of this session's), and for `KILL CONNECTION`
    /// its client connection is closed. Only the same manifold user may kill a session.
    ///
    /// The kill reaches the target's statement and no other session's: the statement is
    /// marked ([`crate::registry::SessionHandle::mark_query_killed`]), a statement not yet
    /// sent or still queued behind another session's is answered ERR 1317 by its session,
    /// and a connection the kill may still reach after the statement ended is closed rather
    /// than lent again (statements pipelined behind it run again elsewhere).
    ///
    /// A session another manifold of the fleet runs (its id carries that instance's) is
    /// marked, checked and disconnected by that instance over the fleet's link; the
    /// `KILL QUERY` itself is sent from here, on this session's own backend connection, so
    /// it is the client's backend login that kills, as on one instance.
    pub(super) async fn kill(&mut self, kill: Kill, seq: u8) -> Result<(), End> {
        let (target, query_only) = match kill {
            Kill::Connection(id) => (id, false),
            Kill::Query(id) => (id, true),
            Kill::Unsupported => {
                let e = ErrPacket::new(
                    codes::NOT_SUPPORTED_YET,
                    "This version of manifold doesn't yet support 'KILL in this form': use KILL [CONNECTION | QUERY] <connection id>, a single statement",
                );
                return self.send_err_packet(seq, &e).await;
            }
        };
        let unknown = ErrPacket::new(
            codes::NO_SUCH_THREAD,
            format!("Unknown thread id: {target}"),
        );
        let Some(target) = u32::try_from(target).ok() else {
            return self.send_err_packet(seq, &unknown).await;
        };
        if target == self.id {
            if query_only {
                let e = ErrPacket::new(codes::QUERY_INTERRUPTED, "Query execution was interrupted");
                return self.send_err_packet(seq, &e).await;
            }
            let e = ErrPacket::new(codes::CONNECTION_KILLED, "Connection was killed");
            self.send_err_packet(seq, &e).await?;
            return Err(End::Refused("killed by its own KILL".into()));
        }
        // This instance's own sessions first: an id of another instance is asked there.
        let fleet = &self.fe.shared.fleet;
        let instance = manifold_fleet::ids::instance_of(target);
        let mut victim = if let Some(handle) = self.fe.shared.find_session(target) {
            if handle.user() != self.user.name {
                return self.send_err_packet(seq, &not_owner(target)).await;
            }
            Victim::Here(handle)
        } else if instance == 0 || instance == fleet.instance() || !fleet.config().enabled() {
            return self.send_err_packet(seq, &unknown).await;
        } else {
            match fleet.link(instance).await {
                Ok(link) => Victim::There(link),
                Err(manifold_fleet::PeerError::NoSuchInstance(_)) => {
                    return self.send_err_packet(seq, &unknown).await;
                }
                Err(e) => return self.send_err_packet(seq, &unreachable(&e)).await,
            }
        };
        // The target's statement is marked first: one waiting for a connection, or for its
        // answer behind another session's statement, is answered ERR 1317 by its own session.
        let marked = match victim.mark(target, &self.user.name).await {
            Ok(Marked::Running(m)) => m,
            Ok(Marked::Unknown) => return self.send_err_packet(seq, &unknown).await,
            Ok(Marked::NotOwner) => return self.send_err_packet(seq, &not_owner(target)).await,
            Err(e) => return self.send_err_packet(seq, &unreachable(&e)).await,
        };
        let ((cluster, node, thread), statement) = marked
            .map_or(((0, 0, 0), 0), |((c, n, t), s)| {
                ((c as usize, n as usize, t), s)
            });
        if thread != 0 {
            if self.lease.is_some() && (self.cluster, self.lease_node) != (cluster, node) {
                // `KILL QUERY` must run on the target's node.
                self.pins.hold_for_next(false, &self.fe.pins, self.id);
                self.release_if_unpinned();
            }
            if self.lease.is_none() {
                self.cluster = cluster;
            }
            // A session held on another node cannot reach the target's connection.
            let on_target_node =
                self.lease.is_none() || (self.cluster, self.lease_node) == (cluster, node);
            if let Err(e) = self.ensure_backend(node, false).await {
                self.release_if_unpinned();
                return self.send_err_packet(seq, &e.to_err_packet()).await;
            }
            // Checked again just before sending: the target may have given the connection
            // back (to be borrowed by another session) while this one borrowed its own, or
            // be running a later statement on it.
            let backend = (cluster as u32, node as u32, thread);
            let still = match victim.still(target, statement, backend).await {
                Ok(still) => marked.is_some() && still,
                Err(e) => {
                    self.release_if_unpinned();
                    return self.send_err_packet(seq, &unreachable(&e)).await;
                }
            };
            if on_target_node && still {
                let sql = format!("KILL QUERY {thread}");
                let conn = self.lease.as_mut().expect("ensured above").conn();
                match conn.simple_command(&Command::Query(sql.as_bytes())).await {
                    // 1094: the statement ended and the connection closed meanwhile.
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) if e.code == codes::NO_SUCH_THREAD.code => {}
                    Ok(Err(e)) => {
                        self.release_if_unpinned();
                        return self.send_err_packet(seq, &e).await;
                    }
                    Err(e) => return self.backend_failed(Some(seq), &e).await,
                }
            }
            self.release_if_unpinned();
        }
        if !query_only {
            if let Err(e) = victim.disconnect(target).await {
                return self.send_err_packet(seq, &unreachable(&e)).await;
            }
        }
        tracing::info!(
            connection = self.id,
            target,
            query_only,
            backend_thread = thread,
            "KILL"
        );
        self.send_ok(seq).await
    }

    /// What `COM_RESET_CONNECTION` and `COM_CHANGE_USER` both undo: variables, the previous
    /// statement's leftovers, prepared statements, the insert id and pins.
    fn forget_state(&mut self) {
        self.vars.clear();
        self.user_vars.clear();
        self.previous = PreviousStatement::default();
        self.stmts.clear();
        self.last_insert_id = 0;
        self.pins.clear();
        self.pin_if_not_multiplexing();
        self.replay.forget();
    }

    /// `COM_RESET_CONNECTION`: the session's state goes back to what it was after login,
    /// as MySQL resets it; the backend connection, if one is held, is reset too.
    pub(super) async fn reset_connection(&mut self, seq: u8) -> Result<(), End> {
        self.forget_state();
        // No transaction after a reset: a stale status would let a later autocommitted
        // statement look like part of one.
        self.status = status::AUTOCOMMIT;
        if let Some(lease) = self.lease.as_mut() {
            match lease.conn().reset().await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return self.send_err_packet(seq, &e).await,
                Err(e) => {
                    if let Some(l) = self.take_lease() {
                        l.discard();
                    }
                    return self.send_err_packet(seq, &e.to_err_packet()).await;
                }
            }
        }
        self.release_if_unpinned();
        self.send_ok(seq).await
    }

    pub(super) async fn change_user(&mut self, cu: ChangeUser, seq: u8) -> Result<(), End> {
        let shared = self.fe.shared.clone();
        let old = self.user.clone();
        // Under connect_timeout, as the handshake (not counting a login delay): an exchange
        // left unanswered (a full auth the client never answers) must not hold its
        // address's turn, which every later delayed attempt of the address waits for.
        let waited = manifold_engine::WaitClock::default();
        let auth = waited
            .timeout(
                shared.config.connect_timeout,
                handshake::authenticate(
                    &shared,
                    &self.ctx,
                    &mut self.io,
                    seq,
                    &cu.user,
                    cu.auth_plugin.as_deref(),
                    None,
                    cu.auth_response.clone(),
                    &self.scramble,
                    self.peer,
                    Some(&waited),
                ),
            )
            .await;
        let Some(auth) = auth else {
            return Err(End::Refused(format!(
                "COM_CHANGE_USER not finished within connect_timeout ({:?})",
                shared.config.connect_timeout
            )));
        };
        // Whatever the outcome, the session state is gone, as on a server: returning the lease
        // resets it.
        drop(self.take_lease());
        self.schema_checked = false;
        self.status = status::AUTOCOMMIT;
        self.forget_state();
        self.conn_key = None;
        let (user, seq) = match auth {
            Ok(r) => r,
            Err(AuthFailure::Denied(reason)) => {
                // Like MariaDB: the client got ERR 1045 and stays logged in as before.
                tracing::info!(connection = self.id, %reason, "COM_CHANGE_USER refused");
                return Ok(());
            }
            Err(AuthFailure::Broken(reason)) => {
                return Err(End::Refused(format!("COM_CHANGE_USER failed: {reason}")))
            }
        };
        if !user.acquire_connection() {
            let msg = format!(
                "User '{}' has exceeded the 'max_connections' resource (current value: {})",
                user.name, user.max_connections
            );
            return Err(self.refuse(seq, codes::USER_LIMIT_REACHED, msg).await);
        }
        old.release_connection();
        self.handle.set_user(&user.name);
        self.user = user;
        self.schema = (!cu.database.is_empty()).then_some(cu.database);
        if let Some(cs) = cu.charset {
            if cs != 0 {
                self.charset = cs as u8;
            }
        }
        self.send_ok(seq).await
    }
}

/// The session a `KILL` is for: on this instance, or on another of the fleet.
enum Victim {
    Here(std::sync::Arc<crate::registry::SessionHandle>),
    There(manifold_fleet::peer::Link),
}

impl Victim {
    /// Marks its running statement (the owner is checked already here, by the other
    /// instance there).
    async fn mark(&mut self, id: u32, user: &str) -> Result<Marked, PeerError> {
        match self {
            Victim::Here(h) => Ok(Marked::Running(h.mark_query_killed().map(|m| {
                let (c, n, t) = m.backend;
                ((c as u32, n as u32, t), m.seq)
            }))),
            Victim::There(link) => {
                let request = Request::Mark {
                    id,
                    user: Some(user.to_owned()),
                };
                match link.call(&request).await? {
                    Response::Marked(m) => Ok(m),
                    other => Err(PeerError::Protocol(format!("a mark answered {other:?}"))),
                }
            }
        }
    }

    /// Whether it still runs statement `seq` on `backend`.
    async fn still(&mut self, id: u32, seq: u64, backend: Backend) -> Result<bool, PeerError> {
        match self {
            Victim::Here(h) => {
                let (c, n, t) = h.backend_thread();
                Ok(h.still_running(seq) && (c as u32, n as u32, t) == backend)
            }
            Victim::There(link) => match link.call(&Request::Still { id, seq, backend }).await? {
                Response::Bool(b) => Ok(b),
                other => Err(PeerError::Protocol(format!("a check answered {other:?}"))),
            },
        }
    }

    async fn disconnect(&mut self, id: u32) -> Result<(), PeerError> {
        match self {
            Victim::Here(h) => {
                h.disconnect();
                Ok(())
            }
            Victim::There(link) => link.call(&Request::Disconnect { id }).await.map(|_| ()),
        }
    }
}

fn not_owner(target: u32) -> ErrPacket {
    ErrPacket::new(
        codes::KILL_DENIED,
        format!("You are not owner of thread {target}"),
    )
}

fn unreachable(e: &PeerError) -> ErrPacket {
    ErrPacket::new(codes::FLEET_UNREACHABLE, format!("Nothing was killed: {e}"))
}
