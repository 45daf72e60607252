//! The data commands' table: each family module lists its commands ([`Spec`]); a request's
//! name is looked up here (any case), its arity checked, and the family runs it in a batch
//! ([`crate::exec`]).

use std::collections::HashMap;
use std::sync::OnceLock;

/// Which module runs a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    Strings,
    Keys,
    Expiry,
    Hashes,
    Lists,
    Sets,
    ZSets,
}

/// One data command.
#[derive(Debug)]
pub struct Spec {
    /// Lowercase, as `CLIENT LIST` and error texts show it.
    pub name: &'static str,
    /// Redis's arity: `n > 0` exactly `n` arguments (name included), `n < 0` at least `-n`.
    pub arity: i32,
    /// It may write: a batch with one runs in a transaction.
    pub write: bool,
    pub family: Family,
    /// Parses the arguments into the typed command ([`super::typed`]).
    pub parse: super::typed::Parse,
}

/// Every family's commands.
pub fn families() -> impl Iterator<Item = &'static Spec> {
    super::strings::COMMANDS
        .iter()
        .chain(super::keys::COMMANDS.iter())
        .chain(super::expiry::COMMANDS.iter())
        .chain(super::hashes::COMMANDS.iter())
        .chain(super::lists::COMMANDS.iter())
        .chain(super::sets::COMMANDS.iter())
        .chain(super::zsets::COMMANDS.iter())
}

/// Data commands the door knows.
pub fn count() -> usize {
    families().count()
}

/// The data command named `name` (any case).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    static TABLE: OnceLock<HashMap<&'static [u8], &'static Spec>> = OnceLock::new();
    let table = TABLE.get_or_init(|| families().map(|s| (s.name.as_bytes(), s)).collect());
    let mut lower = [0u8; 32];
    let lower = lower.get_mut(..name.len())?;
    for (l, b) in lower.iter_mut().zip(name) {
        *l = b.to_ascii_lowercase();
    }
    table.get(&*lower).copied()
}
