//! Protocol constants: capability flags, server status flags, command bytes, column types.

/// Capability flags (`CLIENT_*`), as in MySQL's `include/mysql_com.h`.
pub mod caps {
    pub const LONG_PASSWORD: u32 = 1;
    pub const FOUND_ROWS: u32 = 1 << 1;
    pub const LONG_FLAG: u32 = 1 << 2;
    pub const CONNECT_WITH_DB: u32 = 1 << 3;
    pub const NO_SCHEMA: u32 = 1 << 4;
    pub const COMPRESS: u32 = 1 << 5;
    pub const ODBC: u32 = 1 << 6;
    pub const LOCAL_FILES: u32 = 1 << 7;
    pub const IGNORE_SPACE: u32 = 1 << 8;
    pub const PROTOCOL_41: u32 = 1 << 9;
    pub const INTERACTIVE: u32 = 1 << 10;
    pub const SSL: u32 = 1 << 11;
    pub const IGNORE_SIGPIPE: u32 = 1 << 12;
    pub const TRANSACTIONS: u32 = 1 << 13;
    pub const RESERVED: u32 = 1 << 14;
    pub const SECURE_CONNECTION: u32 = 1 << 15;
    pub const MULTI_STATEMENTS: u32 = 1 << 16;
    pub const MULTI_RESULTS: u32 = 1 << 17;
    pub const PS_MULTI_RESULTS: u32 = 1 << 18;
    pub const PLUGIN_AUTH: u32 = 1 << 19;
    pub const CONNECT_ATTRS: u32 = 1 << 20;
    pub const PLUGIN_AUTH_LENENC_CLIENT_DATA: u32 = 1 << 21;
    pub const CAN_HANDLE_EXPIRED_PASSWORDS: u32 = 1 << 22;
    pub const SESSION_TRACK: u32 = 1 << 23;
    pub const DEPRECATE_EOF: u32 = 1 << 24;

    /// What manifold's front door offers. No COMPRESS (not implemented) and none of
    /// MariaDB's extended capabilities: advertising `LONG_PASSWORD` (MariaDB's `CLIENT_MYSQL`)
    /// tells MariaDB clients not to look for them, so result metadata is never cached
    /// client-side and progress packets never appear.
    pub const SERVER_DEFAULT: u32 = LONG_PASSWORD
        | FOUND_ROWS
        | LONG_FLAG
        | CONNECT_WITH_DB
        | NO_SCHEMA
        | ODBC
        | LOCAL_FILES
        | IGNORE_SPACE
        | PROTOCOL_41
        | INTERACTIVE
        | IGNORE_SIGPIPE
        | TRANSACTIONS
        | RESERVED
        | SECURE_CONNECTION
        | MULTI_STATEMENTS
        | MULTI_RESULTS
        | PS_MULTI_RESULTS
        | PLUGIN_AUTH
        | CONNECT_ATTRS
        | PLUGIN_AUTH_LENENC_CLIENT_DATA
        | CAN_HANDLE_EXPIRED_PASSWORDS
        | SESSION_TRACK
        | DEPRECATE_EOF;

    /// Client flags that change what the server sends or how it behaves for the session.
    /// A backend connection must carry the same values as the client session it serves,
    /// so these are part of the key a pooled connection is chosen by. `SESSION_TRACK` is not
    /// among them: backend connections always track state, and manifold strips the tracking
    /// data from OK packets for clients that did not ask for it.
    pub const SESSION_AFFECTING: u32 = FOUND_ROWS
        | IGNORE_SPACE
        | LOCAL_FILES
        | MULTI_STATEMENTS
        | MULTI_RESULTS
        | PS_MULTI_RESULTS
        | DEPRECATE_EOF;
}

/// Server status flags (`SERVER_STATUS_*`).
pub mod status {
    pub const IN_TRANS: u16 = 1;
    pub const AUTOCOMMIT: u16 = 1 << 1;
    pub const MORE_RESULTS_EXISTS: u16 = 1 << 3;
    pub const NO_GOOD_INDEX_USED: u16 = 1 << 4;
    pub const NO_INDEX_USED: u16 = 1 << 5;
    pub const CURSOR_EXISTS: u16 = 1 << 6;
    pub const LAST_ROW_SENT: u16 = 1 << 7;
    pub const DB_DROPPED: u16 = 1 << 8;
    pub const NO_BACKSLASH_ESCAPES: u16 = 1 << 9;
    pub const METADATA_CHANGED: u16 = 1 << 10;
    pub const QUERY_WAS_SLOW: u16 = 1 << 11;
    pub const PS_OUT_PARAMS: u16 = 1 << 12;
    pub const IN_TRANS_READONLY: u16 = 1 << 13;
    pub const SESSION_STATE_CHANGED: u16 = 1 << 14;
}

