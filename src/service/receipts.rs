//! Receipts (SPEC §4): for each recipient of a message, when it reached the inbox, which of the
//! recipient's consumers (one per agent: `claude`, `codex`…) read it and when its cursor passed
//! it. They answer the sender's question "has anyone's agent picked this up?" — a message can be
//! delivered and still unread.
//!
//! Who may see them: whoever may read the thread (a member of its channel with `read`); the
//! receipts say which consumer names read a message, never what the agent did with it.

use std::collections::HashMap;

use serde::Serialize;

use super::{Result, Service};
use crate::domain::{ConnectionSlug, MessageId, PersonId, ThreadId, Timestamp};

/// One recipient's receipt of one message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecipientReceipt {
    pub person: PersonId,
    /// The person's display name, as an admin set it.
    pub name: String,
    /// When the message reached the person's inbox.
    pub delivered_at: Timestamp,
    /// The consumers that read it, by name.
    pub consumers: Vec<ConsumerReceipt>,
}

/// What one consumer did with a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConsumerReceipt {
    pub consumer: String,
    /// The connection that read with this consumer (SPEC §4b), when one did; none for the
    /// person's own credentials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection: Option<ConnectionSlug>,
    /// When an inbox call returned it to this consumer; none when the consumer acknowledged it
    /// without having been given it (a cursor moved past it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_at: Option<Timestamp>,
    /// When the consumer's cursor passed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acked_at: Option<Timestamp>,
}

impl RecipientReceipt {
    /// Read by at least one consumer.
    pub fn read(&self) -> bool {
        self.consumers.iter().any(|c| c.read_at.is_some())
    }

    /// Acknowledged by at least one consumer.
    pub fn acknowledged(&self) -> bool {
        self.consumers.iter().any(|c| c.acked_at.is_some())
    }
}

impl Service {
    /// The display names of these persons (an admin sets them); an unknown or removed person
    /// keeps its id.
    pub async fn display_names(&self, ids: &[PersonId]) -> Result<HashMap<PersonId, String>> {
        let mut names = HashMap::with_capacity(ids.len());
        for id in ids {
            if names.contains_key(id) {
                continue;
            }
            let name = match self.inner.store.person(id).await? {
                Some(p) => p.display_name,
                None => id.to_string(),
            };
            names.insert(id.clone(), name);
        }
        Ok(names)
    }

    /// The receipts of `messages` in `thread`, per message, recipients in id order.
    pub(super) async fn receipts(
        &self,
        thread: &ThreadId,
        messages: &[MessageId],
    ) -> Result<HashMap<MessageId, Vec<RecipientReceipt>>> {
        let rows = self.inner.store.thread_receipts(thread, messages).await?;
        let mut names: HashMap<PersonId, String> = HashMap::new();
        let mut connections: HashMap<String, Option<ConnectionSlug>> = HashMap::new();
        let mut out: HashMap<MessageId, Vec<RecipientReceipt>> = HashMap::new();
        for r in rows {
            if !names.contains_key(&r.person) {
                let name = match self.inner.store.person(&r.person).await? {
                    Some(p) => p.display_name,
                    None => r.person.to_string(),
                };
                names.insert(r.person.clone(), name);
            }
            let list = out.entry(r.message.clone()).or_default();
            if list.last().is_none_or(|last| last.person != r.person) {
                list.push(RecipientReceipt {
                    name: names[&r.person].clone(),
                    person: r.person.clone(),
                    delivered_at: r.delivered_at,
                    consumers: Vec::new(),
                });
            }
            if let Some(key) = r.consumer {
                // A connection's consumer is stored under its token (service/connections.rs);
                // the receipt names the connection, never the credential.
                let (token, name) = crate::domain::split_consumer_key(&key);
                let connection = match token {
                    Some(token) => {
                        if !connections.contains_key(token) {
                            let name = self.connection_name(token).await?;
                            connections.insert(token.to_owned(), name);
                        }
                        connections[token].clone()
                    }
                    None => None,
                };
                let last = list.last_mut().expect("pushed above");
                last.consumers.push(ConsumerReceipt {
                    consumer: name.to_owned(),
                    connection,
                    read_at: r.read_at,
                    acked_at: r.acked_at,
                });
            }
        }
        Ok(out)
    }
}
