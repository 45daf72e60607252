//! Client commands (`COM_*`) of the command phase: decoded borrowing from the payload, so
//! looking at a command costs no allocation; encoders for the ones manifold sends itself.

use crate::codec::{put_u16, put_u32, Reader};
use crate::consts::command as com;
use crate::errors::ProtoError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command<'a> {
    Quit,
    InitDb(&'a [u8]),
    Query(&'a [u8]),
    FieldList {
        table: &'a [u8],
        wildcard: &'a [u8],
    },
    Statistics,
    ProcessInfo,
    ProcessKill(u32),
    Debug,
    Ping,
    Refresh(u8),
    /// Body decoded separately with [`crate::handshake::ChangeUser::decode`] (needs capabilities).
    ChangeUser,
    StmtPrepare(&'a [u8]),
    StmtExecute {
        statement_id: u32,
        flags: u8,
        rest: &'a [u8],
    },
    StmtSendLongData {
        statement_id: u32,
        param: u16,
        data: &'a [u8],
    },
    StmtClose(u32),
    StmtReset(u32),
    SetOption(u16),
    StmtFetch {
        statement_id: u32,
        rows: u32,
    },
    ResetConnection,
    /// A command byte manifold does not serve (replication, `COM_SHUTDOWN`, obsolete ones).
    Unsupported(u8),
}

impl<'a> Command<'a> {
    pub fn decode(payload: &'a [u8]) -> Result<Self, ProtoError> {
        let mut r = Reader::new(payload);
        let code = r
            .u8()
            .map_err(|_| ProtoError::Malformed("empty command packet"))?;
        let cmd = match code {
            com::QUIT => Command::Quit,
            com::INIT_DB => Command::InitDb(r.rest()),
            com::QUERY => Command::Query(r.rest()),
            com::FIELD_LIST => {
                let table = r.nul_or_rest();
                Command::FieldList {
                    table,
                    wildcard: r.rest(),
                }
            }
            com::STATISTICS => Command::Statistics,
            com::PROCESS_INFO => Command::ProcessInfo,
            com::PROCESS_KILL => Command::ProcessKill(r.u32()?),
            com::DEBUG => Command::Debug,
            com::PING => Command::Ping,
            com::REFRESH => Command::Refresh(r.u8()?),
            com::CHANGE_USER => Command::ChangeUser,
            com::STMT_PREPARE => Command::StmtPrepare(r.rest()),
            com::STMT_EXECUTE => {
                let statement_id = r.u32()?;
                let flags = r.u8()?;
                Command::StmtExecute {
                    statement_id,
                    flags,
                    rest: r.rest(),
                }
            }
            com::STMT_SEND_LONG_DATA => {
                let statement_id = r.u32()?;
                let param = r.u16()?;
                Command::StmtSendLongData {
                    statement_id,
                    param,
                    data: r.rest(),
                }
            }
            com::STMT_CLOSE => Command::StmtClose(r.u32()?),
            com::STMT_RESET => Command::StmtReset(r.u32()?),
            com::SET_OPTION => Command::SetOption(r.u16()?),
            com::STMT_FETCH => {
                let statement_id = r.u32()?;
                Command::StmtFetch {
                    statement_id,
                    rows: r.u32()?,
                }
            }
            com::RESET_CONNECTION => Command::ResetConnection,
            other => Command::Unsupported(other),
        };
        Ok(cmd)
    }

    /// Appends the command's payload (what [`Command::decode`] reads back).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Command::Quit => out.push(com::QUIT),
            Command::InitDb(s) => {
                out.push(com::INIT_DB);
                out.extend_from_slice(s);
            }
            Command::Query(s) => {
                out.push(com::QUERY);
                out.extend_from_slice(s);
            }
            Command::FieldList { table, wildcard } => {
                out.push(com::FIELD_LIST);
                out.extend_from_slice(table);
                out.push(0);
                out.extend_from_slice(wildcard);
            }
            Command::Statistics => out.push(com::STATISTICS),
            Command::ProcessInfo => out.push(com::PROCESS_INFO),
            Command::ProcessKill(id) => {
                out.push(com::PROCESS_KILL);
                put_u32(out, id);
            }
            Command::Debug => out.push(com::DEBUG),
            Command::Ping => out.push(com::PING),
            Command::Refresh(f) => out.extend_from_slice(&[com::REFRESH, f]),
            Command::ChangeUser => out.push(com::CHANGE_USER),
            Command::StmtPrepare(s) => {
                out.push(com::STMT_PREPARE);
                out.extend_from_slice(s);
            }
            Command::StmtExecute {
                statement_id,
                flags,
                rest,
            } => {
                out.push(com::STMT_EXECUTE);
                put_u32(out, statement_id);
                out.push(flags);
                out.extend_from_slice(rest);
            }
            Command::StmtSendLongData {
                statement_id,
                param,
                data,
            } => {
                out.push(com::STMT_SEND_LONG_DATA);
                put_u32(out, statement_id);
                put_u16(out, param);
                out.extend_from_slice(data);
            }
            Command::StmtClose(id) => {
                out.push(com::STMT_CLOSE);
                put_u32(out, id);
            }
            Command::StmtReset(id) => {
                out.push(com::STMT_RESET);
                put_u32(out, id);
            }
            Command::SetOption(o) => {
                out.push(com::SET_OPTION);
                put_u16(out, o);
            }
            Command::StmtFetch { statement_id, rows } => {
                out.push(com::STMT_FETCH);
                put_u32(out, statement_id);
                put_u32(out, rows);
            }
            Command::ResetConnection => out.push(com::RESET_CONNECTION),
            Command::Unsupported(c) => out.push(c),
        }
    }

    /// What the server sends back, which a relay needs to know where the answer ends.
    pub fn response_kind(&self) -> ResponseKind {
        match self {
            Command::Quit | Command::StmtClose(_) | Command::StmtSendLongData { .. } => {
                ResponseKind::None
            }
            Command::Query(_) | Command::ProcessInfo | Command::StmtExecute { .. } => {
                ResponseKind::ResultSets
            }
            Command::StmtFetch { .. } => ResponseKind::Rows,
            Command::StmtPrepare(_) => ResponseKind::Prepare,
            Command::FieldList { .. } => ResponseKind::FieldList,
            Command::Statistics => ResponseKind::Raw,
            _ => ResponseKind::Single,
        }
    }
}

