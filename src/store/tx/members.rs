//! The directory's building block: a channel membership written inside the transaction of the
//! change that makes it (a member change, a channel with its first members, a party with the
//! channels it joins). Calls no other block.

use crate::domain::ChannelName;
use crate::store::db::{Conn, query};
use crate::store::error::Result;
use crate::store::model::records::directory::MemberRecord;

/// True when `channel` exists and was not removed, read inside the transaction that changes it.
pub(in crate::store) async fn live_channel(tx: &mut Conn, channel: &ChannelName) -> Result<bool> {
    let row = query("SELECT name FROM channels WHERE name = $1 AND removed_at IS NULL")
        .bind(channel.as_str().to_owned())
        .fetch_optional(&mut *tx)
        .await?;
    Ok(row.is_some())
}

/// Makes `m` a member of `channel` with its rights (replacing the rights of a member already).
pub(in crate::store) async fn upsert_member(
    tx: &mut Conn,
    channel: &ChannelName,
    m: &MemberRecord,
) -> Result<()> {
    query(
        "INSERT INTO channel_members (channel, person_id, rights) VALUES ($1, $2, $3) \
         ON CONFLICT (channel, person_id) DO UPDATE SET rights = excluded.rights",
    )
    .bind(channel.as_str().to_owned())
    .bind(m.person.as_str().to_owned())
    .bind(m.rights.to_string())
    .execute(tx)
    .await?;
    Ok(())
}
