//! Expiry: `EXPIRE`, `TTL`, `PERSIST` and the rest of the TTL commands; the sweeper that deletes expired keys lives in `crate::store`.

use super::data::{Family, Spec};
use super::Args;
use crate::exec::Cx;
use crate::store::StoreError;

#[allow(dead_code)]
const fn spec(name: &'static str, arity: i32, write: bool) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Expiry,
    }
}

pub static COMMANDS: [Spec; 0] = [];

/// Runs one command of this family.
#[allow(clippy::unused_async)]
pub async fn run(_cx: &mut Cx<'_>, spec: &'static Spec, _args: Args<'_>) -> Result<(), StoreError> {
    unreachable!("{} is not in this family", spec.name)
}