/// The shape of a server's answer to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResponseKind {
    /// No answer at all.
    None,
    /// One packet: OK, ERR or EOF.
    Single,
    /// One packet that is neither (COM_STATISTICS's status string), or ERR.
    Raw,
    /// OK / ERR / LOCAL INFILE request / result set, possibly several (multi-results).
    ResultSets,
    /// Rows up to a terminator (COM_STMT_FETCH), or ERR.
    Rows,
    /// `COM_STMT_PREPARE_OK` with parameter and column definitions, or ERR.
    Prepare,
    /// Column definitions up to a terminator (COM_FIELD_LIST), or ERR.
    FieldList,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn commands_round_trip() {
        let cases = [
            Command::Quit,
            Command::InitDb(b"db"),
            Command::Query(b"select 1"),
            Command::FieldList {
                table: b"t",
                wildcard: b"%",
            },
            Command::Statistics,
            Command::ProcessKill(77),
            Command::Ping,
            Command::StmtPrepare(b"select ?"),
            Command::StmtExecute {
                statement_id: 5,
                flags: 1,
                rest: &[1, 0, 0, 0, 0],
            },
            Command::StmtSendLongData {
                statement_id: 9,
                param: 2,
                data: b"xyz",
            },
            Command::StmtClose(3),
            Command::StmtReset(4),
            Command::SetOption(1),
            Command::StmtFetch {
                statement_id: 8,
                rows: 100,
            },
            Command::ResetConnection,
            Command::Refresh(1),
            Command::Debug,
            Command::ProcessInfo,
        ];
        for c in cases {
            let mut out = Vec::new();
            c.encode(&mut out);
            assert_eq!(Command::decode(&out).unwrap(), c);
        }
        assert_eq!(
            Command::decode(&[0x12]).unwrap(),
            Command::Unsupported(0x12)
        );
        assert!(Command::decode(&[]).is_err());
        assert!(Command::decode(&[com::STMT_CLOSE, 1]).is_err());
    }

    proptest! {
        #[test]
        fn garbage_never_panics(b in proptest::collection::vec(any::<u8>(), 0..40)) {
            if let Ok(c) = Command::decode(&b) { let _ = c.response_kind(); }
        }
    }
}
