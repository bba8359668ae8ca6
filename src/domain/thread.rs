//! The derived thread state machine.
//!
//! Nobody sets a thread's state: it follows from its messages. A question, request or handoff makes
//! the thread `open` until someone other than its author replies (`answered`); a `close` ends it for
//! good. Several rounds in one thread are normal: a new question after an answer reopens it.
//!
//! "Someone other than its author" is another person, or (SPEC §4b) another reader of the same
//! person: her command, written by her in person, is answered by her agent's reply, and one of her
//! agents' questions by another of her agents. A writer is a person and the reader it wrote as (a
//! connection's token id, or none for the person's own credentials and for every writer before
//! connections were recorded).

use serde::Serialize;

use super::{Kind, Outcome, PersonId};

/// The state of a thread after the messages seen so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum ThreadState {
    /// The last question, request or handoff (by `asker`) has no later reply from anyone else.
    Open {
        asker: PersonId,
        /// The reader the asker wrote as (her connection), when a connection asked.
        #[serde(skip)]
        asker_reader: Option<String>,
    },
    /// Nothing is awaited.
    Answered,
    /// A `close` was posted; nothing more may be.
    Closed { outcome: Outcome },
}

/// Why a message cannot be posted in a thread in its current state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    #[error("the thread is closed; start a new thread that refers_to it")]
    Closed,
    #[error("a {0} must be posted in an existing thread (give `thread`)")]
    NeedsThread(Kind),
}

impl ThreadState {
    /// The state of a thread opened by a first message of `kind`, written by `author` as
    /// `reader` (her connection; none for the person herself).
    pub fn start(
        kind: Kind,
        author: &PersonId,
        reader: Option<&str>,
    ) -> Result<Self, TransitionError> {
        match kind {
            Kind::Reply | Kind::Close => Err(TransitionError::NeedsThread(kind)),
            Kind::Announce => Ok(ThreadState::Answered),
            Kind::Question | Kind::Request | Kind::Handoff => Ok(ThreadState::Open {
                asker: author.clone(),
                asker_reader: reader.map(str::to_owned),
            }),
        }
    }

    /// The state after one more message, written by `author` as `reader`. `outcome` only
    /// matters for a close (default `done`).
    pub fn apply(
        &self,
        kind: Kind,
        author: &PersonId,
        reader: Option<&str>,
        outcome: Option<Outcome>,
    ) -> Result<Self, TransitionError> {
        if let ThreadState::Closed { .. } = self {
            return Err(TransitionError::Closed);
        }
        Ok(match kind {
            Kind::Close => ThreadState::Closed {
                outcome: outcome.unwrap_or(Outcome::Done),
            },
            Kind::Question | Kind::Request | Kind::Handoff => ThreadState::Open {
                asker: author.clone(),
                asker_reader: reader.map(str::to_owned),
            },
            Kind::Reply => match self {
                ThreadState::Open {
                    asker,
                    asker_reader,
                } if asker != author || asker_reader.as_deref() != reader => ThreadState::Answered,
                other => other.clone(),
            },
            Kind::Announce => self.clone(),
        })
    }

    /// The reader the open thread's asker wrote as, when it was a connection.
    pub fn asker_reader(&self) -> Option<&str> {
        match self {
            ThreadState::Open { asker_reader, .. } => asker_reader.as_deref(),
            _ => None,
        }
    }

