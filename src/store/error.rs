//! What can go wrong in the store ([`StoreError`], [`Result`]), and how sqlx's and the domain's
//! errors map to it (rusqlite's mapping sits with the SQLite runner, `db/lite.rs`). It is the
//! ground floor of the store: it must not depend on any other file of the store.

/// What can go wrong in the store. Cloneable, because one failed group commit fails many callers.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StoreError {
    /// A row with this key exists (the named constraint says which).
    #[error("conflict on {0}")]
    Conflict(String),
    /// The thread state machine refused the message.
    #[error(transparent)]
    Transition(#[from] crate::domain::TransitionError),
    /// The thread is a task in a terminal state.
    #[error(transparent)]
    TaskTerminal(#[from] crate::domain::TaskTerminal),
    /// An idempotency key was reused for a different message.
    #[error("idempotency key reused with a different message")]
    IdempotencyMismatch,
    /// A fencing token that is no longer the thread's: another session claimed the thread since
    /// it was issued (or holds the claim it names). `holder` is the thread's live claim, if any.
    /// Nothing was written.
    #[error("fencing token {token} is stale")]
    StaleClaim {
        token: i64,
        holder: Option<Box<ClaimHolder>>,
    },
    /// A fencing token no claim of the thread was ever given (above its counter, or below 1).
    #[error("no claim of this thread has fencing token {0}")]
    UnknownFencingToken(i64),
    /// `after` is beyond the last entry of the inbox.
    #[error("cursor {after} is ahead of the inbox (last entry {last})")]
    CursorAhead { after: i64, last: i64 },
    /// A row the operation relies on is gone (e.g. the thread of a post).
    #[error("not found: {0}")]
    NotFound(&'static str),
    /// A stored value does not parse: the database was changed outside liaison.
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// The database refused a value as data it cannot hold (PostgreSQL's SQLSTATE class 22, e.g. a
    /// character it cannot store, or a number out of range): the caller's input, not an outage.
    #[error("invalid data: {0}")]
    InvalidData(String),
    #[error("database error: {0}")]
    Database(String),
}

/// A thread's claim as a refusal names it: the store's claim record, which this file must not
/// depend on, converts into it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ClaimHolder {
    pub thread: crate::domain::ThreadId,
    pub person: crate::domain::PersonId,
    pub session: crate::domain::AgentIdentity,
    pub claimed_at: crate::domain::Timestamp,
    pub expires_at: crate::domain::Timestamp,
    pub fencing_token: i64,
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &e
            && db.is_unique_violation()
        {
            // SQLite names the columns, PostgreSQL the constraint; keep whichever we get.
            return StoreError::Conflict(
                db.constraint()
                    .map(str::to_owned)
                    .unwrap_or_else(|| db.message().to_owned()),
            );
        }
        if let sqlx::Error::Database(db) = &e
            && db
                .code()
                .is_some_and(|code| code.len() == 5 && code.starts_with("22"))
        {
            return StoreError::InvalidData(db.message().to_owned());
        }
        StoreError::Database(e.to_string())
    }
}

impl From<crate::domain::ParseError> for StoreError {
    fn from(e: crate::domain::ParseError) -> Self {
        StoreError::Corrupt(e.0)
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A JSON text the store wrote or reads that does not (de)serialise.
pub(in crate::store) fn json_err(e: serde_json::Error) -> StoreError {
    StoreError::Corrupt(e.to_string())
}
