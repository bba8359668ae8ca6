//! The service's errors: one code per kind of failure, a message that says what was wrong and what
//! to do, and optional structured details (e.g. a claim's holder).
//!
//! Transport-neutral: each front maps `ErrorCode` to its own shape through one table of its own
//! (`crate::http::http_status` for the HTTP fronts, the MCP tool error's structured content, the
//! A2A front's exhaustive mapping into its per-binding table). Internal failures carry an opaque
//! message; the cause is logged once.

use serde::Serialize;

use crate::domain::named_enum;
use crate::store::StoreError;

named_enum! {
    /// Stable, documented error codes.
    pub enum ErrorCode ("error code") {
        /// No token, or a token liaison does not know.
        Unauthenticated = "unauthenticated",
        /// The token's expiry has passed.
        TokenExpired = "token_expired",
        /// The token was revoked (or its person removed).
        TokenRevoked = "token_revoked",
        /// Authenticated, but the token's scope or the person's rights do not allow this.
        Forbidden = "forbidden",
        /// Unknown id, or an id the caller may not see: the two are indistinguishable.
        NotFound = "not_found",
        /// A field is missing, malformed, out of range or not allowed for this kind.
        InvalidInput = "invalid_input",
        /// A reply or close needs a thread.
        ThreadRequired = "thread_required",
        /// The thread is closed; start a new one that refers_to it.
        ThreadClosed = "thread_closed",
        /// `after` is beyond the last entry of the inbox.
        CursorAhead = "cursor_ahead",
        /// Another agent session holds the claim.
        AlreadyClaimed = "already_claimed",
        /// The fencing token carried is stale: the claim's lease expired and another session
        /// claimed the thread since (or holds the claim); `details.holder` is the live claim.
        StaleClaim = "stale_claim",
        /// Only open request and handoff threads addressed to the caller can be claimed.
        NotClaimable = "not_claimable",
        /// An approval is pending for this request; it cannot be claimed yet.
        ApprovalPending = "approval_pending",
        /// The approval was already decided (or consumed); the first decision stands.
        ApprovalDecided = "approval_decided",
        /// The approval expired before anyone decided; its thread is closed.
        ApprovalExpired = "approval_expired",
        /// The channel's policy refuses requests with this impact.
        DeniedByPolicy = "denied_by_policy",
        /// Someone else holds the resource in an incompatible mode.
        LeaseHeld = "lease_held",
        /// The task has ended (completed, failed, canceled or rejected) and accepts nothing more.
        TaskTerminal = "task_terminal",
        /// The task has ended, so it cannot be canceled.
        TaskNotCancelable = "task_not_cancelable",
        /// The idempotency key was used for a different message.
        IdempotencyConflict = "idempotency_conflict",
        /// A person, channel or token with this id already exists.
        AlreadyExists = "already_exists",
        /// Too many long-polls are waiting for this person at once.
        TooManyWaiters = "too_many_waiters",
        /// The token (or the client address, after failed authentications) exceeded its request
        /// rate; `details.retry_after_s` says when to retry.
        RateLimited = "rate_limited",
        /// The party already holds as many A2A streams open as it may.
        TooManyStreams = "too_many_streams",
        /// The token already holds as many MCP sessions as it may, none of them idle.
        TooManySessions = "too_many_sessions",
        /// The person already holds as many live agent tokens as she may issue herself.
        TooManyTokens = "too_many_tokens",
        /// A remote agent's card or key set could not be fetched (unreachable, timed out, or
        /// answered an error status).
        RemoteUnreachable = "remote_unreachable",
        /// A remote agent's card was fetched but refused: not a valid card, an invalid
        /// signature, unsigned without `allow_unsigned`, or no interface liaison can call.
        CardRejected = "card_rejected",
        /// A remote agent's signing keys changed since they were pinned; accept them explicitly.
        KeysChanged = "keys_changed",
        /// The personal session has ended (SPEC §4b): nothing more is sent or accepted in it.
        SessionEnded = "session_ended",
        /// The server is stopping or its database is unavailable; retry later.
        Unavailable = "unavailable",
        /// A bug or an unexpected failure; details are in the server log.
        Internal = "internal",
    }
}

