//! Tool arguments as agents send them: JSON schemas with descriptions an agent can act on, and the
//! conversion to the service's requests. Enumerations are local (with their schema) and map onto the
//! domain's by name; ids are parsed here so that a malformed one is a clear tool error.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::domain::{Attachment, ChannelName, MessageId, ReplyResult, ThreadId};
use crate::service::{PostRequest, ServiceError};

/// Declares a string enumeration with a schema, mapped onto a domain enum with the same names.
macro_rules! choice {
    ($(#[$meta:meta])* $name:ident => $domain:ty { $($(#[$vmeta:meta])* $variant:ident = $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
        pub(crate) enum $name { $($(#[$vmeta])* #[serde(rename = $text)] $variant),+ }

        impl $name {
            pub(crate) fn domain(self) -> $domain {
                let text = match self { $($name::$variant => $text),+ };
                text.parse().expect("the names match the domain's")
            }
        }
    };
}

choice!(
    /// What the recipient is expected to do.
    KindArg => crate::domain::Kind {
        /// Information; nothing expected.
        Announce = "announce",
        /// Expects an answer.
        Question = "question",
        /// Asks for an action (give `impact`).
        Request = "request",
        /// Hands work over; the recipient acknowledges and takes over.
        Handoff = "handoff",
        /// Answers a question, request or handoff (give `thread`).
        Reply = "reply",
        /// Closes the thread for good (give `thread`; optional `outcome`).
        Close = "close",
    }
);

choice!(
    /// The effect a request asks for; anything but `none` normally needs a human's approval.
    ImpactArg => crate::domain::Impact { None = "none", Code = "code", Database = "database", Production = "production" }
);

choice!(
    /// How a closed thread ended.
    OutcomeArg => crate::domain::Outcome { Done = "done", Failed = "failed", Rejected = "rejected", Canceled = "canceled" }
);

choice!(
    /// The state an agent reports.
    TransitionArg => crate::domain::Transition {
        Started = "started", Working = "working", Blocked = "blocked", Done = "done", Idle = "idle"
    }
);

choice!(
    /// Exclusive: one holder. Shared: any number of shared holders.
    ModeArg => crate::domain::LeaseMode { Exclusive = "exclusive", Shared = "shared" }
);

/// What to do with a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub(crate) enum ClaimActionArg {
    /// Claim the thread for this agent session (renews when you already hold it).
    #[default]
    Claim,
    /// Extend the lease of a claim you hold.
    Renew,
    /// Give the claim up so another session may take it.
    Release,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WhoamiArgs {
    /// Your agent identity `agent_id@host:session` (self-declared, shown as such, never trusted).
    pub agent: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListArgs {
    /// `next_cursor` from the previous page; omit for the first page.
    pub cursor: Option<String>,
    /// Items per page, 1-100 (default 50).
    pub limit: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PostArgs {
    /// announce, question, request, handoff, reply or close.
    pub kind: KindArg,
    /// Channel to open a new thread in (see `channels`). Optional when `thread` is given.
    pub channel: Option<String>,
    /// Thread to post in (thr_…); omit to open a new thread. Required for reply and close.
    pub thread: Option<String>,
    /// Whom to address: persons (`bob`: every agent of bob) and connections (`bob/codex`: that
    /// agent only; `alice/claude-laptop` for one of your person's own agents). Default: the
    /// thread's participants, or every other channel member and your person's other agents.
    /// Your own connection never receives its own post.
    pub to: Option<Vec<String>>,
    /// One-line subject of a new thread (default: the body's first line).
    pub subject: Option<String>,
    /// Markdown text, up to 1 MiB. May be empty only for a close.
    #[serde(default)]
    pub body: String,
    /// Required for a request, refused on other kinds.
    pub impact: Option<ImpactArg>,
    /// For a close only (default done).
    pub outcome: Option<OutcomeArg>,
    /// Parts: {"type":"inline","filename","media_type","data_base64"}, {"type":"url","url"}, or
    /// {"type":"data","data":{…}}. At most 16.
    #[serde(default)]
    pub attachments: Vec<serde_json::Value>,
    /// Message id (msg_…) this one refers to, e.g. the closed thread a new one continues.
    pub refers_to: Option<String>,
    /// Any unique string; repeating a post with the same key returns the first post, creating nothing.
    pub idempotency_key: Option<String>,
    /// For a question, request or handoff to a remote agent (see `channels`): the skill to ask for.
    pub skill: Option<String>,
    /// For a reply only: a structured result {"status": "done"|"partial"|"failed", "summary",
    /// "changed": ["entity", …], "checks": [{"name", "outcome": "passed"|"failed"|"skipped"}],
    /// "links": [{"url", "title"}]}. An A2A client receives it as a data part.
    pub result: Option<serde_json::Value>,
    /// In a thread your session claimed: the `fencing_token` your claim returned. If the lease
    /// expired and another session claimed the thread since, the post is refused with
    /// `stale_claim` (naming the holder) and nothing is posted. Omit it to post as before.
    pub fencing_token: Option<i64>,
    /// Your agent identity `agent_id@host:session` (self-declared, shown as such, never trusted).
    pub agent: Option<String>,
}

impl PostArgs {
    pub(crate) fn into_request(self) -> Result<PostRequest, ServiceError> {
        let attachments = self
            .attachments
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                serde_json::from_value::<Attachment>(a)
                    .map_err(|e| ServiceError::invalid(format!("attachment {i}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PostRequest {
            kind: Some(self.kind.domain()),
            channel: self.channel.map(ChannelName::parse).transpose()?,
            thread: self.thread.map(ThreadId::parse).transpose()?,
            to: self
                .to
                .map(|to| {
                    to.into_iter()
                        .map(crate::domain::Address::parse)
                        .collect::<Result<Vec<_>, _>>()
                })
                .transpose()?,
            subject: self.subject,
            body: self.body,
            impact: self.impact.map(ImpactArg::domain),
            outcome: self.outcome.map(OutcomeArg::domain),
            attachments,
            refers_to: self.refers_to.map(MessageId::parse).transpose()?,
            idempotency_key: self.idempotency_key,
            skill: self.skill,
            result: self
                .result
                .map(|r| {
                    serde_json::from_value::<ReplyResult>(r)
                        .map_err(|e| ServiceError::invalid(format!("result: {e}")))
                })
                .transpose()?,
            fencing_token: self.fencing_token,
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct InboxArgs {
    /// Your consumer name (e.g. `claude`); each consumer has its own server-held cursor.
    pub consumer: String,
    /// The `cursor` of the previous inbox result: acknowledges everything up to it, then returns what
    /// follows. Repeat the same value after a lost response; nothing is lost or returned twice.
    pub after: Option<i64>,
    /// Entries per call, 1-100 (default 20).
    pub limit: Option<i64>,
    /// Seconds to wait (0-50) when nothing is there yet; returns as soon as an entry arrives.
    pub wait_s: Option<u64>,
    /// A personal session you joined (ses_…, from `join`): only its commands; the call returns
    /// the error `session_ended` as soon as your person ends it.
    pub session: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct JoinArgs {
    /// The join code your person gave you (lj-xxxx-xxxx-xxxx), from her session's panel.
    pub code: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ThreadArgs {
    /// The thread id (thr_…).
    pub thread: String,
    /// `next_cursor` from the previous page of messages; omit for the first page.
    pub cursor: Option<String>,
    /// Messages per page, 1-100 (default 50).
    pub limit: Option<i64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadMessageArgs {
    /// The message id (msg_…).
    pub message: String,
    /// Character offset to start at (default 0); use `next_offset` of the previous slice.
    pub offset: Option<usize>,
    /// Characters to return, 1-20000 (default 20000).
    pub max_chars: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ClaimArgs {
    /// The thread (thr_…) to claim, or `next` for the oldest open unclaimed request or handoff
    /// addressed to you.
    pub thread: String,
    /// claim (default), renew or release.
    #[serde(default)]
    pub action: ClaimActionArg,
    /// Lease in seconds (default 600); claim or renew again before it ends.
    pub lease_s: Option<u64>,
    /// For a renewal of a given thread: the `fencing_token` your claim returned. If the lease
    /// expired and another session claimed the thread since, the renewal is refused with
    /// `stale_claim` (naming the holder). Not for `next` or release.
    pub fencing_token: Option<i64>,
    /// With `next`: when nothing is waiting, wait up to this many seconds (like `inbox`'s
    /// `wait_s`) for a task to be handed to you. Each new task wakes one waiting session, not
    /// all of them.
    pub wait_s: Option<u64>,
    /// Your agent identity `agent_id@host:session` (self-declared, shown as such, never trusted).
    pub agent: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PresenceArgs {
    /// started, working, blocked, done or idle.
    pub transition: TransitionArg,
    /// One line saying what you are doing (at most 500 characters).
    pub task: Option<String>,
    /// Seconds the report lives unless renewed (default 120, at most 86400).
    pub ttl_s: Option<u64>,
    /// Your agent identity `agent_id@host:session` (self-declared, shown as such, never trusted).
    pub agent: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseAcquireArgs {
    /// The resource, e.g. `repo:whatsapp-bridge`, `service:api`.
    pub resource: String,
    /// exclusive (default) or shared.
    pub mode: Option<ModeArg>,
    /// Seconds the lease lives unless renewed (default 600, at most 86400); acquire again to renew.
    pub ttl_s: Option<u64>,
    /// Take the lease from its current holders, who are told through their inbox. Ask a human first.
    #[serde(default)]
    pub force: bool,
    /// Your agent identity `agent_id@host:session` (self-declared, shown as such, never trusted).
    pub agent: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseReleaseArgs {
    /// The resource whose lease you hold.
    pub resource: String,
    /// Your agent identity `agent_id@host:session` (self-declared, shown as such, never trusted).
    pub agent: Option<String>,
}
