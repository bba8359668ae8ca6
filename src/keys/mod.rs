//! Signing keys (SPEC §10): the ring ([`ring`]: ES256 keys sealed under the master key, JWKS),
//! every JWT through `jsonwebtoken` on ring ([`jwt`]), the push-notification bearer JWT
//! ([`push_jwt`]), and their life cycle
//! ([`KeyManager`]): `rotate` adds a key that signs from now on while the previous one stays in
//! the JWKS and co-signs the card for an overlap window; `retire` drops a key early. The ring is
//! one row of the store shared by every replica; a change is announced on the bus's keys topic so
//! every replica reloads it and re-signs its card at once.
//!
//! Used by the A2A card, the outbox worker and the service (whose key operations the admin API
//! calls); depends on the store and the bus. [`Published`] holds the card and key set exactly as
//! the A2A front serves them, for admins to look at.

pub mod jose;
pub mod jwt;
pub mod push_jwt;
pub mod ring;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use anyhow::Context as _;
use tokio_util::sync::CancellationToken;

use crate::bus::{Topic, WakeBus};
use crate::domain::Timestamp;
use crate::store::Store;
use ring::{KeyRing, MasterKey, SealedKey};

/// The key ring in use, swapped whole when the stored ring changes. Cheap to clone.
#[derive(Clone, Debug)]
pub struct LiveRing(Arc<RwLock<Arc<KeyRing>>>);

impl LiveRing {
    pub fn new(ring: KeyRing) -> LiveRing {
        LiveRing(Arc::new(RwLock::new(Arc::new(ring))))
    }

    /// The ring as it is now.
    pub fn current(&self) -> Arc<KeyRing> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, ring: KeyRing) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(ring);
    }
}

impl From<Arc<KeyRing>> for LiveRing {
    fn from(ring: Arc<KeyRing>) -> LiveRing {
        LiveRing(Arc::new(RwLock::new(ring)))
    }
}

/// What this process publishes signed with the ring, byte for byte as it serves it: the public
/// Agent Card and the key set its signatures point at, with their public addresses. The A2A front
/// writes it each time it signs the card (at start, after every rotation), so admins see what
/// clients see (the console's keys page) without a front reading another front. Cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Published(Arc<RwLock<Option<Arc<PublishedDocs>>>>);

/// The documents of [`Published`].
#[derive(Debug)]
pub struct PublishedDocs {
    /// Where the card is served (`{public_url}/.well-known/agent-card.json`).
    pub card_url: String,
    /// The card's body as served.
    pub card: Vec<u8>,
    /// Where the key set is served (the signatures' `jku`).
    pub jwks_url: String,
    /// The key set's body as served.
    pub jwks: Vec<u8>,
}

impl Published {
    /// Publishes `docs` from now on.
    pub fn set(&self, docs: PublishedDocs) {
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::new(docs));
    }

    /// What is published now; none before the front has signed a card.
    pub fn current(&self) -> Option<Arc<PublishedDocs>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// One key as listed by `keys list`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeyInfo {
    pub kid: String,
    pub alg: String,
    pub created_at: String,
    /// When it stops co-signing and leaves the JWKS; none for the signing key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retire_after: Option<String>,
    /// The key that signs new signatures and push JWTs.
    pub signing: bool,
}

/// A key no longer in the key set, listed for a while after (`keys list`'s retired part).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RetiredKeyInfo {
    pub kid: String,
    pub alg: String,
    pub created_at: String,
    /// When it left the key set and stopped co-signing.
    pub retired_at: String,
    /// True when an admin retired it before its overlap ended; false when the overlap ended.
    pub early: bool,
    /// When it stops being listed (and its record is dropped).
    pub listed_until: String,
}

/// The ring as the audit log shows it: each key's id and when it retires (never key material).
fn ring_shown(records: &[SealedKey]) -> serde_json::Value {
    serde_json::json!({
        "keys": records
            .iter()
            .map(|r| serde_json::json!({ "kid": r.kid, "retire_after": r.retire_after }))
            .collect::<Vec<_>>()
    })
}

