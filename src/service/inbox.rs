//! The inbox: named consumers with server-held cursors, the exactly-once drain and the long-poll.
//!
//! `after = c` first acknowledges everything up to `c` for the consumer, then returns what follows
//! the consumer's cursor. A lost response is recovered by asking again with the same `after`; an
//! entry once acknowledged is never returned again. A long-poll subscribes to the wake-up bus
//! *before* reading, so an entry committed between the read and the wait still wakes it.

use std::future::Future;
use std::time::Duration;

use serde::Serialize;

use super::{Caller, DeliveredMessage, ErrorCode, MAX_SLICE_CHARS, Result, Service, ServiceError};
use crate::bus::Topic;
use crate::domain::{PersonId, Timestamp};
use crate::store::{EntryContent, InboxEntry};

/// Characters of body included in an inbox entry (less when the page's bodies together would pass
/// [`MAX_SLICE_CHARS`]); `read_message` returns the rest.
pub(super) const PREVIEW_CHARS: usize = 2_000;

#[derive(Debug, Clone, Default)]
pub struct InboxRequest {
    /// The consumer's name, e.g. `claude`; each consumer has its own cursor.
    pub consumer: String,
    /// Acknowledge everything up to here first.
    pub after: Option<i64>,
    /// 1–100, default 20.
    pub limit: Option<i64>,
    /// 0–50 seconds of long-poll when nothing is there yet.
    pub wait_s: Option<u64>,
    /// Only the entries of this personal session (SPEC §4b), for a connection that joined it;
    /// `session_ended` once it ends, at once for a waiting call.
    pub session: Option<crate::domain::personal::SessionId>,
}

/// One inbox entry as returned to a consumer.
#[derive(Debug, Clone, Serialize)]
pub struct InboxItem {
    pub seq: i64,
    pub created_at: Timestamp,
    #[serde(flatten)]
    pub content: ItemContent,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ItemContent {
    /// A message, labelled, with at most [`PREVIEW_CHARS`] of its body.
    Message {
        #[serde(flatten)]
        message: Box<DeliveredMessage>,
        thread_state: &'static str,
        #[serde(flatten)]
        body: super::BodyExtent,
        /// For a request that needs a human's approval: where that approval stands.
        #[serde(skip_serializing_if = "Option::is_none")]
        approval: Option<ApprovalBadge>,
    },
    /// A notice from the server (e.g. `lease_taken`).
    Notice { notice: serde_json::Value },
}

/// Where a request's approval stands, as an inbox entry shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalBadge {
    pub id: crate::domain::ApprovalId,
    pub state: crate::domain::ApprovalState,
    pub fingerprint: String,
    pub approvers: Vec<PersonId>,
}

/// The most unread entries a page counts. A count reads every entry it counts, and a consumer
/// that never acknowledges (an agent that only claims) has its whole history unread: past this
/// many, a page says `unread_more` instead of reading on.
pub const UNREAD_COUNTED: i64 = 1000;

#[derive(Debug, Clone, Serialize)]
pub struct InboxPage {
    pub consumer: String,
    pub entries: Vec<InboxItem>,
    /// Pass as `after` on the next call to acknowledge these entries and get the following ones.
    pub cursor: i64,
    /// Everything up to here is acknowledged by this consumer.
    pub acked: i64,
    /// The last sequence number in the inbox.
    pub last: i64,
    /// Entries after `acked` this consumer's reader may see (SPEC §4b: never its own posts):
    /// what the Stop hook counts, up to [`UNREAD_COUNTED`]. `last - acked` also counts entries
    /// for the person's other readers.
    pub unread: i64,
    /// More entries are unread than `unread` says: it stopped counting at [`UNREAD_COUNTED`].
    pub unread_more: bool,
    /// Whether more entries follow this page.
    pub more: bool,
    /// True when the call waited its whole `wait_s` and nothing came.
    pub timed_out: bool,
}

/// Counts a long-poll for its person while alive.
pub(super) struct WaiterGuard<'a> {
    service: &'a Service,
    person: PersonId,
    token: String,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        let mut waiters = self
            .service
            .inner
            .waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = waiters.get_mut(&self.person) {
            *n -= 1;
            if *n == 0 {
                waiters.remove(&self.person);
            }
        }
        drop(waiters);
        let mut tokens = self
            .service
            .inner
            .token_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = tokens.get_mut(&self.token) {
            *n -= 1;
            if *n == 0 {
                tokens.remove(&self.token);
            }
        }
    }
}

