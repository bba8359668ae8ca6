//! Pure types and rules of liaison: identifiers, people, channels, messages, the derived thread state
//! machine, approvals, the server label and the rules for showing untrusted text.
//!
//! Nothing here does I/O, awaits, or knows about sqlx, axum or any wire format. Constrained values are
//! newtypes built with `parse`, so a value of these types is valid by construction.

pub mod address;
mod approval;
mod channel;
pub mod client_settings;
mod connection;
pub mod delivery;
mod digest;
pub mod duration;
mod envelope;
mod ids;
mod label;
mod message;
pub mod oauth;
mod person;
pub mod personal;
mod presence;
mod remote;
mod result;
pub mod secret;
mod task;
pub mod text;
mod thread;
mod time;
pub mod tool_check;

pub use approval::{
    ApprovalEvent, ApprovalKind, ApprovalRefusal, ApprovalState, Decision, DecisionPath,
    fingerprint, outbound_fingerprint,
};
pub use channel::{APPROVAL_TTL_RANGE, ApprovalPolicy, PolicyChange, PolicyDecision};
pub use connection::{
    Address, ConnectionRights, PERSON_READER, Reader, RightLevel, WITHDRAWN_READER,
    split_consumer_key,
};
pub use digest::{hex, sha256_hex};
pub use envelope::{ENVELOPE_EXTENSION, Envelope, RESULT_MEDIA_TYPE};
pub use ids::{ApprovalId, ChannelName, ConnectionSlug, MessageId, PersonId, ThreadId};
pub use label::{BODY_PREFIX, Label, LabelLanguage, render_for_agent};
pub use message::{
    Attachment, Impact, Kind, MAX_ATTACHMENT_BYTES, MAX_ATTACHMENTS, MAX_BODY_BYTES,
    MAX_SUBJECT_CHARS, Outcome,
};
pub use person::{AgentIdentity, PersonKind, Right, Rights, SERVER_PERSON, Scope, Scopes};
pub use presence::{LeaseMode, Transition};
pub use remote::{DEFAULT_CARD_NAME, FollowMode, RemoteState, RemoteUpdate};
pub use result::{
    Check, CheckOutcome, MAX_RESULT_ITEM_CHARS, MAX_RESULT_ITEMS, MAX_RESULT_SUMMARY_CHARS,
    MAX_RESULT_URL_BYTES, ReplyResult, ResultLink, ResultStatus, WrittenBy,
};
pub use task::{TaskEvent, TaskState, TaskTerminal};
pub use thread::{ThreadState, TransitionError};
pub use time::Timestamp;

/// Why a value could not be parsed; the message is meant for the caller, who sent it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

impl ParseError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Implements `FromStr`, `Display`, `as_str` and serde for a unit enum from one list of names.
macro_rules! named_enum {
    ($(#[$meta:meta])* $vis:vis enum $name:ident ($what:literal) { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name { $($(#[$vmeta])* $variant),+ }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::domain::ParseError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err($crate::domain::ParseError::new(format!(
                        "unknown {} {:?}; expected one of: {}",
                        $what, other, [$($text),+].join(", ")
                    ))),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use named_enum;
