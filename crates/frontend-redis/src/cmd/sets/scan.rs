//! `SSCAN key cursor [MATCH pattern] [COUNT count]`, iterating as every `*SCAN` does
//! ([`crate::cmd::scan`]): in the order of the members' hashes (`mh`).

use super::member_row;
use crate::cmd::scan;
use crate::store::context::Cx;
use crate::store::keys::kind;
use crate::store::StoreError;

/// `SSCAN key cursor [MATCH pattern] [COUNT count]`.
pub(super) async fn sscan(
    cx: &mut Cx<'_>,
    scan: scan::CollectionScan<'_>,
) -> Result<(), StoreError> {
    let Some(page) = scan::collection_scan(
        cx,
        scan,
        kind::SET,
        "SELECT mh, member FROM {s}.redis_set WHERE kid = ? AND mh >= ? ORDER BY mh LIMIT ?",
    )
    .await?
    else {
        return Ok(());
    };
    let members: Vec<Vec<u8>> = page
        .rows
        .into_iter()
        .filter_map(member_row)
        .map(|(_, m)| m)
        .filter(|m| page.pattern.as_ref().is_none_or(|g| g.matches(m)))
        .collect();
    let mut reply = cx.reply();
    scan::start_reply(&mut reply, page.next, members.len());
    for m in &members {
        reply.bulk(m);
    }
    Ok(())
}