/// Why a key operation failed.
#[derive(Debug, thiserror::Error)]
pub enum KeysError {
    #[error(transparent)]
    Retire(#[from] ring::RetireError),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// How often the ring is re-read without a bus signal (an overlap ending, a missed signal).
const RELOAD_EVERY: Duration = Duration::from_secs(300);
/// Longest overlap `keys rotate` accepts.
pub const MAX_OVERLAP: chrono::TimeDelta = chrono::TimeDelta::days(90);

type OnChange = Box<dyn Fn(&Arc<KeyRing>) + Send + Sync>;

/// Rotation, retirement and reloading of the shared ring.
pub struct KeyManager {
    store: Arc<Store>,
    master: Arc<MasterKey>,
    live: LiveRing,
    bus: Arc<dyn WakeBus>,
    /// Called with the new ring after every reload (re-signs the card).
    on_change: RwLock<Vec<OnChange>>,
    /// The card and key set as served, written by the A2A front, read by admins.
    published: Published,
}

impl KeyManager {
    /// Opens the stored ring (creating it with `initial` on a fresh database).
    pub async fn open(
        store: Arc<Store>,
        master: Arc<MasterKey>,
        bus: Arc<dyn WakeBus>,
        initial: Vec<SealedKey>,
    ) -> anyhow::Result<KeyManager> {
        let now = chrono::Utc::now();
        let stored = store
            .signing_keys_or_init(
                serde_json::to_string(&initial)?,
                Timestamp(now.timestamp_millis()),
            )
            .await
            .context("Could not read the signing keys from the database")?;
        let ring = open_ring(&stored, &master, now)?;
        Ok(KeyManager {
            store,
            master,
            live: LiveRing::new(ring),
            bus,
            on_change: RwLock::new(Vec::new()),
            published: Published::default(),
        })
    }

    pub fn live(&self) -> LiveRing {
        self.live.clone()
    }

    /// Where the A2A front publishes the card it serves, and admins read it.
    pub fn published(&self) -> Published {
        self.published.clone()
    }

    /// Registers what to do with each new ring.
    pub fn on_change(&self, f: impl Fn(&Arc<KeyRing>) + Send + Sync + 'static) {
        self.on_change
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push(Box::new(f));
    }

    /// Re-reads the stored ring and swaps it in (dropping keys past their overlap).
    pub async fn reload(&self) -> anyhow::Result<()> {
        let stored = self
            .store
            .signing_keys()
            .await?
            .context("The signing key ring is missing from the database")?;
        let ring = open_ring(&stored, &self.master, chrono::Utc::now())?;
        let changed = kids(&ring) != kids(&self.live.current());
        self.live.set(ring);
        if changed {
            let current = self.live.current();
            tracing::info!(signer = %current.signer().kid(), keys = current.keys().len(), "Signing keys changed.");
            for f in self
                .on_change
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
            {
                f(&current);
            }
        }
        Ok(())
    }

    /// The stored keys, newest first.
    pub async fn list(&self) -> anyhow::Result<Vec<KeyInfo>> {
        let records = self.records().await?;
        let now = chrono::Utc::now();
        // Newest first; of two created in the same second, the later record is the newer.
        let mut live: Vec<(usize, SealedKey)> =
            ring::live(&records, now).into_iter().enumerate().collect();
        live.sort_by(|(ia, a), (ib, b)| (&b.created_at, ib).cmp(&(&a.created_at, ia)));
        let signer = self.live.current().signer().kid().to_owned();
        Ok(live
            .into_iter()
            .map(|(_, r)| KeyInfo {
                signing: r.kid == signer,
                kid: r.kid,
                alg: r.alg,
                created_at: r.created_at,
                retire_after: r.retire_after,
            })
            .collect())
    }

    /// The keys retired lately, newest first, each until [`ring::RETIRED_LISTED`] after it
    /// retired.
    pub async fn retired(&self) -> anyhow::Result<Vec<RetiredKeyInfo>> {
        let records = self.records().await?;
        Ok(ring::retired(&records, chrono::Utc::now())
            .into_iter()
            .map(|r| RetiredKeyInfo {
                listed_until: ring::listed_until(&r).unwrap_or_default(),
                retired_at: r.retire_after.clone().unwrap_or_default(),
                early: r.retired_at.is_some(),
                kid: r.kid,
                alg: r.alg,
                created_at: r.created_at,
            })
            .collect())
    }

    /// A new signing key; the keys signing until now co-sign for `overlap`.
    pub async fn rotate(
        &self,
        overlap: chrono::TimeDelta,
        audit: crate::store::AdminChange,
    ) -> Result<KeyInfo, KeysError> {
        if overlap < chrono::TimeDelta::zero() || overlap > MAX_OVERLAP {
            return Err(KeysError::Invalid(format!(
                "the overlap must be between 0 and {} days",
                MAX_OVERLAP.num_days()
            )));
        }
        let mut created = None;
        self.change(audit, |records, now| {
            let mut kept = ring::kept(records, now);
            let record = ring::rotate(&mut kept, &self.master, now, overlap)
                .map_err(|e| KeysError::Other(e.into()))?;
            // With no overlap the keys replaced retire at once: no private part kept for them.
            *records = ring::kept(&kept, now);
            created = Some(record);
            Ok(())
        })
        .await?;
        let record = created.expect("set by a successful change");
        Ok(KeyInfo {
            kid: record.kid,
            alg: record.alg,
            created_at: record.created_at,
            retire_after: None,
            signing: true,
        })
    }

    /// Drops a key before its overlap ends (never the signing key).
    pub async fn retire(
        &self,
        kid: &str,
        audit: crate::store::AdminChange,
    ) -> Result<(), KeysError> {
        self.change(audit, |records, now| {
            let mut kept = ring::kept(records, now);
            ring::retire(&mut kept, kid, now)?;
            *records = kept;
            Ok(())
        })
        .await
    }

    async fn records(&self) -> anyhow::Result<Vec<SealedKey>> {
        let stored = self
            .store
            .signing_keys()
            .await?
            .context("The signing key ring is missing from the database")?;
        Ok(serde_json::from_str(&stored)?)
    }

    /// Applies `f` to the stored records (compare-and-swap, retried when another replica changed
    /// them meanwhile), then reloads here and tells the other replicas.
    async fn change(
        &self,
        mut audit: crate::store::AdminChange,
        mut f: impl FnMut(&mut Vec<SealedKey>, chrono::DateTime<chrono::Utc>) -> Result<(), KeysError>,
    ) -> Result<(), KeysError> {
        for _ in 0..5 {
            let before = self
                .store
                .signing_keys()
                .await
                .map_err(|e| KeysError::Other(e.into()))?
                .ok_or_else(|| KeysError::Invalid("no signing key ring".into()))?;
            let mut records: Vec<SealedKey> =
                serde_json::from_str(&before).map_err(|e| KeysError::Other(e.into()))?;
            let now = chrono::Utc::now();
            audit.before = Some(ring_shown(&ring::live(&records, now)));
            f(&mut records, now)?;
            // The key set in use before and after (a retired key, still listed, is in neither).
            audit.after = Some(ring_shown(&ring::live(&records, now)));
            let after = serde_json::to_string(&records).map_err(|e| KeysError::Other(e.into()))?;
            let swapped = self
                .store
                .replace_signing_keys(
                    before,
                    after,
                    Timestamp(now.timestamp_millis()),
                    audit.clone(),
                )
                .await
                .map_err(|e| KeysError::Other(e.into()))?;
            if swapped {
                self.reload().await?;
                self.bus.publish(&Topic::keys());
                return Ok(());
            }
        }
        Err(KeysError::Other(anyhow::anyhow!(
            "the key ring kept changing under this operation; try again"
        )))
    }

    /// Reloads on every keys signal of the bus (any replica's change) and every few minutes,
    /// until `shutdown`.
    pub async fn follow(self: Arc<Self>, shutdown: CancellationToken) {
        let mut wake = self.bus.subscribe(&Topic::keys());
        loop {
            tokio::select! {
                () = wake.woken() => {}
                () = tokio::time::sleep(RELOAD_EVERY) => {}
                () = shutdown.cancelled() => return,
            }
            if let Err(e) = self.reload().await {
                tracing::warn!(error = %e, "Could not reload the signing keys; will retry.");
            }
        }
    }
}

fn kids(ring: &KeyRing) -> Vec<String> {
    ring.keys().iter().map(|k| k.kid().to_owned()).collect()
}

fn open_ring(
    stored: &str,
    master: &MasterKey,
    now: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<KeyRing> {
    let records: Vec<SealedKey> =
        serde_json::from_str(stored).context("The stored signing keys are not valid JSON")?;
    KeyRing::open(&ring::live(&records, now), master).context(
        "Could not open the signing keys: every replica needs the same master key \
         (LIAISON_MASTER_KEY)",
    )
}
