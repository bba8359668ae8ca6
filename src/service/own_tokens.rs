//! A member's own agent tokens (SPEC §11, "connect an agent"): she issues `agent` tokens for
//! herself from the console, lists them with their last use and live connections, and revokes
//! them. `human` and `admin` tokens stay admin-issued; an agent credential can do none of this
//! (every operation needs a `human` caller, which only a console session or a human token is).
//!
//! Revoking ends what the token holds at once, on every replica: its waiting long-polls return
//! `token_revoked`, its MCP sessions and A2A streams close (see `credentials`).
//!
//! Every own token has an expiry (at most [`OWN_TOKEN_MAX_DAYS`] days) and a person holds at most
//! [`MAX_OWN_AGENT_TOKENS`] live agent tokens: bounded by design.

use serde::{Deserialize, Serialize};

use super::admin::{IssuedToken, TokenSpec};
use super::connections::own;
use super::{Caller, ErrorCode, Result, Service, ServiceError, input};
use crate::bus::Topic;
use crate::domain::{Scope, Scopes, Timestamp};
use crate::store::TokenRecord;

/// Most live (not revoked, not expired) agent tokens one person may hold.
pub const MAX_OWN_AGENT_TOKENS: usize = 20;
/// Longest lifetime of a token a member issues herself, in days.
pub const OWN_TOKEN_MAX_DAYS: u64 = 365;
/// Longest name of an own token, in characters.
const MAX_NAME_CHARS: usize = 80;
/// `last_used_at` is written at most this often per token.
const TOUCH_EVERY_MS: i64 = 60_000;

/// What a member asks for when she connects an agent.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct OwnTokenSpec {
    /// What the token is for, e.g. "claude on greenmac".
    pub name: String,
    /// Days until it expires, 1 to [`OWN_TOKEN_MAX_DAYS`].
    pub expires_in_days: u64,
    /// The connection's name (SPEC §2), e.g. `claude-laptop`; none derives it from `name`.
    #[serde(default)]
    pub connection: Option<crate::domain::ConnectionSlug>,
    /// The connection's rights (SPEC §4b); none is the defaults.
    #[serde(default)]
    pub rights: Option<crate::domain::ConnectionRights>,
}

/// One of her tokens as the "connect an agent" page lists it.
#[derive(Debug, Clone, Serialize)]
pub struct OwnToken {
    #[serde(flatten)]
    pub token: TokenRecord,
    /// Long-polls of this token waiting now, on this replica.
    pub waiting: usize,
    /// True when it can be used now (not revoked, not expired).
    pub live: bool,
}

impl Service {
    /// The caller's agent tokens, newest first.
    pub async fn own_tokens(&self, caller: &Caller) -> Result<Vec<OwnToken>> {
        own(caller)?;
        let now = self.now();
        let mut tokens = self.inner.store.tokens(Some(caller.id())).await?;
        tokens.retain(|t| t.scopes == agent_only());
        tokens.reverse();
        Ok(tokens
            .into_iter()
            .map(|token| OwnToken {
                waiting: self.waiting_on(&token.id),
                live: usable(&token, now),
                token,
            })
            .collect())
    }

