//! Approvals (SPEC §5): the state machine of a human's decision on one request with an effect, and
//! the fingerprint that binds the decision to the exact action.
//!
//! ```text
//! pending ──allow──▶ approved ──first claim──▶ consumed
//!    │ │ └──reject──▶ rejected
//!    │ └──deadline──▶ expired
//!    └──its thread closed──▶ withdrawn
//! ```
//!
//! Only `pending` can be decided, expire or be withdrawn; only `approved` can be consumed. Every other move is a
//! [`ApprovalRefusal`] that says what the approval already is. Pure: no I/O.

use serde::Serialize;

use super::{Attachment, Impact, MessageId, PersonId, ThreadId, named_enum};

named_enum! {
    /// Where an approval stands.
    pub enum ApprovalState ("approval state") {
        /// Waiting for a human.
        Pending = "pending",
        /// A human allowed it once; the first claim will consume it.
        Approved = "approved",
        /// A human refused it; the thread was closed with the reason.
        Rejected = "rejected",
        /// Nobody decided before the deadline; the thread was closed.
        Expired = "expired",
        /// Approved, and a claim has started the work it allowed.
        Consumed = "consumed",
        /// Its request's thread was closed before anyone decided: there is nothing left to
        /// allow, and it leaves the approvers' queue.
        Withdrawn = "withdrawn",
    }
}

named_enum! {
    /// What an approval guards.
    pub enum ApprovalKind ("approval kind") {
        /// A request with an effect, to the team's own members (SPEC §5); the first claim after
        /// `allow` consumes it.
        Request = "request",
        /// A message leaving the team for a remote agent (SPEC §8b); `allow` sends it, which
        /// consumes it at once.
        Outbound = "outbound",
    }
}

named_enum! {
    /// A human's decision.
    pub enum Decision ("decision") {
        Allow = "allow",
        Reject = "reject",
    }
}

named_enum! {
    /// How a decision reached liaison, for the audit log.
    pub enum DecisionPath ("decision path") {
        Cli = "cli",
        Api = "api",
        Link = "link",
        Console = "console",
        Elicitation = "elicitation",
    }
}

/// What happens to an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalEvent {
    Decided(Decision),
    /// The deadline passed.
    Expired,
    /// A claim began the approved work.
    Consumed,
    /// The request's thread was closed (by anyone) while the approval was pending.
    Withdrawn,
}

/// Why an approval cannot move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ApprovalRefusal {
    #[error("the approval is already {0}")]
    AlreadySettled(ApprovalState),
    #[error("the approval is still pending")]
    StillPending,
}

impl ApprovalState {
    /// The state after `event`, or why it cannot happen.
    pub fn apply(self, event: ApprovalEvent) -> Result<ApprovalState, ApprovalRefusal> {
        use ApprovalEvent as E;
        use ApprovalState as S;
        match (self, event) {
            (S::Pending, E::Decided(Decision::Allow)) => Ok(S::Approved),
            (S::Pending, E::Decided(Decision::Reject)) => Ok(S::Rejected),
            (S::Pending, E::Expired) => Ok(S::Expired),
            (S::Pending, E::Withdrawn) => Ok(S::Withdrawn),
            (S::Pending, E::Consumed) => Err(ApprovalRefusal::StillPending),
            (S::Approved, E::Consumed) => Ok(S::Consumed),
            (settled, _) => Err(ApprovalRefusal::AlreadySettled(settled)),
        }
    }

    /// Whether a claim may start (or continue) the work: approved, or already consumed by one.
    pub fn allows_work(self) -> bool {
        matches!(self, ApprovalState::Approved | ApprovalState::Consumed)
    }
}

/// The action a human approves, as the fingerprint covers it.
#[derive(Debug, Clone, Serialize)]
struct Action<'a> {
    thread: &'a str,
    message: &'a str,
    impact: Impact,
    /// SHA-256 (hex) of the canonical JSON of `{"body": …, "attachments": […]}`.
    content: String,
    /// For a message leaving the team: the remote agent it goes to.
    #[serde(skip_serializing_if = "Option::is_none")]
    to: Option<&'a str>,
}

