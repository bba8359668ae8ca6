//! Read-through memory of the directory: tokens by secret hash, persons, channels with their
//! members, rights and policies, and parties. Every request authenticates and most check a
//! channel, so without it each one paid four to seven reads before its write.
//!
//! Three things bound how stale an answer can be:
//! - this store's own writes to those tables call [`Directory::forget`] after their commit;
//! - another replica's writes arrive as a wake-up on the bus, and the service calls
//!   [`super::Store::forget_directory`];
//! - every entry expires [`TTL`] after the read that produced it, which bounds everything else
//!   (a lost notification, a write made by another program on the database).
//!
//! A read that began before a `forget` never stores what it read (the epoch tells), so a value
//! read just before a revocation committed cannot outlive it. Only found rows are kept: unknown
//! token hashes are not, so guessing tokens cannot fill memory. Each map is bounded by [`MAX_ENTRIES`].
//! It knows no SQL and no rules; it must not depend on the service.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::model::records::directory::{ChannelRecord, PartyRecord, PersonRecord, TokenRecord};
use crate::domain::{ChannelName, PersonId};

/// How long an entry is trusted without any notification: a revocation made anywhere takes effect
/// within this, plus the time of the read that replaces the entry.
pub const TTL: Duration = Duration::from_millis(500);

/// Most entries per map; a full map is emptied (simple, and rare: it is about as many entries as
/// tokens in use within one TTL).
const MAX_ENTRIES: usize = 10_000;

/// The epoch a read started in; [`Memo::put`] refuses it once a `forget` has happened since.
#[derive(Debug, Clone, Copy)]
pub(super) struct Epoch(u64);

struct Entry<V> {
    value: V,
    loaded: Instant,
}

/// One map of cached rows.
struct Memo<K, V> {
    /// A std mutex: held for one map operation, never across an await.
    map: Mutex<HashMap<K, Entry<V>>>,
}