pub(super) fn check_consumer(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@' | b':'));
    if ok {
        Ok(())
    } else {
        Err(ServiceError::invalid(
            "consumer must be 1-64 characters of letters, digits, - _ . @ :",
        ))
    }
}

impl Service {
    /// Inbox long-polls waiting now, and A2A streams open now (for `/metrics`).
    pub fn waiting(&self) -> (usize, usize) {
        let waiters = self.inner.waiters.lock().unwrap_or_else(|e| e.into_inner());
        (waiters.values().sum(), self.inner.limits.open_streams())
    }

    /// Since when every write has failed, while they do (for `/readyz` and `/metrics`).
    pub fn writes_failing_since(&self) -> Option<crate::domain::Timestamp> {
        self.inner
            .store
            .writes_failing_since_ms()
            .map(crate::domain::Timestamp)
    }

    /// Since when the group commit under way has waited on the database, when that is longer than
    /// `longer_than` (for `/readyz`).
    pub fn writes_stuck_since(
        &self,
        longer_than: std::time::Duration,
    ) -> Option<crate::domain::Timestamp> {
        self.inner
            .store
            .writes_stuck_since_ms(longer_than)
            .map(crate::domain::Timestamp)
    }

    /// The read pool's open and idle connections (for `/metrics`).
    pub fn pool_usage(&self) -> (u32, usize) {
        self.inner.store.pool_usage()
    }

