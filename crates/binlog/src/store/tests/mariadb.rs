//! mariadb-binlog reads the files.