    /// `open`, `answered` or `closed`.
    pub fn name(&self) -> &'static str {
        match self {
            ThreadState::Open { .. } => "open",
            ThreadState::Answered => "answered",
            ThreadState::Closed { .. } => "closed",
        }
    }

    /// Rebuilds a state from its stored columns.
    pub fn from_parts(
        name: &str,
        asker: Option<PersonId>,
        asker_reader: Option<String>,
        outcome: Option<Outcome>,
    ) -> Option<Self> {
        match (name, asker, outcome) {
            ("open", Some(asker), _) => Some(ThreadState::Open {
                asker,
                asker_reader,
            }),
            ("answered", _, _) => Some(ThreadState::Answered),
            ("closed", _, Some(outcome)) => Some(ThreadState::Closed { outcome }),
            _ => None,
        }
    }

    /// The stored columns: name, asker, outcome (the asker's reader: [`ThreadState::asker_reader`]).
    pub fn parts(&self) -> (&'static str, Option<&PersonId>, Option<Outcome>) {
        match self {
            ThreadState::Open { asker, .. } => ("open", Some(asker), None),
            ThreadState::Answered => ("answered", None, None),
            ThreadState::Closed { outcome } => ("closed", None, Some(*outcome)),
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The reference model, written from the spec's sentences rather than from `apply`: walk the
    /// whole history each time.
    fn model(history: &[(Kind, usize)]) -> Result<&'static str, ()> {
        let first = history.first().ok_or(())?;
        if matches!(first.0, Kind::Reply | Kind::Close) {
            return Err(());
        }
        if let Some(close) = history.iter().position(|(k, _)| *k == Kind::Close) {
            return if close == history.len() - 1 {
                Ok("closed")
            } else {
                Err(())
            };
        }
        let last_ask = history.iter().rposition(|(k, _)| k.awaits_reply());
        Ok(match last_ask {
            None => "answered",
            Some(i) => {
                let asker = history[i].1;
                let replied = history[i + 1..]
                    .iter()
                    .any(|(k, a)| *k == Kind::Reply && *a != asker);
                if replied { "answered" } else { "open" }
            }
        })
    }

    fn any_kind() -> impl Strategy<Value = Kind> {
        prop::sample::select(Kind::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn derived_state_matches_the_reference_model(
            steps in prop::collection::vec((any_kind(), 0usize..3), 1..24)
        ) {
            let people: Vec<PersonId> = ["alice", "bob", "carol"].iter().map(|p| PersonId::parse(*p).unwrap()).collect();
            let mut state: Option<ThreadState> = None;
            let mut accepted: Vec<(Kind, usize)> = Vec::new();
            for (kind, who) in steps {
                let author = &people[who];
                let next = match &state {
                    None => ThreadState::start(kind, author, None),
                    Some(s) => s.apply(kind, author, None, None),
                };
                let mut candidate = accepted.clone();
                candidate.push((kind, who));
                match (next, model(&candidate)) {
                    (Ok(s), Ok(expected)) => {
                        prop_assert_eq!(s.name(), expected);
                        state = Some(s);
                        accepted = candidate;
                    }
                    (Err(_), Err(())) => {} // refused by both; nothing changes
                    (got, expected) => prop_assert!(false, "history {:?}: got {:?}, model {:?}", candidate, got, expected),
                }
            }
        }
    }

    #[test]
    fn a_reply_by_the_asker_does_not_answer_their_own_question() {
        let alice = PersonId::parse("alice").unwrap();
        let bob = PersonId::parse("bob").unwrap();
        let s = ThreadState::start(Kind::Question, &alice, None).unwrap();
        assert_eq!(
            s.apply(Kind::Reply, &alice, None, None).unwrap().name(),
            "open"
        );
        let answered = s.apply(Kind::Reply, &bob, None, None).unwrap();
        assert_eq!(answered, ThreadState::Answered);
        assert_eq!(
            answered
                .apply(Kind::Request, &bob, None, None)
                .unwrap()
                .name(),
            "open"
        );
        let closed = answered
            .apply(Kind::Close, &bob, None, Some(Outcome::Failed))
            .unwrap();
        assert_eq!(
            closed,
            ThreadState::Closed {
                outcome: Outcome::Failed
            }
        );
        assert_eq!(
            closed.apply(Kind::Announce, &alice, None, None),
            Err(TransitionError::Closed)
        );
    }

    #[test]
    fn another_reader_of_the_same_person_answers_her_question() {
        let alice = PersonId::parse("alice").unwrap();
        // Her command, in person, answered by her connection's reply.
        let s = ThreadState::start(Kind::Request, &alice, None).unwrap();
        assert_eq!(
            s.apply(Kind::Reply, &alice, Some("tok_1"), None).unwrap(),
            ThreadState::Answered
        );
        // Her agent's question: its own reply does not answer it; another agent's, or hers, does.
        let s = ThreadState::start(Kind::Question, &alice, Some("tok_1")).unwrap();
        assert_eq!(s.asker_reader(), Some("tok_1"));
        assert_eq!(
            s.apply(Kind::Reply, &alice, Some("tok_1"), None)
                .unwrap()
                .name(),
            "open"
        );
        assert_eq!(
            s.apply(Kind::Reply, &alice, Some("tok_2"), None).unwrap(),
            ThreadState::Answered
        );
        assert_eq!(
            s.apply(Kind::Reply, &alice, None, None).unwrap(),
            ThreadState::Answered
        );
    }
}