impl<K: Eq + Hash, V: Clone> Memo<K, V> {
    fn new() -> Self {
        Memo {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn get<Q>(&self, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(key)
            .filter(|e| e.loaded.elapsed() < TTL)
            .map(|e| e.value.clone())
    }

    fn clear(&self) {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}

/// The cached directory of one store.
pub(super) struct Directory {
    /// Bumped by every `forget`; a read stores its result only if the epoch did not move meanwhile.
    epoch: AtomicU64,
    tokens: Memo<String, TokenRecord>,
    persons: Memo<PersonId, PersonRecord>,
    channels: Memo<ChannelName, ChannelRecord>,
    parties: Memo<PersonId, PartyRecord>,
}

impl Directory {
    pub(super) fn new() -> Self {
        Directory {
            epoch: AtomicU64::new(0),
            tokens: Memo::new(),
            persons: Memo::new(),
            channels: Memo::new(),
            parties: Memo::new(),
        }
    }

    /// Call before the read whose result may be stored.
    pub(super) fn epoch(&self) -> Epoch {
        Epoch(self.epoch.load(Ordering::Acquire))
    }

    /// Drops every entry; reads in flight will not store theirs.
    pub(super) fn forget(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        self.tokens.clear();
        self.persons.clear();
        self.channels.clear();
        self.parties.clear();
    }

    pub(super) fn token(&self, secret_hash: &str) -> Option<TokenRecord> {
        self.tokens.get(secret_hash)
    }

    pub(super) fn person(&self, id: &PersonId) -> Option<PersonRecord> {
        self.persons.get(id)
    }

    pub(super) fn channel(&self, name: &ChannelName) -> Option<ChannelRecord> {
        self.channels.get(name)
    }

    pub(super) fn party(&self, id: &PersonId) -> Option<PartyRecord> {
        self.parties.get(id)
    }

    pub(super) fn put_token(&self, since: Epoch, secret_hash: &str, t: &TokenRecord) {
        self.put(&self.tokens, since, secret_hash.to_owned(), t);
    }

    pub(super) fn put_person(&self, since: Epoch, p: &PersonRecord) {
        self.put(&self.persons, since, p.id.clone(), p);
    }

    pub(super) fn put_channel(&self, since: Epoch, c: &ChannelRecord) {
        self.put(&self.channels, since, c.name.clone(), c);
    }

    pub(super) fn put_party(&self, since: Epoch, p: &PartyRecord) {
        self.put(&self.parties, since, p.person.id.clone(), p);
    }

    fn put<K: Eq + Hash, V: Clone>(&self, memo: &Memo<K, V>, since: Epoch, key: K, value: &V) {
        // Checked under the map's lock: `forget` bumps the epoch before it clears, so either this
        // sees the new epoch and stores nothing, or the clear that follows removes what it stored.
        let mut map = memo.map.lock().unwrap_or_else(|e| e.into_inner());
        if self.epoch.load(Ordering::Acquire) != since.0 {
            return;
        }
        if map.len() >= MAX_ENTRIES {
            map.clear();
        }
        map.insert(
            key,
            Entry {
                value: value.clone(),
                loaded: Instant::now(),
            },
        );
    }
}

/// One cached value shared by the whole store (the live webhooks: every posting transaction's
/// hooks need them, only admin calls and the outbox's endpoint disabling change them), with the
/// same rules as the directory: an epoch so that a read begun before a `forget` is never kept,
/// and the [`TTL`] as the backstop for changes nothing reported (another replica's admin call).
pub(super) struct Slot<V> {
    epoch: AtomicU64,
    /// A std mutex: held for one clone or store, never across an await.
    value: Mutex<Option<Entry<V>>>,
}

impl<V: Clone> Slot<V> {
    pub(super) fn new() -> Self {
        Slot {
            epoch: AtomicU64::new(0),
            value: Mutex::new(None),
        }
    }

    /// The value, if read within the [`TTL`] and not forgotten since.
    pub(super) fn get(&self) -> Option<V> {
        let value = self.value.lock().unwrap_or_else(|e| e.into_inner());
        value
            .as_ref()
            .filter(|e| e.loaded.elapsed() < TTL)
            .map(|e| e.value.clone())
    }

    /// Call before the read whose result may be stored.
    pub(super) fn epoch(&self) -> Epoch {
        Epoch(self.epoch.load(Ordering::Acquire))
    }

    /// Stores what a read begun at `since` found, unless a `forget` came in between.
    pub(super) fn put(&self, since: Epoch, value: V) {
        let mut slot = self.value.lock().unwrap_or_else(|e| e.into_inner());
        if self.epoch.load(Ordering::Acquire) == since.0 {
            *slot = Some(Entry {
                value,
                loaded: Instant::now(),
            });
        }
    }

    /// Drops the value; reads in flight will not store theirs.
    pub(super) fn forget(&self) {
        self.epoch.fetch_add(1, Ordering::AcqRel);
        *self.value.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{PersonKind, Timestamp};

    fn alice() -> PersonRecord {
        PersonRecord {
            id: PersonId::parse("alice").unwrap(),
            kind: PersonKind::Member,
            display_name: "Alice".into(),
            created_at: Timestamp(0),
        }
    }

    #[test]
    fn a_read_that_began_before_a_forget_is_not_kept() {
        let d = Directory::new();
        let before = d.epoch();
        d.forget();
        d.put_person(before, &alice());
        assert!(d.person(&alice().id).is_none());
        let now = d.epoch();
        d.put_person(now, &alice());
        assert_eq!(d.person(&alice().id).unwrap().display_name, "Alice");
        d.forget();
        assert!(d.person(&alice().id).is_none());
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let d = Directory::new();
        d.put_person(d.epoch(), &alice());
        assert!(d.person(&alice().id).is_some());
        std::thread::sleep(TTL + Duration::from_millis(20));
        assert!(d.person(&alice().id).is_none());
    }

    #[test]
    fn a_slot_keeps_only_reads_that_no_forget_overtook_and_expires() {
        let slot: Slot<u32> = Slot::new();
        let before = slot.epoch();
        slot.forget();
        slot.put(before, 1);
        assert_eq!(slot.get(), None);
        slot.put(slot.epoch(), 2);
        assert_eq!(slot.get(), Some(2));
        slot.forget();
        assert_eq!(slot.get(), None);
        slot.put(slot.epoch(), 3);
        std::thread::sleep(TTL + Duration::from_millis(20));
        assert_eq!(slot.get(), None);
    }
}
