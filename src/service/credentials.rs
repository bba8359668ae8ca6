//! What a credential holds open ends with it: A2A streams, blocking sends, long-polls, the
//! console's event streams and MCP sessions each take a [`CredentialHold`] and stop when it ends.
//!
//! A hold ends when its credential can no longer be used: a token revoked or its person removed,
//! a console session signed out, a JWT party removed (each announced on every replica by the
//! directory topic, the signal that also refreshes the caches), or the credential's expiry
//! passing (a deadline, measured on the service's clock). Holds of one credential share one
//! watcher, so a revocation costs one store read per credential held open on each replica, not
//! one per stream. Keyed on the credential's id (a token id, `console:<session>`,
//! `jwt:<subject>`), whatever kind of credential that is. Knows nothing of the fronts.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use tokio_util::sync::CancellationToken;

use super::auth::{CONSOLE_PREFIX, JWT_PREFIX};
use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::clock::Clock;
use crate::domain::Timestamp;

/// Longest sleep between two looks at the clock while waiting for an expiry: the service's clock
/// may be moved by hand (tests) or jump (NTP), and a hold must still end within about this of
/// the expiry it sees.
const CLOCK_TICK: Duration = Duration::from_millis(500);

/// The watchers of the credentials held open on this replica, by credential id.
pub(super) type Watchers = std::sync::Mutex<HashMap<String, Weak<Watch>>>;

/// One credential's watcher, shared by its holds; stops watching when the last hold goes.
pub(super) struct Watch {
    ended: CancellationToken,
    why: Arc<OnceLock<ServiceError>>,
    task: tokio::task::AbortHandle,
    /// The credential's expiry and the service's clock: [`CredentialHold::check`] compares them
    /// itself, so that nothing is answered past the expiry before the watcher's next look.
    expires_at: Option<Timestamp>,
    clock: Arc<dyn Clock>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A stream, long-poll or session's claim on its credential: [`CredentialHold::ended`] resolves
/// once the credential can no longer be used, with the error its next request would get.
#[derive(Clone)]
pub struct CredentialHold {
    watch: Arc<Watch>,
}

impl CredentialHold {
    /// Resolves when the credential ends, with why (`token_revoked` or `token_expired`).
    pub async fn ended(&self) -> ServiceError {
        self.watch.ended.cancelled().await;
        self.why()
    }

    /// Why it ended, if it has (or its expiry has passed, even if the watcher has not looked yet).
    pub fn check(&self) -> Result<()> {
        let w = &self.watch;
        if w.ended.is_cancelled() {
            Err(self.why())
        } else if w.expires_at.is_some_and(|at| at <= w.clock.now()) {
            Err(expired())
        } else {
            Ok(())
        }
    }

    fn why(&self) -> ServiceError {
        self.watch
            .why
            .get()
            .cloned()
            .unwrap_or_else(|| ServiceError::new(ErrorCode::TokenRevoked, "the credential ended"))
    }

    /// `stream` until the credential ends; then `last(why)`, if it gives an item, and the end.
    pub fn bound<S>(
        self,
        stream: S,
        last: impl FnOnce(ServiceError) -> Option<S::Item> + Send + 'static,
    ) -> impl Stream<Item = S::Item> + Send + 'static
    where
        S: Stream + Send + 'static,
        S::Item: Send + 'static,
    {
        let stop = self.clone();
        let hold = self;
        // The stream is dropped as soon as the credential ends (not polled once more), and the
        // closing item, if any, follows.
        stream
            .take_until(async move { stop.watch.ended.cancelled().await })
            .chain(
                futures::stream::once(async move { hold.check().err().and_then(last) })
                    .filter_map(std::future::ready),
            )
    }
}

impl Service {
    /// A hold on `caller`'s credential, or why it cannot be used any more. The check and the
    /// watch begin together: a revocation committed at any moment after `caller` authenticated
    /// either fails this call or ends the hold.
    pub async fn hold_credential(&self, caller: &Caller) -> Result<CredentialHold> {
        let key = caller.token_id.clone();
        if let Some(watch) = self.watcher(&key) {
            return Ok(CredentialHold { watch });
        }
        // Subscribed before the first check, so that no change slips between them.
        let changes = self.directory_changes();
        self.check_credential(caller).await?;
        let ended = CancellationToken::new();
        let why = Arc::new(OnceLock::new());
        let task = tokio::spawn(self.clone().watch_credential(
            caller.clone(),
            changes,
            ended.clone(),
            why.clone(),
        ))
        .abort_handle();
        let watch = Arc::new(Watch {
            ended,
            why,
            task,
            expires_at: caller.expires_at,
            clock: self.inner.clock.clone(),
        });
        let mut watchers = self
            .inner
            .credential_watchers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        watchers.retain(|_, w| w.strong_count() > 0);
        // Another hold of this credential may have started a watcher meanwhile: either serves.
        watchers.insert(key, Arc::downgrade(&watch));
        Ok(CredentialHold { watch })
    }

