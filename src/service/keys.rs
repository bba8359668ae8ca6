//! The signing keys as admin operations (SPEC §10): list them, rotate to a new one (the previous
//! keys keep co-signing for an overlap), retire one. Scope `admin`; the ring itself and its
//! storage are `crate::keys`.

use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::Scope;
use crate::keys::ring::{ROTATION_OVERLAP, RetireError};
use crate::keys::{KeyInfo, KeyManager, KeysError};

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