    /// Issues an `agent` token for the caller herself; its secret is shown this once.
    pub async fn issue_own_token(
        &self,
        caller: &Caller,
        spec: OwnTokenSpec,
    ) -> Result<IssuedToken> {
        own(caller)?;
        input::storable("token", &spec)?;
        let name = spec.name.trim();
        if name.is_empty()
            || name.chars().count() > MAX_NAME_CHARS
            || name
                .chars()
                .any(|c| c.is_control() || crate::domain::text::is_line_break(c))
        {
            return Err(ServiceError::invalid(format!(
                "name must be one line of 1-{MAX_NAME_CHARS} characters, e.g. \"claude on my laptop\""
            )));
        }
        if !(1..=OWN_TOKEN_MAX_DAYS).contains(&spec.expires_in_days) {
            return Err(ServiceError::invalid(format!(
                "expires_in_days must be 1-{OWN_TOKEN_MAX_DAYS}: every token you issue yourself expires"
            )));
        }
        let now = self.now();
        let live = self
            .inner
            .store
            .tokens(Some(caller.id()))
            .await?
            .iter()
            .filter(|t| t.scopes == agent_only() && usable(t, now))
            .count();
        if live >= MAX_OWN_AGENT_TOKENS {
            return Err(ServiceError::new(
                ErrorCode::TooManyTokens,
                format!(
                    "you already hold {live} live agent tokens (at most {MAX_OWN_AGENT_TOKENS}); \
                     revoke one you no longer use"
                ),
            ));
        }
        let issued = self
            .issue_token_as(
                TokenSpec {
                    person: caller.id().clone(),
                    scopes: agent_only(),
                    expires_in_s: Some(spec.expires_in_days * 86_400),
                    description: name.to_owned(),
                },
                super::NewConnection {
                    name: spec.connection,
                    rights: spec.rights,
                },
                Some(caller),
            )
            .await?;
        Ok(issued)
    }

    /// Revokes one of the caller's agent tokens; unknown, foreign, already revoked and
    /// non-agent tokens all answer "not found". Ends its long-polls and MCP sessions at once.
    pub async fn revoke_own_token(&self, caller: &Caller, id: &str) -> Result<()> {
        own(caller)?;
        let not_found = || ServiceError::not_found("token (or it is already revoked)", id);
        let token = self
            .inner
            .store
            .token_by_id(id)
            .await?
            .filter(|t| &t.person == caller.id() && t.scopes == agent_only())
            .ok_or_else(not_found)?;
        if !self
            .inner
            .store
            .revoke_token(
                token.id.clone(),
                self.now(),
                self.change(
                    caller,
                    "token.revoked",
                    &token.id,
                    super::audit::shown(&token),
                    None,
                ),
            )
            .await?
        {
            return Err(not_found());
        }
        self.token_revoked(&token);
        tracing::info!(token = %token.id, person = %token.person, "Token revoked by its person.");
        Ok(())
    }

    /// After a revocation: the directory changed (caches, and every credential hold: streams,
    /// long-polls and MCP sessions of the token end), and the person's waiting long-polls wake.
    pub(super) fn token_revoked(&self, token: &TokenRecord) {
        self.directory_changed();
        self.inner.bus.publish(&Topic::inbox(&token.person));
    }

    /// Wakes when people, tokens or channels change, on any replica.
    pub fn directory_changes(&self) -> crate::bus::Subscription {
        self.inner.bus.subscribe(&Topic::directory())
    }

    /// Refuses with `token_revoked` or `token_expired` when the caller's credential can no
    /// longer be used (a long-poll checks it when woken with nothing to return).
    pub(super) async fn still_valid(&self, caller: &Caller) -> Result<()> {
        self.check_credential(caller).await
    }

    /// Records a token's use, at most once a minute per token and replica, off the request's
    /// path.
    pub(super) fn used(&self, token_id: &str) {
        let now = self.now();
        {
            let mut uses = self
                .inner
                .token_uses
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match uses.get(token_id) {
                Some(at) if now.0 - at.0 < TOUCH_EVERY_MS => return,
                _ => {
                    uses.insert(token_id.to_owned(), now);
                }
            }
        }
        let store = self.inner.store.clone();
        let id = token_id.to_owned();
        tokio::spawn(async move {
            if let Err(e) = store.touch_token(id, now).await {
                tracing::debug!(error = %e, "Could not record a token's last use.");
            }
        });
    }
}

fn agent_only() -> Scopes {
    Scopes::default().with(Scope::Agent)
}

pub(super) fn usable(t: &TokenRecord, now: Timestamp) -> bool {
    t.revoked_at.is_none() && t.expires_at.is_none_or(|e| e > now)
}