    /// The live watcher of this credential, if one runs and has not ended.
    fn watcher(&self, key: &str) -> Option<Arc<Watch>> {
        let watchers = self
            .inner
            .credential_watchers
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        watchers
            .get(key)
            .and_then(Weak::upgrade)
            .filter(|w| !w.ended.is_cancelled())
    }

    /// Ends `ended` with why once `caller`'s credential cannot be used: re-checked on every
    /// directory change, and against the clock until its expiry.
    async fn watch_credential(
        self,
        caller: Caller,
        mut changes: crate::bus::Subscription,
        ended: CancellationToken,
        why: Arc<OnceLock<ServiceError>>,
    ) {
        let end = |e: ServiceError| {
            let _ = why.set(e);
            ended.cancel();
        };
        loop {
            if let Some(at) = caller.expires_at
                && at <= self.now()
            {
                return end(expired());
            }
            let nap = match caller.expires_at {
                Some(at) => {
                    Duration::from_millis((at.0 - self.now().0).max(0) as u64).min(CLOCK_TICK)
                }
                None => Duration::MAX,
            };
            tokio::select! {
                () = changes.woken() => {}
                () = sleep(nap) => continue,
                () = self.stopping() => return,
            }
            match self.check_credential(&caller).await {
                Ok(()) => {}
                Err(e) if ends_credential(&e) => return end(e),
                // The store did not answer: the credential stands until a check says otherwise
                // (its next request is checked anyway); the next change or tick tries again.
                Err(e) => tracing::warn!(error = %e, "Could not check a held credential."),
            }
        }
    }

    /// Refuses with `token_revoked` or `token_expired` when `caller`'s credential can no longer
    /// be used, read from the database (never a cache; a stream asks before it hands over what
    /// it read, so that a revocation racing a write is never lost to a wake-up's order): a token revoked (or its person removed),
    /// a console session ended, a JWT party removed, or any of them expired. Server-internal
    /// callers pass.
    pub async fn check_credential(&self, caller: &Caller) -> Result<()> {
        let now = self.now();
        if caller.expires_at.is_some_and(|at| at <= now) {
            return Err(expired());
        }
        let id = caller.token_id.as_str();
        if let Some(session) = id.strip_prefix(CONSOLE_PREFIX) {
            return match self.inner.store.session_standing(session).await? {
                Some((s, removed)) if s.ended_at.is_none() && !removed => {
                    if s.expires_at <= now {
                        Err(expired())
                    } else {
                        Ok(())
                    }
                }
                Some((_, true)) => Err(revoked("this person was removed")),
                _ => Err(revoked("this console session was signed out")),
            };
        }
        if let Some(subject) = id.strip_prefix(JWT_PREFIX) {
            return match self.inner.store.party_by_subject(subject).await? {
                Some(_) => Ok(()),
                None => Err(revoked("this JWT's party was removed")),
            };
        }
        match self.inner.store.token_by_id(id).await? {
            Some(t) if t.revoked_at.is_some() => Err(revoked("this token was revoked")),
            Some(t) if t.expires_at.is_some_and(|e| e <= now) => Err(expired()),
            // Server-internal callers (`system`, `remote`) and one-use links have no row.
            _ => Ok(()),
        }
    }
}

/// Resolves when `hold` ends; never without one.
pub(super) async fn ended(hold: Option<&CredentialHold>) -> ServiceError {
    match hold {
        Some(h) => h.ended().await,
        None => std::future::pending().await,
    }
}

/// Sleeps `d`, or forever for `Duration::MAX`.
async fn sleep(d: Duration) {
    if d == Duration::MAX {
        std::future::pending::<()>().await;
    }
    tokio::time::sleep(d).await;
}

fn ends_credential(e: &ServiceError) -> bool {
    matches!(e.code, ErrorCode::TokenRevoked | ErrorCode::TokenExpired)
}

fn revoked(what: &str) -> ServiceError {
    ServiceError::new(ErrorCode::TokenRevoked, what.to_owned())
}

fn expired() -> ServiceError {
    ServiceError::new(
        ErrorCode::TokenExpired,
        "this credential expired; ask for a new one",
    )
}