/// Command bytes (`COM_*`).
pub mod command {
    pub const SLEEP: u8 = 0x00;
    pub const QUIT: u8 = 0x01;
    pub const INIT_DB: u8 = 0x02;
    pub const QUERY: u8 = 0x03;
    pub const FIELD_LIST: u8 = 0x04;
    pub const CREATE_DB: u8 = 0x05;
    pub const DROP_DB: u8 = 0x06;
    pub const REFRESH: u8 = 0x07;
    pub const SHUTDOWN: u8 = 0x08;
    pub const STATISTICS: u8 = 0x09;
    pub const PROCESS_INFO: u8 = 0x0a;
    pub const CONNECT: u8 = 0x0b;
    pub const PROCESS_KILL: u8 = 0x0c;
    pub const DEBUG: u8 = 0x0d;
    pub const PING: u8 = 0x0e;
    pub const TIME: u8 = 0x0f;
    pub const DELAYED_INSERT: u8 = 0x10;
    pub const CHANGE_USER: u8 = 0x11;
    pub const BINLOG_DUMP: u8 = 0x12;
    pub const TABLE_DUMP: u8 = 0x13;
    pub const CONNECT_OUT: u8 = 0x14;
    pub const REGISTER_SLAVE: u8 = 0x15;
    pub const STMT_PREPARE: u8 = 0x16;
    pub const STMT_EXECUTE: u8 = 0x17;
    pub const STMT_SEND_LONG_DATA: u8 = 0x18;
    pub const STMT_CLOSE: u8 = 0x19;
    pub const STMT_RESET: u8 = 0x1a;
    pub const SET_OPTION: u8 = 0x1b;
    pub const STMT_FETCH: u8 = 0x1c;
    pub const DAEMON: u8 = 0x1d;
    pub const BINLOG_DUMP_GTID: u8 = 0x1e;
    pub const RESET_CONNECTION: u8 = 0x1f;
}

/// Column types (`MYSQL_TYPE_*`).
pub mod column_type {
    pub const DECIMAL: u8 = 0x00;
    pub const TINY: u8 = 0x01;
    pub const SHORT: u8 = 0x02;
    pub const LONG: u8 = 0x03;
    pub const FLOAT: u8 = 0x04;
    pub const DOUBLE: u8 = 0x05;
    pub const NULL: u8 = 0x06;
    pub const TIMESTAMP: u8 = 0x07;
    pub const LONGLONG: u8 = 0x08;
    pub const INT24: u8 = 0x09;
    pub const DATE: u8 = 0x0a;
    pub const TIME: u8 = 0x0b;
    pub const DATETIME: u8 = 0x0c;
    pub const YEAR: u8 = 0x0d;
    pub const NEWDATE: u8 = 0x0e;
    pub const VARCHAR: u8 = 0x0f;
    pub const BIT: u8 = 0x10;
    pub const JSON: u8 = 0xf5;
    pub const NEWDECIMAL: u8 = 0xf6;
    pub const ENUM: u8 = 0xf7;
    pub const SET: u8 = 0xf8;
    pub const TINY_BLOB: u8 = 0xf9;
    pub const MEDIUM_BLOB: u8 = 0xfa;
    pub const LONG_BLOB: u8 = 0xfb;
    pub const BLOB: u8 = 0xfc;
    pub const VAR_STRING: u8 = 0xfd;
    pub const STRING: u8 = 0xfe;
    pub const GEOMETRY: u8 = 0xff;
}

/// Column definition flags used by manifold's own result sets.
pub mod column_flag {
    pub const NOT_NULL: u16 = 1;
    pub const PRI_KEY: u16 = 2;
    pub const UNSIGNED: u16 = 32;
    pub const BINARY: u16 = 128;
}

/// `utf8mb4_general_ci`: what manifold's own result sets are labelled with and what backend
/// connections use unless a client asks for something else.
pub const UTF8MB4_GENERAL_CI: u8 = 45;
/// `binary`: the collation of numeric columns.
pub const BINARY_COLLATION: u8 = 63;
/// The largest payload one packet can carry; longer payloads are split.
pub const MAX_PAYLOAD: usize = 0xFF_FFFF;
