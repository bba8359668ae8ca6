//! The A2A task state of a thread opened by an external party, derived like the thread state: from
//! the messages posted in it (and its claim), never set by hand.
//!
//! | event | state after |
//! |---|---|
//! | the party opens the thread | `submitted` |
//! | an internal agent claims it | `working` (from `submitted`) |
//! | an internal `announce` | `working` |
//! | an internal `question`, `request` or `handoff` | `input_required` |
//! | an internal `reply` | `completed` |
//! | the party answers (`reply`) or adds a message | `working` |
//! | a `close` | `completed` / `failed` / `rejected` / `canceled` by outcome |
//!
//! Terminal states accept nothing more.

use serde::Serialize;

use super::{Kind, Outcome, named_enum};

named_enum! {
    /// The A2A task states liaison produces.
    pub enum TaskState ("task state") {
        Submitted = "submitted",
        Working = "working",
        InputRequired = "input_required",
        Completed = "completed",
        Failed = "failed",
        Canceled = "canceled",
        Rejected = "rejected",
    }
}

/// Something that happened to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TaskEvent {
    /// A message was posted; `by_party` tells the external party from the team's agents.
    Posted {
        kind: Kind,
        by_party: bool,
        outcome: Option<Outcome>,
    },
    /// An agent session of the team claimed the task.
    Claimed,
}

/// A message or claim on a task that has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the task is {0}; it accepts nothing more (start a new task in the same context)")]
pub struct TaskTerminal(pub TaskState);

impl TaskState {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// Interrupted: the task waits for the party.
    pub fn is_interrupted(self) -> bool {
        self == TaskState::InputRequired
    }

    pub fn apply(self, event: TaskEvent) -> Result<TaskState, TaskTerminal> {
        if self.is_terminal() {
            return Err(TaskTerminal(self));
        }
        Ok(match event {
            TaskEvent::Claimed if self == TaskState::Submitted => TaskState::Working,
            TaskEvent::Claimed => self,
            TaskEvent::Posted {
                kind: Kind::Close,
                outcome,
                ..
            } => match outcome.unwrap_or(Outcome::Done) {
                Outcome::Done => TaskState::Completed,
                Outcome::Failed => TaskState::Failed,
                Outcome::Rejected => TaskState::Rejected,
                Outcome::Canceled => TaskState::Canceled,
            },
            TaskEvent::Posted { by_party: true, .. } => match self {
                TaskState::Submitted => TaskState::Submitted,
                _ => TaskState::Working,
            },
            TaskEvent::Posted {
                kind,
                by_party: false,
                ..
            } => match kind {
                Kind::Announce => TaskState::Working,
                Kind::Question | Kind::Request | Kind::Handoff => TaskState::InputRequired,
                Kind::Reply => TaskState::Completed,
                Kind::Close => unreachable!("matched above"),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn internal(kind: Kind) -> TaskEvent {
        TaskEvent::Posted {
            kind,
            by_party: false,
            outcome: None,
        }
    }

    #[test]
    fn a_delegated_task_goes_submitted_working_input_required_completed() {
        let s = TaskState::Submitted;
        let s = s.apply(TaskEvent::Claimed).unwrap();
        assert_eq!(s, TaskState::Working);
        let s = s.apply(internal(Kind::Announce)).unwrap();
        assert_eq!(s, TaskState::Working);
        let s = s.apply(internal(Kind::Question)).unwrap();
        assert!(s.is_interrupted());
        let s = s
            .apply(TaskEvent::Posted {
                kind: Kind::Reply,
                by_party: true,
                outcome: None,
            })
            .unwrap();
        assert_eq!(s, TaskState::Working);
        let s = s.apply(internal(Kind::Reply)).unwrap();
        assert_eq!(s, TaskState::Completed);
        assert_eq!(
            s.apply(TaskEvent::Claimed),
            Err(TaskTerminal(TaskState::Completed))
        );
    }

    #[test]
    fn close_outcomes_map_to_terminal_states() {
        for (outcome, state) in [
            (Outcome::Done, TaskState::Completed),
            (Outcome::Failed, TaskState::Failed),
            (Outcome::Rejected, TaskState::Rejected),
            (Outcome::Canceled, TaskState::Canceled),
        ] {
            let e = TaskEvent::Posted {
                kind: Kind::Close,
                by_party: true,
                outcome: Some(outcome),
            };
            assert_eq!(TaskState::Working.apply(e).unwrap(), state);
            assert!(state.is_terminal());
        }
    }
}