#[derive(Debug, Clone, Serialize, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ServiceError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<serde_json::Value>,
}

impl ServiceError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: None,
        }
    }

    pub fn with_details(mut self, details: serde_json::Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidInput, message)
    }

    /// The one message for unknown and foreign ids alike.
    pub fn not_found(what: &str, id: impl std::fmt::Display) -> Self {
        Self::new(
            ErrorCode::NotFound,
            format!("no {what} {id} (unknown, or not visible to you)"),
        )
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, message)
    }

    /// Seconds to wait before retrying, for errors that say so (`rate_limited`).
    pub fn retry_after_s(&self) -> Option<u64> {
        self.details.as_ref()?.get("retry_after_s")?.as_u64()
    }
}

impl From<crate::domain::ParseError> for ServiceError {
    fn from(e: crate::domain::ParseError) -> Self {
        ServiceError::invalid(e.0)
    }
}

impl From<StoreError> for ServiceError {
    fn from(e: StoreError) -> Self {
        use crate::domain::TransitionError;
        match e {
            StoreError::Transition(TransitionError::Closed) => {
                ServiceError::new(ErrorCode::ThreadClosed, TransitionError::Closed.to_string())
            }
            StoreError::Transition(t @ TransitionError::NeedsThread(_)) => {
                ServiceError::new(ErrorCode::ThreadRequired, t.to_string())
            }
            StoreError::TaskTerminal(t) => {
                ServiceError::new(ErrorCode::TaskTerminal, t.to_string())
            }
            StoreError::IdempotencyMismatch => ServiceError::new(
                ErrorCode::IdempotencyConflict,
                "this idempotency_key was already used for a different message; use a new key",
            ),
            StoreError::StaleClaim { token, holder } => {
                let message = match &holder {
                    Some(h) => format!(
                        "fencing token {token} is stale: thread {} was claimed since by {} \
                         (self-declared session {}, fencing token {}) until {}; nothing was \
                         written",
                        h.thread,
                        h.person,
                        crate::domain::text::quote(h.session.as_str()),
                        h.fencing_token,
                        h.expires_at
                    ),
                    None => format!(
                        "fencing token {token} is stale: another session claimed the thread \
                         since (no claim on it is live now); nothing was written"
                    ),
                };
                ServiceError::new(ErrorCode::StaleClaim, message)
                    .with_details(serde_json::json!({ "fencing_token": token, "holder": holder }))
            }
            StoreError::UnknownFencingToken(token) => ServiceError::invalid(format!(
                "no claim of this thread has fencing token {token}; pass the token your claim returned"
            )),
            StoreError::CursorAhead { after, last } => ServiceError::new(
                ErrorCode::CursorAhead,
                format!(
                    "after={after} is ahead of the inbox, whose last entry is {last}; pass a cursor you received"
                ),
            ),
            StoreError::Conflict(what) => {
                ServiceError::new(ErrorCode::AlreadyExists, format!("already exists ({what})"))
            }
            StoreError::InvalidData(why) => {
                tracing::info!(error = %why, "The database refused a value as invalid data.");
                ServiceError::invalid(format!("a value cannot be stored: {why}"))
            }
            StoreError::NotFound(what) => {
                ServiceError::new(ErrorCode::NotFound, format!("no such {what}"))
            }
            e @ (StoreError::Database(_) | StoreError::Corrupt(_)) => {
                tracing::error!(error = %e, "Store operation failed.");
                ServiceError::new(
                    ErrorCode::Unavailable,
                    "the database is unavailable; retry later",
                )
            }
        }
    }
}

pub type Result<T, E = ServiceError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_parses_back_from_its_name() {
        for code in ErrorCode::ALL {
            assert_eq!(code.as_str().parse::<ErrorCode>().unwrap(), *code);
        }
    }
}