    /// Reads (and with `wait_s`, waits for) the caller's inbox. Dropping the returned future ends
    /// the wait and acknowledges nothing beyond the `after` the caller passed.
    ///
    /// Not an `async fn`: the long-poll's future is the traced work itself, with no room kept
    /// for its arguments beside it.
    pub fn inbox<'a>(
        &'a self,
        caller: &'a Caller,
        req: InboxRequest,
    ) -> impl Future<Output = Result<InboxPage>> + Send + 'a {
        self.traced("service.inbox", None, self.inbox_untraced(caller, req))
    }

    async fn inbox_untraced(&self, caller: &Caller, req: InboxRequest) -> Result<InboxPage> {
        caller.require_participant()?;
        check_consumer(&req.consumer)?;
        let limit = match req.limit {
            None => 20,
            Some(l) if (1..=100).contains(&l) => l,
            Some(l) => {
                return Err(ServiceError::invalid(format!(
                    "limit {l} is out of range: use 1-100"
                )));
            }
        };
        let max_wait = self.inner.settings.max_wait_s;
        let wait_s = req.wait_s.unwrap_or(0);
        if wait_s > max_wait {
            return Err(ServiceError::invalid(format!(
                "wait_s {wait_s} is out of range: use 0-{max_wait}"
            )));
        }
        if req.after.is_some_and(|a| a < 0) {
            return Err(ServiceError::invalid(
                "after must be 0 or a cursor you received",
            ));
        }
        if let Some(session) = &req.session {
            self.readable_session(caller, session).await?;
        }
        let store = &self.inner.store;
        let person = caller.id().clone();
        // A connection's consumers are its own; it carries on from the person's plain consumer
        // of the same name (service/connections.rs).
        let reader = caller.reader();
        let key = reader.consumer_key(&req.consumer);
        let reader = reader.key().to_owned();

        // The store's calls and the page are boxed: this future lives as long as a long-poll waits
        // (10,000 of them on a busy server), and unboxed it holds room for the largest of them
        // the whole time (2,056 bytes instead of 696 in a release build).
        let mut position = Box::pin(store.inbox_position(&person, &key, &req.consumer)).await?;
        if let Some(after) = req.after {
            if after > position.last {
                // Re-check in the writer, which is authoritative, but refuse without writing.
                return Err(crate::store::StoreError::CursorAhead {
                    after,
                    last: position.last,
                }
                .into());
            }
            if after > position.acked {
                let (acked, changed) = Box::pin(store.acknowledge(
                    person.clone(),
                    key.clone(),
                    req.consumer.clone(),
                    reader.clone(),
                    after,
                    self.now(),
                ))
                .await?;
                position = acked;
                for a in &changed.authors {
                    self.inner.bus.publish(&Topic::seen(a));
                }
                for c in &changed.channels {
                    self.inner.bus.publish(&Topic::channel(c));
                }
            }
        }

        let _guard;
        let mut subscription = None;
        let mut hold = None;
        if wait_s > 0 {
            // A wait ends with its credential (revoked, removed, expired), whatever it waits for.
            hold = Some(self.hold_credential(caller).await?);
            // Subscribed before counted: a long-poll that `waiting` (the `liaison_inbox_waiters`
            // gauge) counts is one that a publish wakes.
            subscription = Some(self.inner.bus.subscribe(&Topic::inbox(&person)));
            _guard = self.count_waiter(caller)?;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(wait_s);
        let mut woke = false;
        loop {
            let mut entries = Box::pin(store.inbox_entries(
                &person,
                &reader,
                position.acked,
                limit + 1,
                req.session.as_ref(),
            ))
            .await?;
            // A session that ended meanwhile ends the call (her "End session" wakes it).
            if woke && let Some(session) = &req.session {
                Box::pin(self.readable_session(caller, session)).await?;
            }
            let more = entries.len() as i64 > limit;
            entries.truncate(limit as usize);
            // Woken with nothing to return: perhaps the token was revoked (its revocation wakes
            // the person's long-polls), which ends the wait at once.
            if woke && entries.is_empty() {
                Box::pin(self.still_valid(caller)).await?;
            }
            if let Some(h) = &hold {
                h.check()?;
            }
            woke = false;
            let timed_out =
                entries.is_empty() && wait_s > 0 && tokio::time::Instant::now() >= deadline;
            let Some(sub) = subscription
                .as_mut()
                .filter(|_| entries.is_empty() && !timed_out)
            else {
                let last = entries
                    .last()
                    .map(|e| e.seq)
                    .unwrap_or(position.acked)
                    .max(position.last);
                let reads: Vec<_> = entries
                    .iter()
                    .filter_map(|e| match &e.content {
                        EntryContent::Message {
                            message, thread, ..
                        } => Some((e.seq, message.clone(), thread.clone())),
                        EntryContent::Notice { .. } => None,
                    })
                    .collect();
                // Every entry after `acked` the reader may see is on the page when nothing more
                // follows and no session narrowed the read: they are the unread count.
                let listed = (req.session.is_none() && !more).then_some(entries.len() as i64);
                let page = Box::pin(self.page(
                    caller,
                    req.consumer,
                    entries,
                    (position.acked, last),
                    listed,
                    more,
                    timed_out,
                ))
                .await?;
                if !reads.is_empty() {
                    self.record_reads(person, key, reads, &page).await;
                }
                return Ok(page);
            };
            tokio::select! {
                () = sub.woken() => woke = true,
                () = tokio::time::sleep_until(deadline) => {}
                why = super::credentials::ended(hold.as_ref()) => return Err(why),
                () = self.inner.shutdown.cancelled() => {
                    let page = self.page(caller, req.consumer, Vec::new(), (position.acked, position.last), None, false, false);
                    return Box::pin(page).await;
                }
            }
        }
    }

    /// The "read" of the receipts of the messages on this page (SPEC §4), recorded behind the
    /// answer: a receipt is information, not an acknowledgement, so the answer does not wait for
    /// its durable write (the store's `record_reads` says when it is written and what a crash
    /// loses). Once it is written, the messages' authors are told (their consoles show receipts
    /// live), and every reader of their threads (the thread page shows each message's receipts
    /// to all of them). Failing to record it fails nothing the caller asked for: it is logged.
    async fn record_reads(
        &self,
        person: PersonId,
        key: String,
        reads: Vec<(i64, crate::domain::MessageId, crate::domain::ThreadId)>,
        page: &InboxPage,
    ) {
        let messages = page.entries.iter().filter_map(|e| match &e.content {
            ItemContent::Message { message, .. } => Some(&message.message),
            _ => None,
        });
        let mut topics: Vec<Topic> = messages
            .clone()
            .map(|m| Topic::seen(&m.author))
            .chain(messages.map(|m| Topic::channel(&m.channel)))
            .collect();
        topics.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        topics.dedup();
        let bus = self.inner.bus.clone();
        let then: crate::store::Then = Box::new(move |written| {
            if written.is_ok() {
                for t in &topics {
                    bus.publish(t);
                }
            }
        });
        let store = &self.inner.store;
        if let Err(e) = Box::pin(store.record_reads(person, key, reads, self.now(), then)).await {
            tracing::warn!(error = %e, "Could not record the read of an inbox page's receipts.");
        }
    }

    /// How many entries `consumer` has not acknowledged yet, of those its reader may see (a
    /// connection is never told about its own posts, SPEC §4b), at most [`UNREAD_COUNTED`].
    pub async fn unread(&self, caller: &Caller, consumer: &str) -> Result<i64> {
        caller.require_participant()?;
        check_consumer(consumer)?;
        let reader = caller.reader();
        let store = &self.inner.store;
        let p = store
            .inbox_position(caller.id(), &reader.consumer_key(consumer), consumer)
            .await?;
        if p.last == p.acked {
            return Ok(0);
        }
        Ok(store
            .visible_after(caller.id(), reader.key(), p.acked, UNREAD_COUNTED)
            .await?)
    }

    /// Long-polls of this token waiting now, on this replica.
    pub(super) fn waiting_on(&self, token: &str) -> usize {
        let tokens = self
            .inner
            .token_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        tokens.get(token).copied().unwrap_or(0)
    }

    pub(super) fn count_waiter(&self, caller: &Caller) -> Result<WaiterGuard<'_>> {
        let person = caller.id();
        let mut waiters = self.inner.waiters.lock().unwrap_or_else(|e| e.into_inner());
        let n = waiters.entry(person.clone()).or_insert(0);
        if *n >= self.inner.settings.max_waiters_per_person {
            return Err(ServiceError::new(
                ErrorCode::TooManyWaiters,
                format!(
                    "{} long-polls already wait for this person; end one or poll without wait_s",
                    *n
                ),
            ));
        }
        *n += 1;
        drop(waiters);
        *self
            .inner
            .token_waiters
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(caller.token_id.clone())
            .or_insert(0) += 1;
        Ok(WaiterGuard {
            service: self,
            person: person.clone(),
            token: caller.token_id.clone(),
        })
    }

    /// The page of `entries`, the consumer standing at `acked` of an inbox at `last`. `listed`:
    /// the number of entries after `acked` the reader may see, when the read that found
    /// `entries` listed them all; else they are counted.
    #[allow(clippy::too_many_arguments)]
    async fn page(
        &self,
        caller: &Caller,
        consumer: String,
        entries: Vec<InboxEntry>,
        (acked, last): (i64, i64),
        listed: Option<i64>,
        more: bool,
        timed_out: bool,
    ) -> Result<InboxPage> {
        let cursor = entries.last().map_or(acked, |e| e.seq);
        let unread = if let Some(n) = listed {
            n
        } else if last > acked {
            let store = &self.inner.store;
            let reader = caller.reader();
            store
                .visible_after(caller.id(), reader.key(), acked, UNREAD_COUNTED + 1)
                .await?
        } else {
            0
        };
        let mut items = Vec::with_capacity(entries.len());
        let mut budget = MAX_SLICE_CHARS;
        for entry in entries {
            items.push(self.item(caller, entry, &mut budget).await?);
        }
        Ok(InboxPage {
            consumer,
            entries: items,
            cursor,
            acked,
            last,
            unread: unread.min(UNREAD_COUNTED),
            unread_more: unread > UNREAD_COUNTED,
            more,
            timed_out,
        })
    }

    /// One entry, its body cut to [`PREVIEW_CHARS`] and to what is left of the page's `budget`.
    async fn item(
        &self,
        caller: &Caller,
        entry: InboxEntry,
        budget: &mut usize,
    ) -> Result<InboxItem> {
        let content = match entry.content {
            EntryContent::Message {
                message, thread, ..
            } => {
                let store = &self.inner.store;
                // Both at once: on PostgreSQL each is a round trip on the wake-up's path.
                let (record, thread) =
                    tokio::try_join!(store.message(&message), store.thread(&thread))?;
                let mut record =
                    record.ok_or_else(|| ServiceError::not_found("message", &message))?;
                let thread_state = thread.map_or("open", |t| t.state.name());
                let body = super::reading::cut_body(&mut record, PREVIEW_CHARS, budget);
                let approval = if record.kind == crate::domain::Kind::Request {
                    store
                        .approval_of_message(&record.id)
                        .await?
                        .map(|a| ApprovalBadge {
                            id: a.id,
                            state: a.state,
                            fingerprint: a.fingerprint,
                            approvers: a.approvers,
                        })
                } else {
                    None
                };
                ItemContent::Message {
                    message: Box::new(self.deliver(caller, record).await?),
                    thread_state,
                    body,
                    approval,
                }
            }
            EntryContent::Notice { notice } => ItemContent::Notice { notice },
        };
        Ok(InboxItem {
            seq: entry.seq,
            created_at: entry.created_at,
            content,
        })
    }
}
