//! The outbound bridge's pure rules (SPEC §8b): the states of a remote agent's task, what each
//! becomes in the thread, and how liaison follows a task. No I/O.
//!
//! | remote task state | message in the thread, authored by the remote agent |
//! |---|---|
//! | submitted | none |
//! | working | `announce` with the status text (none without text) |
//! | input-required, auth-required | `question` |
//! | completed | `reply`, the artifacts as attachments |
//! | failed, rejected, canceled | `close` with that outcome |

use super::{Attachment, Kind, Outcome, named_enum};

named_enum! {
    /// A remote A2A task's state, as liaison records it (the proto's `TaskState` without its
    /// prefix).
    pub enum RemoteState ("remote task state") {
        Submitted = "submitted",
        Working = "working",
        InputRequired = "input-required",
        AuthRequired = "auth-required",
        Completed = "completed",
        Failed = "failed",
        Rejected = "rejected",
        Canceled = "canceled",
    }
}

impl RemoteState {
    /// No further change will come: following stops.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            RemoteState::Completed
                | RemoteState::Failed
                | RemoteState::Rejected
                | RemoteState::Canceled
        )
    }

    /// The remote waits for the next message of the same task (a `reply` in the thread).
    pub fn is_interrupted(self) -> bool {
        matches!(self, RemoteState::InputRequired | RemoteState::AuthRequired)
    }

    /// The kind (and, for a close, the outcome) of the message the thread gets when the remote
    /// task reaches this state; none for `submitted`.
    pub fn message(self) -> Option<(Kind, Option<Outcome>)> {
        Some(match self {
            RemoteState::Submitted => return None,
            RemoteState::Working => (Kind::Announce, None),
            RemoteState::InputRequired | RemoteState::AuthRequired => (Kind::Question, None),
            RemoteState::Completed => (Kind::Reply, None),
            RemoteState::Failed => (Kind::Close, Some(Outcome::Failed)),
            RemoteState::Rejected => (Kind::Close, Some(Outcome::Rejected)),
            RemoteState::Canceled => (Kind::Close, Some(Outcome::Canceled)),
        })
    }
}

named_enum! {
    /// How liaison learns of a remote task's changes, chosen from the remote's card: a stream
    /// (SubscribeToTask, resumed after a disconnect or a restart) when it streams, else push
    /// notifications to liaison's own receiver, else polling GetTask with backoff.
    pub enum FollowMode ("follow mode") {
        Stream = "stream",
        Push = "push",
        Poll = "poll",
    }
}

impl FollowMode {
    pub fn choose(streaming: bool, push: bool) -> FollowMode {
        match (streaming, push) {
            (true, _) => FollowMode::Stream,
            (false, true) => FollowMode::Push,
            (false, false) => FollowMode::Poll,
        }
    }
}

/// One look at a remote task, in liaison's terms (the A2A conversion is `crate::remote::observe`).
#[derive(Debug, Clone)]
pub struct RemoteUpdate {
    pub task_id: String,
    pub state: RemoteState,
    /// The text of the status message (or of a direct message answer).
    pub text: String,
    /// Tells this event apart from others of the same state: the status message's id, else its
    /// timestamp, else a hash of what it says.
    pub event_key: String,
    /// The status message's files and data, then a completed task's artifacts (their text parts
    /// are joined into the body).
    pub attachments: Vec<Attachment>,
    /// A completed task's structured result, when another liaison's reply carried one in its
    /// envelope (SPEC §4).
    pub result: Option<super::ReplyResult>,
}

/// The name the shipped Agent Card gives a liaison server. Left as it is, every other liaison it
/// federates with labels it "remote agent liaison": the server warns at start, and a remote whose
/// card still has it is shown by the name its admin registered it under.
pub const DEFAULT_CARD_NAME: &str = "liaison";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_maps_to_the_message_the_spec_names() {
        use RemoteState as S;
        assert_eq!(S::Submitted.message(), None);
        assert_eq!(S::Working.message(), Some((Kind::Announce, None)));
        assert_eq!(S::InputRequired.message(), Some((Kind::Question, None)));
        assert_eq!(S::AuthRequired.message(), Some((Kind::Question, None)));
        assert_eq!(S::Completed.message(), Some((Kind::Reply, None)));
        assert_eq!(
            S::Failed.message(),
            Some((Kind::Close, Some(Outcome::Failed)))
        );
        assert_eq!(
            S::Rejected.message(),
            Some((Kind::Close, Some(Outcome::Rejected)))
        );
        assert_eq!(
            S::Canceled.message(),
            Some((Kind::Close, Some(Outcome::Canceled)))
        );
        for s in S::ALL {
            assert_eq!(
                s.is_terminal(),
                matches!(s.message(), Some((Kind::Close, _)) | Some((Kind::Reply, _)))
            );
            assert!(!(s.is_terminal() && s.is_interrupted()));
        }
    }

    #[test]
    fn streaming_beats_push_beats_polling() {
        assert_eq!(FollowMode::choose(true, true), FollowMode::Stream);
        assert_eq!(FollowMode::choose(false, true), FollowMode::Push);
        assert_eq!(FollowMode::choose(false, false), FollowMode::Poll);
    }
}
