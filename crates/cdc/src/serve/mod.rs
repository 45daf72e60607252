//! Serving the global binlog on the MySQL port.
//!
//! OWNER: the serving helper.
