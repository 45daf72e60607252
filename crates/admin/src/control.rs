//! What the admin port asks of the server beyond its shared state: the tunables (read,
//! changed one by one, reloaded from the configuration file). The server's crate implements
//! it, since it alone knows the whole configuration and how each part is applied.

/// One tunable as `SHOW VARIABLES` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    /// Its configuration key, e.g. `pool.max_size`; `SET GLOBAL` takes the same name.
    pub name: String,
    pub value: String,
    pub default: String,
    /// The values it takes, e.g. `1..=100000` or `ON|OFF`.
    pub range: String,
    /// Changes while manifold runs (`SET GLOBAL`, `RELOAD CONFIG`); else at restart only.
    pub runtime: bool,
    pub help: String,
}

/// Why `SET GLOBAL` changed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SetError {
    /// No tunable has that name.
    Unknown(String),
    /// It changes at restart only.
    RestartOnly(String),
    /// The value is outside its range or of the wrong form; the message gives the range.
    Invalid(String),
}

/// A setting `RELOAD CONFIG` found changed in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub name: String,
    pub old: String,
    pub new: String,
    /// Applied now; else it takes effect at restart.
    pub applied: bool,
}

pub trait Control: Send + Sync {
    /// Every tunable, in a stable order.
    fn variables(&self) -> Vec<Variable>;
    /// Validates `value` against the tunable's range and applies it at once.
    fn set_variable(&self, name: &str, value: &str) -> Result<(), SetError>;
    /// Reads and validates the configuration file; if it is valid, applies every runtime
    /// setting that differs from what runs now (all of them or, when one fails, none) and
    /// lists the changes, including those that wait for a restart. An invalid file changes
    /// nothing and the error says why.
    fn reload_config(&self) -> Result<Vec<Change>, String>;
}
