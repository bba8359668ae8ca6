//! Storage: one `Store` for SQLite (default, through rusqlite) and PostgreSQL (through sqlx).
//!
//! The SQL is written once (`$1` placeholders work on both backends) and run through [`db`];
//! what differs per backend lives in [`sqlite`] (file, pragmas) and [`postgres`] (pool, locks).
//! Every write runs through [`Store::write`] and the group-commit writer ([`writer`]): one per
//! process, on a thread of its own, commits many concurrent operations
//! together, each in its own savepoint, one durable flush per batch. A write is acknowledged only
//! after its commit is durable.
//!
//! The store knows tables and transactions, not rules: validation and permissions are the service's.
//! It does apply the pure thread state machine inside the posting transaction, so that the state
//! check and the insert are atomic. It must not depend on the service or any front.
//!
//! Its files, from the ground up; each imports only files below it:
//! - [`error`] (`StoreError`, `Result`); [`deadlines`], how long the store waits on its database;
//!   [`db`], one way to write a statement and two ways to run it; [`readers`], PostgreSQL's read connections; [`migrations`], the embedded migrations.
//! - [`model`]: what the store is given (`model::input`) and what it answers (`model::records`),
//!   each record with the column list and parser of its row; [`cache`], what is held in memory.
//! - [`tx`]: the in-transaction building blocks, `fn(tx: &mut Conn, …)`, which the operations
//!   compose into transactions. They only call downward, never an operation nor `Store` (their
//!   order is in [`tx`]'s notes).
//! - [`writer`], [`sqlite`], [`postgres`] and this file: the `Store`, opened, written and closed.
//! - The operation files, `impl Store` only, each operation a read or a transaction of `tx`
//!   blocks: [`messages`] (the post, message and thread reads), [`inbox`], [`approvals`],
//!   [`outbox`] (the lease queue), [`webhooks`], [`remote_tasks`], [`parties`] (the task event
//!   log, parties, push configs), [`links`] (the console's links and sessions), [`people`], [`directory_search`] (people and
//!   tokens a page at a time),
//!   [`remotes`], [`oauth`] (OAuth clients, grants, codes, refresh tokens), [`coordination`], [`signing_keys`], [`retention`] (the retention sweep's
//!   bounded purges), [`backup`] (SQLite's online backup), [`activity`] and [`figures`] (what the
//!   console's activity page and `/metrics` count). Nothing imports them, and they do not
//!   import one another.

mod activity;
mod approvals;
mod backup;
mod cache;
mod coordination;
mod db;
mod deadlines;
mod directory_search;
mod error;
mod figures;
mod inbox;
mod links;
mod messages;
mod migrations;
mod model;
mod oauth;
mod outbox;
mod parties;
mod people;
mod personal;
mod postgres;
mod readers;
mod remote_tasks;
mod remotes;
mod retention;
mod signing_keys;
mod sqlite;
#[cfg(test)]
pub(crate) mod test_db;
mod tool_checks;
mod trace;
mod tx;
mod webhooks;
mod writer;

use db::{BoxFut, Conn};

pub use activity::{ActivityFilter, OpenedThread, WEEK_MS, WeekCount, Window};
pub use backup::sqlite_file;
pub use cache::TTL as DIRECTORY_TTL;
pub use deadlines::Deadlines;
pub use directory_search::{PersonSearch, TokenSearch, TokenState};
pub use error::{ClaimHolder, Result, StoreError};
pub use figures::{ApprovalFigures, InboxFigures, OutboxFigures};
pub use inbox::Acknowledged;
pub use model::input::{
    Addressing, AdminChange, AuditFilter, DeliveryFilter, FinishedAttempt, NewApproval, NewLink,
    NewMessage, NewProgress, NewRemoteTask, NewTask, OnAllow, RemoteHop, RemoteObservation,
    RemoteUpdate, Settlement, TaskFilter,
};
pub use model::records::approvals::{ApprovalRecord, AuditRecord, Settled};
pub use model::records::coordination::{
    ClaimAttempt, ClaimRecord, LeaseAttempt, LeaseRecord, PresenceRecord, ProgressAdded,
    ProgressRecord, QueuePlace,
};
pub use model::records::directory::{
    ChannelRecord, MemberRecord, PartyRecord, PersonRecord, TokenRecord,
};
pub use model::records::inbox::{EntryContent, InboxEntry, InboxPosition, ReceiptRecord};
pub use model::records::links::{LinkKind, LinkRecord, SessionRecord};
pub use model::records::oauth::{
    CodeUse, OAuthClientRecord, OAuthCodeRecord, OAuthGrantRecord, OAuthRefreshRecord, Rotation,
};
pub use model::records::outbox::{
    AttemptRecord, DeliveryRecord, DeliveryState, EndpointRecord, Finished, PUSH_EVENT,
    WebhookRecord, push_endpoint, webhook_endpoint,
};
pub use model::records::personal::{
    CommandRecord, JoinAttempt, NewCommand, NewPersonalSession, PersonalSessionRecord,
};
pub use model::records::remote_tasks::{
    REMOTE_CANCEL, REMOTE_SEND, RemoteTaskRecord, remote_endpoint,
};
pub use model::records::remotes::RemoteRecord;
pub use model::records::threads::{
    MessageRecord, PostOutcome, PushConfigRecord, TaskEventRecord, TaskInfo, ThreadRecord,
};
pub use model::records::tool_checks::{ConfirmationAsked, ConfirmationDecided, ConfirmationRecord};
pub use oauth::{AddressLimit, ClientInsert};
pub use personal::SESSIONS_LISTED;
pub use retention::{PURGE_BATCH, PurgedDeliveries, PurgedThreads};
pub use tool_checks::{CONFIRMATIONS_LISTED, ToolAudit};
pub(crate) use writer::Then;

