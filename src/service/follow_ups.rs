//! One tool call, two hooks (SPEC §5b). Claude Code runs `PreToolUse` before every call, and
//! when its own settings still ask (an `ask` rule: a hook's `allow` does not skip those) it then
//! runs `PermissionRequest` **for the same call**. Checked twice, that call would get two
//! `started` notes, or worse, a second confirmation right after she allowed the first.
//!
//! So this replica remembers, for [`FOLLOW_UP_S`] seconds, each call (credential, tool, input
//! digest) that a `PreToolUse` check allowed, at once or by her "allow once"; the next
//! `PermissionRequest` check of that call takes the memory (once) and is allowed without a new
//! note or confirmation. A `PermissionRequest` with nothing to take is checked as usual, so a
//! client running only that hook loses nothing, and an identical *new* call still needs its
//! own `PreToolUse` allow first (each memory serves one follow-up). The memory is this replica's
//! own: behind a load balancer spreading one call's two hooks over two replicas, the second is
//! checked again (a second note or confirmation: never an allow she did not give).

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::domain::Timestamp;
use crate::domain::tool_check::ConfirmationId;

/// How long a `PreToolUse` allow waits for its call's `PermissionRequest`.
pub(super) const FOLLOW_UP_S: i64 = 60;
/// Most calls (and confirmations) remembered at once; past it the oldest are dropped first
/// (a dropped one only costs a second check).
const REMEMBERED: usize = 4096;

#[derive(Default)]
pub(super) struct FollowUps {
    inner: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Calls a `PreToolUse` check allowed, and when.
    allowed: HashMap<String, Timestamp>,
    /// Confirmations a `PreToolUse` check asked for (their allow is that hook's).
    asked_before_use: HashSet<ConfirmationId>,
}

/// The memory's key of one call.
pub(super) fn call_key(credential: &str, tool: &str, input_digest: &str) -> String {
    format!("{credential}\0{tool}\0{input_digest}")
}

impl FollowUps {
    /// A `PreToolUse` check allowed this call.
    pub(super) fn allowed(&self, key: String, now: Timestamp) {
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if s.allowed.len() >= REMEMBERED {
            let cutoff = now.0 - FOLLOW_UP_S * 1000;
            s.allowed.retain(|_, at| at.0 > cutoff);
            if s.allowed.len() >= REMEMBERED {
                let oldest = s
                    .allowed
                    .iter()
                    .min_by_key(|(_, at)| at.0)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    s.allowed.remove(&k);
                }
            }
        }
        s.allowed.insert(key, now);
    }

    /// Whether a `PermissionRequest` of this call follows a `PreToolUse` allow (taking it).
    pub(super) fn take(&self, key: &str, now: Timestamp) -> bool {
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        s.allowed
            .remove(key)
            .is_some_and(|at| now.0 - at.0 <= FOLLOW_UP_S * 1000)
    }

    /// A `PreToolUse` check asked for confirmation `id`.
    pub(super) fn asked_before_use(&self, id: ConfirmationId) {
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if s.asked_before_use.len() >= REMEMBERED {
            // Confirmations live at most an hour: a full set is mostly settled ones.
            s.asked_before_use.clear();
        }
        s.asked_before_use.insert(id);
    }

    /// Whether confirmation `id` was asked for by a `PreToolUse` check (forgetting it).
    pub(super) fn was_asked_before_use(&self, id: &ConfirmationId) -> bool {
        let mut s = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        s.asked_before_use.remove(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_follow_up_per_allow_within_the_window() {
        let f = FollowUps::default();
        let k = call_key("tok_a", "Bash", "00");
        assert!(!f.take(&k, Timestamp(0)), "nothing allowed yet");
        f.allowed(k.clone(), Timestamp(1_000));
        assert!(f.take(&k, Timestamp(2_000)));
        assert!(
            !f.take(&k, Timestamp(2_001)),
            "each allow serves one follow-up"
        );
        f.allowed(k.clone(), Timestamp(10_000));
        assert!(
            !f.take(&k, Timestamp(10_000 + FOLLOW_UP_S * 1000 + 1)),
            "too late"
        );
        assert!(!f.take(&call_key("tok_b", "Bash", "00"), Timestamp(10_001)));
    }

    #[test]
    fn bounded() {
        let f = FollowUps::default();
        for i in 0..(REMEMBERED + 10) {
            f.allowed(format!("k{i}"), Timestamp(i as i64));
        }
        assert!(f.inner.lock().unwrap().allowed.len() <= REMEMBERED);
        assert!(f.take(
            &format!("k{}", REMEMBERED + 9),
            Timestamp(REMEMBERED as i64 + 9)
        ));
    }
}
