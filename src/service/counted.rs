//! The traffic counters of `/metrics` — `liaison_messages_posted_total{kind}`,
//! `liaison_threads_opened_total`, `liaison_threads_closed_total{outcome}` and
//! `liaison_approval_decisions_total{outcome}` — recorded by the service once a write has
//! committed, never inside its transaction (the writer may run a transaction again). Every
//! write that stores a message ends in one of these: a post ([`posted`]: members, agents,
//! external tasks, the follower's close), an approval settled ([`settled`], with the server's
//! close of a rejected or expired request), a delivery to a remote agent that died
//! ([`closed_by_server`]). Each process counts what it wrote; replicas add up in Prometheus.

use crate::domain::{ApprovalState, Kind, Outcome, ThreadState};
use crate::metrics;
use crate::store::{ApprovalRecord, NewMessage, PostOutcome};

/// A post committed: its message, the thread it opened, the thread it closed. A replay of an
/// idempotent post created nothing and counts nothing.
pub(super) fn posted(outcome: &PostOutcome) {
    if outcome.replayed {
        return;
    }
    let m = metrics::get();
    m.message_posted(outcome.message.kind.as_str());
    if outcome.message.position == 1 {
        m.thread_opened();
    }
    if let ThreadState::Closed { outcome } = outcome.thread.state {
        m.thread_closed(outcome.as_str());
    }
}

/// An approval settled (`record` as it now stands), with the outcome of the server's close of
/// its thread when one was posted in the same transaction.
pub(super) fn settled(record: &ApprovalRecord, closed: Option<Outcome>) {
    let outcome = match record.state {
        ApprovalState::Approved | ApprovalState::Consumed => "allowed",
        ApprovalState::Rejected => "rejected",
        ApprovalState::Expired => "expired",
        // Nobody decided: its request's thread was closed (the close is counted as a post).
        ApprovalState::Pending | ApprovalState::Withdrawn => return,
    };
    metrics::get().approval_decided(outcome);
    if let Some(outcome) = closed {
        closed_by_server(outcome);
    }
}

/// The server's `close`, with this outcome, posted inside another write (an approval settled, a
/// delivery that died).
pub(super) fn closed_by_server(outcome: Outcome) {
    let m = metrics::get();
    m.message_posted(Kind::Close.as_str());
    m.thread_closed(outcome.as_str());
}

/// The outcome a server's `close` ends its thread with.
pub(super) fn close_outcome(close: &NewMessage) -> Outcome {
    close.outcome.unwrap_or(Outcome::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The label values `/metrics` creates up front are the domain's own names, so no series a
    /// dashboard queries is missing and none is counted under a name it never shows.
    #[test]
    fn the_metric_labels_are_the_domains_names() {
        let kinds: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(kinds, metrics::MESSAGE_KINDS);
        let outcomes: Vec<&str> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(outcomes, metrics::THREAD_OUTCOMES);
    }
}
