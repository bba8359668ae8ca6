//! Reviewing a remote agent's card before it is stored (the console's two steps, SPEC §11): the
//! card fetched and verified and shown as the remote would be, storing nothing; then stored only if
//! the card fetched again is the card reviewed, with the credentials given at the review (kept
//! meanwhile only sealed with the master key, for that remote's name).

use serde::Serialize;

use super::remotes::{aad, taken_name};
use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::{PersonId, Right, Rights};
use crate::remote::Credentials;
use crate::service::{RemoteSpec, RemoteView};

/// What a card review saw: the digest of what it showed, and the credentials given with it,
/// sealed with the master key for that remote's name (never shown in clear again).
#[derive(Debug, Clone, Serialize)]
pub struct ReviewedCard {
    pub digest: String,
    pub sealed_credentials: Option<String>,
}

impl Service {
    /// The credentials a review sealed for remote `name` (a sealed value from elsewhere, or for
    /// another name, does not open: refused).
    fn open_sealed_credentials(&self, name: &PersonId, sealed: &str) -> Result<Credentials> {
        use base64::Engine as _;
        let again = || {
            ServiceError::invalid(
                "the credentials of this review do not open (another name, or another server): review the card again",
            )
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .map_err(|_| again())?;
        let plain = self
            .master_key()?
            .open(&bytes, aad(name).as_bytes())
            .ok_or_else(again)?;
        serde_json::from_slice(&plain).map_err(|_| again())
    }

    /// What registering `spec` would store, changing nothing: the card fetched and verified,
    /// shown as the remote's page shows a remote, and what the review saw (hand it to
    /// [`Service::add_remote_reviewed`]).
    pub async fn review_remote(
        &self,
        caller: &Caller,
        spec: &RemoteSpec,
    ) -> Result<(RemoteView, ReviewedCard)> {
        let (record, _) = self.prepare_remote(caller, spec).await?;
        let sealed_credentials = record.sealed_credentials.clone();
        let mut shown = self.remote_view(record).await?;
        shown.channels = spec.channels.clone();
        let reviewed = ReviewedCard {
            digest: review_digest(&shown),
            sealed_credentials,
        };
        Ok((shown, reviewed))
    }

    /// Registers a remote agent from its card; with `reviewed` (what [`Service::review_remote`]
    /// answered), only if the card fetched now is the card reviewed, with the credentials given
    /// at the review when `spec` gives none.
    pub async fn add_remote_reviewed(
        &self,
        caller: &Caller,
        mut spec: RemoteSpec,
        reviewed: Option<&ReviewedCard>,
    ) -> Result<RemoteView> {
        if let Some(sealed) = reviewed.and_then(|r| r.sealed_credentials.as_deref())
            && spec.credentials == Credentials::default()
        {
            spec.credentials = self.open_sealed_credentials(&spec.name, sealed)?;
        }
        let (record, interface) = self.prepare_remote(caller, &spec).await?;
        let rights = Rights::default().with(Right::Read).with(Right::Post);
        let mut shown = self.remote_view(record.clone()).await?;
        shown.channels = spec.channels.clone();
        if reviewed.is_some_and(|r| r.digest != review_digest(&shown)) {
            return Err(ServiceError::new(
                ErrorCode::CardRejected,
                "the card (or the binding chosen) changed since it was reviewed: review it again; nothing was stored",
            ));
        }
        let audit = self.change(
            caller,
            "remote.added",
            &spec.name,
            None,
            super::audit::shown(&shown),
        );
        let taken = || taken_name(&spec.name);
        self.inner
            .store
            .insert_remote(record.clone(), spec.channels.clone(), rights, audit)
            .await
            .map_err(|e| match e {
                crate::store::StoreError::Conflict(_) => taken(),
                other => other.into(),
            })?;
        self.directory_changed();
        tracing::info!(
            remote = %spec.name,
            binding = %interface,
            signed = !record.unsigned,
            "Remote agent added."
        );
        self.remote_view_of(&spec.name).await
    }
}

/// What a review saw of the card, as a digest (SHA-256, base64url): the keys that signed it (or
/// none), the interface chosen, the interfaces and skills; not the admin's own choices, nor the
/// signatures' bytes (a card may be signed afresh on every fetch).
fn review_digest(view: &RemoteView) -> String {
    use base64::Engine as _;
    let shown = serde_json::json!({
        "keys": view.keys, "signed": view.signed, "binding": view.binding, "url": view.url,
        "tenant": view.tenant, "streaming": view.streaming, "push": view.push,
        "interfaces": view.interfaces, "skills": view.skills,
    });
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(ring::digest::digest(
        &ring::digest::SHA256,
        shown.to_string().as_bytes(),
    ))
}
