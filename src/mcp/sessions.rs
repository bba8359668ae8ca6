//! The legacy MCP sessions each token holds (`Mcp-Session-Id`), bounded.
//!
//! rmcp keeps sessions in its `LocalSessionManager` and closes one after `mcp.session_idle`
//! without messages; this book adds the per-token bound. A session is recorded when rmcp answers a
//! request without a session id with a new `Mcp-Session-Id`. When a token then holds more than
//! `mcp.sessions_per_token`, the session of that token idle the longest (no request in flight) is
//! closed to make room; when none is idle, the new session is closed at once and the request is
//! refused with `too_many_sessions`. A session id presented with another token's credential is
//! answered as unknown. Depends on rmcp's session manager; knows nothing of tools.
//!
//! A session's end also ends the waits of its calls ([`SessionEnd`], which every request naming a
//! known session carries in its extensions): rmcp lets a closed session's calls run for seconds
//! to drain their answers, and a `claim` waiting for work would take a task for a client that
//! can no longer be told, holding it until its lease ended.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::http::HeaderMap;
use rmcp::transport::streamable_http_server::SessionManager as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use tokio_util::sync::CancellationToken;

use crate::service::{ErrorCode, ServiceError};

/// The session header, as rmcp spells it.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";

/// One recorded session.
struct Entry {
    token: String,
    created: Instant,
    /// Last time a request of this session arrived.
    last_used: Mutex<Instant>,
    /// Requests of this session whose response is still being sent.
    in_flight: Arc<AtomicUsize>,
    /// The task that closes the session when its credential ends; stopped with the entry.
    watch: Mutex<Option<tokio::task::AbortHandle>>,
    /// Cancelled when the session ends (ended by its client, closed, forgotten).
    end: CancellationToken,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.end.cancel();
        if let Some(task) = self
            .watch
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            task.abort();
        }
    }
}

/// Sessions by id, with their token.
pub(super) struct SessionBook {
    manager: Arc<LocalSessionManager>,
    max_per_token: usize,
    entries: Mutex<HashMap<Arc<str>, Arc<Entry>>>,
}

/// Counts a request in flight on a session while alive (held by its response body).
pub(super) struct Busy {
    in_flight: Arc<AtomicUsize>,
    end: CancellationToken,
}

impl Busy {
    /// What tells the request's calls that their session ended.
    pub(super) fn session_end(&self) -> SessionEnd {
        SessionEnd(self.end.clone())
    }

    /// Ends the waits of every call of the session now (its client is ending it).
    pub(super) fn end_waits(&self) {
        self.end.cancel();
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// In a request's extensions: cancelled when the session the request belongs to ends, so that a
/// call waiting for something ends with it ([`crate::mcp::progress::with_progress`]).
#[derive(Clone)]
pub(crate) struct SessionEnd(CancellationToken);

impl SessionEnd {
    /// Completes once the session has ended.
    pub(crate) async fn ended(&self) {
        self.0.cancelled().await;
    }
}

/// What the book says about a request that names a session.
pub(super) enum Use {
    /// The session is this token's (or unknown to the book: rmcp answers for it).
    Go(Option<Busy>),
    /// The session belongs to another token.
    Foreign,
}

impl SessionBook {
    pub(super) fn new(manager: Arc<LocalSessionManager>, max_per_token: usize) -> Self {
        Self {
            manager,
            max_per_token,
            entries: Mutex::default(),
        }
    }

    /// A request of `token` naming session `id`: marks the session busy until the guard drops.
    pub(super) fn enter(&self, token: &str, id: &str) -> Use {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let Some(entry) = entries.get(id) else {
            return Use::Go(None);
        };
        if entry.token != token {
            return Use::Foreign;
        }
        *entry.last_used.lock().unwrap_or_else(|e| e.into_inner()) = Instant::now();
        entry.in_flight.fetch_add(1, Ordering::AcqRel);
        Use::Go(Some(Busy {
            in_flight: entry.in_flight.clone(),
            end: entry.end.clone(),
        }))
    }

    /// Forgets a session the client ended (DELETE), or one closed: the waits of its calls end.
    pub(super) fn forget(&self, id: &str) {
        let gone = self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        if let Some(entry) = gone {
            entry.end.cancel();
        }
    }

    /// Records session `id` just created for `token`, making room under the bound. On refusal
    /// the new session is already closed.
    pub(super) async fn created(&self, token: &str, id: &str) -> Result<(), ServiceError> {
        let id: Arc<str> = Arc::from(id);
        let mine = self.live_sessions_of(token).await;
        let now = Instant::now();
        let entry = Arc::new(Entry {
            token: token.to_owned(),
            created: now,
            last_used: Mutex::new(now),
            in_flight: Arc::default(),
            watch: Mutex::default(),
            end: CancellationToken::new(),
        });
        if mine.len() < self.max_per_token {
            self.insert(id, entry);
            return Ok(());
        }
        let idle = mine
            .iter()
            .filter(|(_, e)| e.in_flight.load(Ordering::Acquire) == 0)
            .min_by_key(|(_, e)| *e.last_used.lock().unwrap_or_else(|e| e.into_inner()))
            .map(|(id, _)| id.clone());
        match idle {
            Some(oldest) => {
                tracing::debug!(session = %oldest, "Closing the token's longest idle MCP session to make room.");
                self.close(&oldest).await;
                self.insert(id, entry);
                Ok(())
            }
            None => {
                let _ = self.manager.close_session(&id).await;
                Err(ServiceError::new(
                    ErrorCode::TooManySessions,
                    format!(
                        "this token already has {} MCP sessions with requests in flight (at most {}); \
                         end one (HTTP DELETE with its Mcp-Session-Id) or wait for one to finish",
                        mine.len(),
                        self.max_per_token
                    ),
                ))
            }
        }
    }

    /// Attaches to session `id` the task that ends it with its credential; the task is stopped
    /// when the session goes (a session already gone stops it at once).
    pub(super) fn watch(&self, id: &str, task: tokio::task::AbortHandle) {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        match entries.get(id) {
            Some(entry) => *entry.watch.lock().unwrap_or_else(|e| e.into_inner()) = Some(task),
            None => task.abort(),
        }
    }

    /// Closes session `id` (its credential ended): its open streams end now. Closed before it is
    /// forgotten, since forgetting stops the watch that calls this.
    pub(super) async fn end(&self, id: &str) {
        let _ = self.manager.close_session(&Arc::from(id)).await;
        self.forget(id);
    }

    fn insert(&self, id: Arc<str>, entry: Arc<Entry>) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, entry);
    }

