//! Tokens: opaque secrets shown once, stored as SHA-256 hashes; checked on every request, each
//! authenticated request charged to its token's rate (see `limits`).

use std::net::IpAddr;

use base64::Engine as _;

use super::{Caller, ErrorCode, Presented, Result, Service, ServiceError, StreamPermit};
use crate::domain::{Scope, Scopes, text};

/// Every secret starts with this, so a leaked one is easy to recognise (e.g. by secret scanners).
pub(super) const SECRET_PREFIX: &str = "lsn_";

/// Every OAuth access token starts with this (never with a pasted token's [`SECRET_PREFIX`]);
/// `oauth_grants` makes and reads them.
pub(super) const ACCESS_PREFIX: &str = "lsa_";

/// A JWT caller's credential id is this followed by the JWT's subject.
pub(super) const JWT_PREFIX: &str = "jwt:";

/// A console session's credential id is this followed by the session's id.
pub(super) const CONSOLE_PREFIX: &str = "console:";

/// A new random secret and its public id.
pub(super) fn new_secret() -> (String, String) {
    let secret = crate::domain::secret::random::<32>();
    let id = crate::domain::secret::random::<6>();
    let secret = format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    );
    let id = format!("tok_{}", crate::domain::hex(&id));
    (id, secret)
}

/// The secret and public id that `purpose` and `context` always derive under `master` (see
/// [`crate::keys::ring::MasterKey::derive`]), shaped like [`new_secret`]'s, the id with `prefix`.
pub(super) fn derived_secret(
    master: &crate::keys::ring::MasterKey,
    purpose: &str,
    context: &[u8],
    prefix: &str,
) -> (String, String) {
    let secret = master.derive(purpose, context);
    let id = master.derive(&format!("{purpose} id"), context);
    let secret = format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret)
    );
    (format!("{prefix}{}", crate::domain::hex(&id[..6])), secret)
}

pub(super) fn hash_secret(secret: &str) -> String {
    crate::domain::sha256_hex(secret.as_bytes())
}

impl Service {
    /// Resolves a bearer secret to its caller. Unknown tokens, expired tokens and revoked tokens
    /// (including those of removed persons) each get their own code.
    pub async fn authenticate(&self, secret: &str) -> Result<Caller> {
        let unknown = || {
            ServiceError::new(
                ErrorCode::Unauthenticated,
                "missing or unknown bearer token",
            )
        };
        if secret.starts_with(ACCESS_PREFIX) {
            return self.authenticate_access(secret).await;
        }
        if !secret.starts_with(SECRET_PREFIX) || secret.len() > 200 {
            return Err(unknown());
        }
        let token = self
            .inner
            .store
            .token_by_hash(&hash_secret(secret))
            .await?
            .ok_or_else(unknown)?;
        if token.revoked_at.is_some() {
            return Err(ServiceError::new(
                ErrorCode::TokenRevoked,
                "this token was revoked; ask an admin for a new one",
            ));
        }
        if token.expires_at.is_some_and(|e| e <= self.now()) {
            return Err(ServiceError::new(
                ErrorCode::TokenExpired,
                "this token has expired; ask an admin for a new one",
            ));
        }
        let person = self
            .inner
            .store
            .person(&token.person)
            .await?
            .ok_or_else(|| {
                ServiceError::new(ErrorCode::TokenRevoked, "this token's person was removed")
            })?;
        let connection =
            Self::caller_connection(&token, person.kind == crate::domain::PersonKind::Member);
        let caller = Caller {
            person,
            scopes: token.scopes,
            token_id: token.id,
            agent: None,
            connection,
            via: crate::domain::DecisionPath::Api,
            expires_at: token.expires_at,
        };
        // The access log names who called (the person, never the credential).
        crate::metrics::identified(caller.person.id.as_str());
        self.inner.limits.admit(&caller)?;
        self.used(&caller.token_id);
        Ok(caller)
    }

    /// The caller behind a verified JWT expiring at `expires_at`: the party whose `jwt_subject` is
    /// `subject`, with the `agent` scope. A subject no party has is unauthenticated (the token proved an identity this
    /// gateway does not know).
    pub async fn party_caller(
        &self,
        subject: &str,
        expires_at: Option<crate::domain::Timestamp>,
    ) -> Result<Caller> {
        if text::first_storable_violation(subject).is_some() {
            return Err(ServiceError::new(
                ErrorCode::Unauthenticated,
                "the JWT's subject is not a party of this gateway",
            ));
        }
        let party = self
            .inner
            .store
            .party_by_subject(subject)
            .await?
            .ok_or_else(|| {
                ServiceError::new(
                    ErrorCode::Unauthenticated,
                    "the JWT's subject is not a party of this gateway",
                )
            })?;
        let caller = Caller {
            person: party.person,
            scopes: Scopes::default().with(Scope::Agent),
            token_id: format!("{JWT_PREFIX}{subject}"),
            agent: None,
            connection: None,
            via: crate::domain::DecisionPath::Api,
            expires_at,
        };
        // The access log names who called (the person, never the credential).
        crate::metrics::identified(caller.person.id.as_str());
        self.inner.limits.admit(&caller)?;
        Ok(caller)
    }

    /// Refuses a request from `ip` presenting `presented` when that credential (or, as a
    /// backstop, that address) failed to authenticate too often lately (`rate_limited` with the
    /// wait); fronts ask before authenticating, so such a request costs no token hashing. A valid
    /// credential from the same address is not refused for another's failures. `presented` is
    /// called only while some credential is refused.
    pub fn check_client(&self, ip: IpAddr, presented: impl FnOnce() -> Presented) -> Result<()> {
        match self.inner.limits.refused(ip, presented) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Records that a request from `ip` presenting `presented` failed to authenticate (no,
    /// unknown, expired or revoked credential).
    pub fn authentication_failed(&self, ip: IpAddr, presented: &Presented) {
        self.inner.limits.auth_failed(ip, presented);
    }

    /// Counts an A2A stream opened by `caller`'s party until the permit is dropped; refuses
    /// (`too_many_streams`) beyond `limits.streams_per_party`.
    pub fn open_stream(&self, caller: &Caller) -> Result<StreamPermit> {
        self.inner.limits.open_stream(caller.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_random_prefixed_and_hash_stably() {
        let (id1, s1) = new_secret();
        let (id2, s2) = new_secret();
        assert_ne!(s1, s2);
        assert_ne!(id1, id2);
        assert!(s1.starts_with(SECRET_PREFIX) && s1.len() > 40);
        assert_eq!(hash_secret(&s1), hash_secret(&s1));
        assert_eq!(hash_secret(&s1).len(), 64);
    }
}
