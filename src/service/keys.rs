//! The signing keys as admin operations (SPEC §10): list them, rotate to a new one (the previous
//! keys keep co-signing for an overlap), retire one, and look at the card's signatures and the key
//! set as clients get them. Scope `admin`; the ring itself and its storage are `crate::keys`.

use serde::Serialize;

use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::Scope;
use crate::keys::ring::{ROTATION_OVERLAP, RetireError};
use crate::keys::{KeyInfo, KeyManager, KeysError, RetiredKeyInfo};

/// The public Agent Card's signatures and the key set, as this process serves them to clients.
#[derive(Debug, Clone, Serialize)]
pub struct PublishedCard {
    pub card_url: String,
    /// Each signature's protected header, decoded, in the card's order.
    pub signatures: Vec<CardSignature>,
    pub jwks_url: String,
    /// The key set's JSON, byte for byte as served.
    pub jwks: String,
}

/// One signature of the card, as a client reads it before verifying.
#[derive(Debug, Clone, Serialize)]
pub struct CardSignature {
    pub kid: Option<String>,
    pub alg: Option<String>,
    /// The whole protected header (`alg`, `jku`, `kid`, `typ`).
    pub header: serde_json::Value,
}

impl Service {
    fn key_manager(&self, caller: &Caller) -> Result<&KeyManager> {
        caller.require(Scope::Admin)?;
        self.inner.keys.as_deref().ok_or_else(|| {
            ServiceError::new(
                ErrorCode::Unavailable,
                "this process has no signing key ring",
            )
        })
    }

    /// Every live signing key, the signing one marked.
    pub async fn keys(&self, caller: &Caller) -> Result<Vec<KeyInfo>> {
        let manager = self.key_manager(caller)?;
        manager.list().await.map_err(|e| key_error(e.into()))
    }

    /// The keys retired lately (no longer in the key set), newest first, each listed until
    /// its `listed_until`.
    pub async fn retired_keys(&self, caller: &Caller) -> Result<Vec<RetiredKeyInfo>> {
        let manager = self.key_manager(caller)?;
        manager.retired().await.map_err(|e| key_error(e.into()))
    }

    /// Rotates to a new signing key; the previous keys keep co-signing for `overlap_s` seconds
    /// (default 7 days; the manager refuses more than it allows). Answers the new key.
    pub async fn rotate_keys(&self, caller: &Caller, overlap_s: Option<i64>) -> Result<KeyInfo> {
        let manager = self.key_manager(caller)?;
        let overlap = overlap_s.map_or(ROTATION_OVERLAP, chrono::TimeDelta::seconds);
        let audit = self.change(caller, "key.rotated", "signing keys", None, None);
        let key = manager.rotate(overlap, audit).await.map_err(key_error)?;
        tracing::info!(kid = %key.kid, by = %caller.id(), "Signing keys rotated.");
        Ok(key)
    }

    /// Retires the key `kid` now (never the signing key while it is the only one).
    pub async fn retire_key(&self, caller: &Caller, kid: &str) -> Result<()> {
        let manager = self.key_manager(caller)?;
        let audit = self.change(caller, "key.retired", kid, None, None);
        manager.retire(kid, audit).await.map_err(key_error)?;
        tracing::info!(kid, by = %caller.id(), "A signing key was retired.");
        Ok(())
    }

    /// The card's signatures and the key set exactly as this process serves them now
    /// (`/.well-known/agent-card.json`, `/.well-known/jwks.json`); none before the A2A front
    /// has signed a card (a process without one).
    pub fn published_card(&self, caller: &Caller) -> Result<Option<PublishedCard>> {
        let manager = self.key_manager(caller)?;
        let Some(docs) = manager.published().current() else {
            return Ok(None);
        };
        let headers = crate::keys::jose::signature_headers(&docs.card).map_err(|e| {
            tracing::error!(error = %e, "The card served has signatures that do not decode.");
            ServiceError::new(ErrorCode::Internal, "internal error")
        })?;
        let text =
            |h: &serde_json::Value, k: &str| h.get(k).and_then(|v| v.as_str()).map(str::to_owned);
        Ok(Some(PublishedCard {
            card_url: docs.card_url.clone(),
            signatures: headers
                .into_iter()
                .map(|header| CardSignature {
                    kid: text(&header, "kid"),
                    alg: text(&header, "alg"),
                    header,
                })
                .collect(),
            jwks_url: docs.jwks_url.clone(),
            jwks: String::from_utf8_lossy(&docs.jwks).into_owned(),
        }))
    }
}

fn key_error(e: KeysError) -> ServiceError {
    match e {
        KeysError::Retire(RetireError::Unknown) => {
            ServiceError::new(ErrorCode::NotFound, "no signing key has this kid")
        }
        KeysError::Retire(r) => ServiceError::invalid(r.to_string()),
        KeysError::Invalid(m) => ServiceError::invalid(m),
        KeysError::Other(e) => {
            tracing::error!(error = %e, "A key operation failed.");
            ServiceError::new(ErrorCode::Internal, "internal error")
        }
    }
}
