//! `SHOW VARIABLES` that shows variables of the global binlog among the server's own (`LIKE
//! 'gtid%'`, a `WHERE` manifold does not evaluate, or all of them): the server answers the
//! statement as written, on the session's connection (session values and all), and the
//! global binlog's values replace those of the names it owns — so a CDC tool that asks
//! `SHOW GLOBAL VARIABLES LIKE 'GTID_%'` learns manifold's position, not the primary's.

use std::sync::Arc;

use manifold_binlog_serve::answer;
use manifold_cdc::BinlogShared;

use super::{End, Session};

impl Session {
    pub(super) async fn binlog_server_variables(
        &mut self,
        shared: &Arc<BinlogShared>,
        sql: &str,
        seq: u8,
    ) -> Result<(), End> {
        let lease = match self.ensure_backend(self.primary(), false).await {
            Ok(lease) => lease,
            Err(e) => {
                self.release_if_unpinned();
                return self.send_err_packet(seq, &e.to_err_packet()).await;
            }
        };
        let mut rows = match lease.conn().query_rows(sql.as_bytes()).await {
            Ok(Ok(rows)) => rows,
            Ok(Err(e)) => {
                self.release_if_unpinned();
                return self.send_err_packet(seq, &e).await;
            }
            Err(e) => return self.backend_failed(Some(seq), &e).await,
        };
        self.release_if_unpinned();
        answer::replace_owned_values(shared, &mut rows.rows);
        self.send_result_set(seq, &rows.columns, &rows.rows).await
    }
}