/// The action fingerprint: SHA-256 (hex) over the RFC 8785 canonical JSON of the thread id, the
/// message id, the impact and the SHA-256 of the canonical body and attachments. Two requests with
/// any difference in what they ask have different fingerprints.
pub fn fingerprint(
    thread: &ThreadId,
    message: &MessageId,
    impact: Impact,
    body: &str,
    attachments: &[Attachment],
) -> String {
    action_fingerprint(thread, message, impact, body, attachments, None)
}

/// The fingerprint of a message leaving the team: as [`fingerprint`], with the remote agent it
/// goes to (`to`) in the action, so the same words to another agent need another approval.
pub fn outbound_fingerprint(
    thread: &ThreadId,
    message: &MessageId,
    impact: Impact,
    body: &str,
    attachments: &[Attachment],
    to: &PersonId,
) -> String {
    action_fingerprint(
        thread,
        message,
        impact,
        body,
        attachments,
        Some(to.as_str()),
    )
}

fn action_fingerprint(
    thread: &ThreadId,
    message: &MessageId,
    impact: Impact,
    body: &str,
    attachments: &[Attachment],
    to: Option<&str>,
) -> String {
    let content = serde_json::json!({ "body": body, "attachments": attachments });
    let action = Action {
        thread: thread.as_str(),
        message: message.as_str(),
        impact,
        content: super::sha256_hex(&canonical(&content)),
        to,
    };
    super::sha256_hex(&canonical(&action))
}

fn canonical(value: &impl Serialize) -> Vec<u8> {
    serde_json_canonicalizer::to_vec(value).expect("plain JSON values canonicalise")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_pending_is_decided_and_only_approved_is_consumed() {
        use ApprovalEvent as E;
        use ApprovalState as S;
        assert_eq!(
            S::Pending.apply(E::Decided(Decision::Allow)),
            Ok(S::Approved)
        );
        assert_eq!(
            S::Pending.apply(E::Decided(Decision::Reject)),
            Ok(S::Rejected)
        );
        assert_eq!(S::Pending.apply(E::Expired), Ok(S::Expired));
        assert_eq!(S::Pending.apply(E::Withdrawn), Ok(S::Withdrawn));
        assert_eq!(S::Approved.apply(E::Consumed), Ok(S::Consumed));
        assert_eq!(
            S::Pending.apply(E::Consumed),
            Err(ApprovalRefusal::StillPending)
        );
        for settled in [
            S::Approved,
            S::Rejected,
            S::Expired,
            S::Consumed,
            S::Withdrawn,
        ] {
            for event in [
                E::Decided(Decision::Allow),
                E::Decided(Decision::Reject),
                E::Expired,
                E::Withdrawn,
            ] {
                assert_eq!(
                    settled.apply(event),
                    Err(ApprovalRefusal::AlreadySettled(settled))
                );
            }
        }
        for s in [S::Rejected, S::Expired, S::Consumed, S::Withdrawn] {
            assert!(s.apply(E::Consumed).is_err());
        }
        assert!(S::Approved.allows_work() && S::Consumed.allows_work());
        assert!(!S::Pending.allows_work() && !S::Rejected.allows_work());
    }

    #[test]
    fn the_fingerprint_changes_with_anything_the_request_asks() {
        let t = ThreadId::parse("thr_0123456789abcdef0123456789abcdef").unwrap();
        let m = MessageId::parse("msg_0123456789abcdef0123456789abcdef").unwrap();
        let m2 = MessageId::parse("msg_0123456789abcdef0123456789abcdee").unwrap();
        let data = |v: i64| Attachment::Data {
            data: serde_json::json!({ "n": v }),
        };
        let base = fingerprint(&t, &m, Impact::Code, "deploy", &[data(1)]);
        assert_eq!(base.len(), 64);
        assert_eq!(
            base,
            fingerprint(&t, &m, Impact::Code, "deploy", &[data(1)])
        );
        for other in [
            fingerprint(&t, &m2, Impact::Code, "deploy", &[data(1)]),
            fingerprint(&t, &m, Impact::Production, "deploy", &[data(1)]),
            fingerprint(&t, &m, Impact::Code, "deploy!", &[data(1)]),
            fingerprint(&t, &m, Impact::Code, "deploy", &[data(2)]),
            fingerprint(&t, &m, Impact::Code, "deploy", &[]),
        ] {
            assert_ne!(base, other);
        }
    }
}
