//! Commands on keys of any type: `DEL`, `UNLINK`, `EXISTS`, `TYPE`, and the expiry and
//! iteration commands.

use super::data::{Family, Spec};
use super::Args;
use crate::exec::Cx;
use crate::store::keys::type_name;
use crate::store::StoreError;

const fn spec(name: &'static str, arity: i32, write: bool) -> Spec {
    Spec {
        name,
        arity,
        write,
        family: Family::Keys,
    }
}

pub static COMMANDS: [Spec; 4] = [
    spec("del", -2, true),
    spec("unlink", -2, true),
    spec("exists", -2, false),
    spec("type", 2, false),
];

/// Runs one key command.
pub async fn run(cx: &mut Cx<'_>, spec: &'static Spec, args: Args<'_>) -> Result<(), StoreError> {
    match spec.name {
        "del" | "unlink" => {
            let mut n = 0;
            for k in args.from(1) {
                if let Some(row) = cx.tx.key_meta(cx.db, k, true).await? {
                    cx.tx.delete_key(cx.db, k, &row).await?;
                    n += 1;
                }
            }
            cx.reply().integer(n);
        }
        "exists" => {
            let mut n = 0;
            for k in args.from(1) {
                if cx.tx.key_meta(cx.db, k, false).await?.is_some() {
                    n += 1;
                }
            }
            cx.reply().integer(n);
        }
        "type" => {
            let t = cx
                .tx
                .key_meta(cx.db, args.get(1), false)
                .await?
                .map_or("none", |r| type_name(r.kind));
            cx.reply().simple(t.as_bytes());
        }
        other => unreachable!("{other} is not a key command"),
    }
    Ok(())
}