    async fn close(&self, id: &Arc<str>) {
        self.forget(id);
        let _ = self.manager.close_session(id).await;
    }

    /// The token's sessions rmcp still holds, oldest first; forgets those it has closed (idle).
    async fn live_sessions_of(&self, token: &str) -> Vec<(Arc<str>, Arc<Entry>)> {
        let recorded: Vec<(Arc<str>, Arc<Entry>)> = {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            entries
                .iter()
                .filter(|(_, e)| e.token == token)
                .map(|(id, e)| (id.clone(), e.clone()))
                .collect()
        };
        let mut live = Vec::with_capacity(recorded.len());
        for (id, entry) in recorded {
            if self.manager.has_session(&id).await.unwrap_or(false) {
                live.push((id, entry));
            } else {
                self.forget(&id);
            }
        }
        live.sort_by_key(|(_, e)| e.created);
        live
    }
}

/// The session id a request names, if any.
pub(super) fn session_of(headers: &HeaderMap) -> Option<&str> {
    headers.get(SESSION_HEADER)?.to_str().ok()
}

#[cfg(test)]
mod tests {
    use futures::FutureExt as _;

    use super::*;

    fn busy(book: &SessionBook, token: &str, id: &str) -> Busy {
        match book.enter(token, id) {
            Use::Go(Some(busy)) => busy,
            Use::Go(None) => panic!("session {id} is not in the book"),
            Use::Foreign => panic!("session {id} is another token's"),
        }
    }

    #[tokio::test]
    async fn a_session_forgotten_or_ended_by_its_client_ends_the_waits_of_its_calls() {
        let manager = Arc::new(LocalSessionManager::default());
        let (s1, _transport1) = manager.create_session().await.unwrap();
        let (s2, _transport2) = manager.create_session().await.unwrap();
        let book = SessionBook::new(manager, 4);
        book.created("t1", &s1).await.unwrap();
        book.created("t1", &s2).await.unwrap();
        let (one, two) = (busy(&book, "t1", &s1), busy(&book, "t1", &s2));
        let (ends_one, ends_two) = (one.session_end(), two.session_end());
        assert!(ends_one.ended().now_or_never().is_none());
        // Its client ends it: every call of that session stops waiting, the other's go on.
        one.end_waits();
        assert!(ends_one.ended().now_or_never().is_some());
        assert!(ends_two.ended().now_or_never().is_none());
        // Closed and forgotten (its credential ended, or to make room): the same.
        book.forget(&s2);
        assert!(ends_two.ended().now_or_never().is_some());
        // Another token never reaches a session's calls.
        assert!(matches!(book.enter("t2", &s1), Use::Foreign));
    }
}
