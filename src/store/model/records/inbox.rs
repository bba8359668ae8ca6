//! A person's inbox: its entries (a message addressed to them, or a notice from the server) and
//! where one consumer stands in it; with the parsers of an entry's row and of a page's joined row.
//! It must not depend on any file of the store but `db` (rows), `error` and `threads` (the
//! message and thread state a page row carries).

use serde::Serialize;

use crate::domain::{ChannelName, MessageId, PersonId, ThreadId, ThreadState, Timestamp};
use crate::store::db::Row;
use crate::store::error::{Result, StoreError, json_err};

use super::threads::{MessageRecord, message, opt_parse};

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

/// An inbox entry as a page shows it, read in one joined statement with what it points at: the
/// message (none for a notice, or for a message that is gone) and its thread's state (none when
/// the thread is gone).
#[derive(Debug, Clone)]
pub struct PageEntry {
    pub entry: InboxEntry,
    pub message: Option<MessageRecord>,
    pub thread_state: Option<ThreadState>,
}

/// Reads a page row: the entry's columns under `e_` names (they share names with the
/// message's), the message's as [`message`] reads them (all NULL for a notice), the thread's
/// state under `t_` names (`Store::inbox_page` selects them).
pub(in crate::store) fn page_entry(row: &Row) -> Result<PageEntry> {
    let kind: String = row.try_get("e_kind")?;
    let content = match kind.as_str() {
        "message" => EntryContent::Message {
            message: MessageId::parse(row.try_get::<String, _>("e_message")?)?,
            thread: ThreadId::parse(row.try_get::<String, _>("e_thread")?)?,
            channel: ChannelName::parse(row.try_get::<String, _>("e_channel")?)?,
        },
        "notice" => EntryContent::Notice {
            notice: serde_json::from_str(&row.try_get::<String, _>("e_notice")?)
                .map_err(json_err)?,
        },
        other => return Err(StoreError::Corrupt(format!("inbox entry kind {other:?}"))),
    };
    let message = match row.try_get::<Option<String>, _>("id")? {
        Some(_) => Some(message(row)?),
        None => None,
    };
    let thread_state = match row.try_get::<Option<String>, _>("t_state")? {
        Some(name) => {
            let asker = row
                .try_get::<Option<String>, _>("t_asker")?
                .map(PersonId::parse)
                .transpose()?;
            let outcome = opt_parse(row.try_get("t_outcome")?)?;
            Some(
                ThreadState::from_parts(&name, asker, outcome)
                    .ok_or_else(|| StoreError::Corrupt(format!("thread state {name:?}")))?,
            )
        }
        None => None,
    };
    Ok(PageEntry {
        entry: InboxEntry {
            seq: row.try_get("e_seq")?,
            content,
            created_at: Timestamp(row.try_get("e_created_at")?),
        },
        message,
        thread_state,
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
