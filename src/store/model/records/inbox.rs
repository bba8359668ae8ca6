//! A person's inbox: its entries (a message addressed to them, or a notice from the server) and
//! where one consumer stands in it; with the parser of an entry's row. It must not depend on any
//! file of the store but `db` (rows) and `error`.

use serde::Serialize;

use crate::domain::{ChannelName, MessageId, PersonId, ThreadId, Timestamp};
use crate::store::db::Row;
use crate::store::error::{Result, StoreError, json_err};

/// What an inbox entry points at.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EntryContent {
    /// A message addressed to the person.
    Message {
        message: MessageId,
        thread: ThreadId,
        channel: ChannelName,
    },
    /// A notice from the server itself (e.g. a lease taken over with `force`).
    Notice { notice: serde_json::Value },
}

#[derive(Debug, Clone, Serialize)]
pub struct InboxEntry {
    pub seq: i64,
    #[serde(flatten)]
    pub content: EntryContent,
    pub created_at: Timestamp,
}

/// Where one consumer stands in a person's inbox.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct InboxPosition {
    /// Everything up to here is acknowledged by this consumer.
    pub acked: i64,
    /// The last sequence number handed out in this inbox.
    pub last: i64,
}

pub(in crate::store) fn entry(row: &Row) -> Result<InboxEntry> {
    let kind: String = row.try_get("entry_kind")?;
    let content = match kind.as_str() {
        "message" => EntryContent::Message {
            message: MessageId::parse(row.try_get::<String, _>("message_id")?)?,
            thread: ThreadId::parse(row.try_get::<String, _>("thread_id")?)?,
            channel: ChannelName::parse(row.try_get::<String, _>("channel")?)?,
        },
        "notice" => EntryContent::Notice {
            notice: serde_json::from_str(&row.try_get::<String, _>("notice")?).map_err(json_err)?,
        },
        other => return Err(StoreError::Corrupt(format!("inbox entry kind {other:?}"))),
    };
    Ok(InboxEntry {
        seq: row.try_get("seq")?,
        content,
        created_at: Timestamp(row.try_get("created_at")?),
    })
}

/// One recipient's receipt of one message (SPEC §4): the inbox entry (delivered), and for each
/// consumer that saw it, when its inbox call returned it (read) and when its cursor passed it
/// (acknowledged). `consumer` is `None` while no consumer has seen it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReceiptRecord {
    pub message: MessageId,
    pub person: PersonId,
    pub delivered_at: Timestamp,
    pub consumer: Option<String>,
    pub read_at: Option<Timestamp>,
    pub acked_at: Option<Timestamp>,
}

pub(in crate::store) fn receipt(row: &Row) -> Result<ReceiptRecord> {
    let at = |name: &str| -> Result<Option<Timestamp>> {
        Ok(row.try_get::<Option<i64>, _>(name)?.map(Timestamp))
    };
    Ok(ReceiptRecord {
        message: MessageId::parse(row.try_get::<String, _>("message_id")?)?,
        person: PersonId::parse(row.try_get::<String, _>("person_id")?)?,
        delivered_at: Timestamp(row.try_get("delivered_at")?),
        consumer: row.try_get("consumer")?,
        read_at: at("read_at")?,
        acked_at: at("acked_at")?,
    })
}
