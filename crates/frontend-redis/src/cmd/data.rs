//! The data commands: each family module lists its commands ([`Spec`]); the command table
//! ([`super::table`]) holds them with the others, a request's name is looked up there (any
//! case), its arity checked, and the family runs it in a batch ([`crate::exec`]).

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
    Streams,
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
        .chain(super::streams::COMMANDS.iter())
        .chain(super::strings::pf::COMMANDS.iter())
        .chain(super::strings::bits::COMMANDS.iter())
        .chain(super::strings::bitfield::COMMANDS.iter())
        .chain(super::zsets::geo::COMMANDS.iter())
        .chain(super::zsets::geo::SEARCH_COMMANDS.iter())
        .chain(super::keys::object::COMMANDS.iter())
        .chain(super::keys::sort::COMMANDS.iter())
}

/// Data commands the door knows.
pub fn count() -> usize {
    families().count()
}

/// The data command named `name` (any case), from the command table ([`super::table`]).
pub fn lookup(name: &[u8]) -> Option<&'static Spec> {
    super::table().command(name)?.spec()
}
