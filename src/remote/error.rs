//! What can go wrong calling a remote agent, and whether trying again may help.

use std::time::Duration;

use crate::domain::delivery::SendFailure;

/// An error the remote agent answered in its binding's shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteError {
    /// The binding's code: the JSON-RPC error code, the gRPC status code, or the HTTP status of
    /// an HTTP+JSON error.
    pub code: i64,
    /// `google.rpc.ErrorInfo.reason` when the remote sent one (e.g. `TASK_NOT_FOUND`).
    pub reason: Option<String>,
    /// The remote's message (untrusted text, cut to 500 characters).
    pub message: String,
    /// The HTTP status the error came with (none on gRPC).
    pub http_status: Option<u16>,
    /// Whether the code says the remote may succeed later (gRPC UNAVAILABLE and the like, HTTP
    /// 429 and 5xx, JSON-RPC internal error).
    pub retryable: bool,
}

/// Why a call to a remote agent failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// No answer: the address guard, the connection, a timeout, or the request itself.
    #[error("no answer from the remote agent: {} ({})", .0.message(), .0.class())]
    Transport(SendFailure),
    /// An HTTP status without an A2A error in the body.
    #[error("the remote agent answered HTTP {code}")]
    Status {
        code: u16,
        retry_after: Option<Duration>,
    },
    /// The remote answered an A2A (or JSON-RPC, or gRPC) error.
    #[error("the remote agent answered an error {}{}: {}", .0.code, .0.reason.as_deref().map(|r| format!(" {r}")).unwrap_or_default(), .0.message)]
    Remote(RemoteError),
    /// The answer is not what the binding promises (bad JSON, bad protobuf, wrong shape).
    #[error("the remote agent's answer could not be read: {0}")]
    Undecodable(String),
    /// The answer (or one stream event) is larger than liaison reads.
    #[error("the remote agent's answer is larger than {limit} bytes")]
    TooLarge { limit: usize },
    /// The credentials could not be presented (e.g. the OAuth2 token endpoint refused).
    #[error("could not authenticate to the remote agent: {0}")]
    Credentials(String),
}

impl CallError {
    /// Whether the same call may succeed later.
    pub fn retryable(&self) -> bool {
        match self {
            CallError::Transport(f) => f.retryable(),
            CallError::Status { code, .. } => crate::domain::delivery::status_retryable(*code),
            CallError::Remote(e) => e.retryable,
            // A token endpoint that failed may recover; a refused client will not, but telling
            // them apart needs the endpoint's cooperation, so the schedule decides.
            CallError::Credentials(_) => true,
            CallError::Undecodable(_) | CallError::TooLarge { .. } => false,
        }
    }

    /// `Retry-After` when the remote sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            CallError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    pub(crate) fn from_fetch(e: crate::net::outbound::FetchError) -> CallError {
        match e {
            crate::net::outbound::FetchError::Send(f) => CallError::Transport(f),
            crate::net::outbound::FetchError::TooLarge { limit } => CallError::TooLarge { limit },
        }
    }
}

/// Untrusted text from a remote, on one line and at most 500 characters.
pub(crate) fn excerpt(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(500)
        .collect()
}