/// Which database the store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The database, opened and migrated. Cheap to share behind an `Arc`.
pub struct Store {
    backend: Backend,
    /// Reads.
    pool: db::Pool,
    /// Every write.
    writer: writer::BatchWriter,
    /// Tokens, persons, channels and parties recently read; see [`cache`].
    directory: cache::Directory,
    /// The live webhooks, for the outbox's hooks in every posting transaction.
    webhooks: std::sync::Arc<tx::enqueue::WebhookCache>,
}

impl Store {
    /// Opens `url` (`sqlite://…` or `postgres://…`) with the default deadlines, applies the
    /// migrations and returns the store.
    pub async fn open(url: &str) -> Result<Store> {
        Self::open_with(url, Deadlines::default()).await
    }

    /// [`Store::open`] with the deadlines given.
    pub async fn open_with(url: &str, deadlines: Deadlines) -> Result<Store> {
        sqlx::any::install_default_drivers();
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let (pool, writer) = postgres::open(url, deadlines).await?;
            Ok(Store {
                backend: Backend::Postgres,
                pool,
                writer,
                directory: cache::Directory::new(),
                webhooks: std::sync::Arc::new(cache::Slot::new()),
            })
        } else if url.starts_with("sqlite:") {
            let (pool, writer) = sqlite::open(url, deadlines).await?;
            Ok(Store {
                backend: Backend::Sqlite,
                pool,
                writer,
                directory: cache::Directory::new(),
                webhooks: std::sync::Arc::new(cache::Slot::new()),
            })
        } else {
            Err(StoreError::Database(format!(
                "unsupported database URL {url:?}: use sqlite://PATH or postgres://…"
            )))
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Runs `op` in one transaction and returns once it is durably committed.
    pub(crate) async fn write<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut Conn) -> BoxFut<'c, Result<T>> + Send + 'static,
    {
        self.writer.run(op).await
    }

    /// [`Store::write`] for a change to tokens, persons, channels, members, policies or parties:
    /// the cached directory is forgotten once the change is committed.
    pub(crate) async fn write_directory<T, F>(&self, op: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut Conn) -> BoxFut<'c, Result<T>> + Send + 'static,
    {
        let done = self.writer.run(op).await;
        self.directory.forget();
        done
    }

    /// Forgets every cached token, person, channel and party (and the live webhooks): another
    /// replica changed them (the service calls this on the bus's directory topic). This store's
    /// own writes forget by themselves.
    pub fn forget_directory(&self) {
        self.directory.forget();
        self.webhooks.forget();
    }

    /// ` FOR UPDATE` on PostgreSQL, where other replicas write too; SQLite has one writer.
    pub(crate) fn for_update(&self) -> &'static str {
        match self.backend {
            Backend::Postgres => " FOR UPDATE",
            Backend::Sqlite => "",
        }
    }

    /// Since when (Unix milliseconds) every write has failed, while they do (a full disk, a lost
    /// database); `None` once a write commits again. For `/readyz`.
    pub fn writes_failing_since_ms(&self) -> Option<i64> {
        self.writer.failing_since_ms()
    }

    /// Since when (Unix milliseconds) the group commit under way has waited on the database, when
    /// that is longer than `longer_than` (a hung database, a lock held elsewhere). For `/readyz`.
    pub fn writes_stuck_since_ms(&self, longer_than: std::time::Duration) -> Option<i64> {
        self.writer.stuck_since_ms(longer_than)
    }

    /// Checks the database answers; for `/readyz`.
    pub async fn ping(&self) -> Result<()> {
        db::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Connections of the read pool: open, and idle among them (for `/metrics`).
    pub fn pool_usage(&self) -> (u32, usize) {
        self.pool.usage()
    }

    /// Closes connections after in-flight writes finish.
    pub async fn close(&self) {
        self.writer.close().await;
        self.pool.close().await;
    }
}
