//! A person's sessions with her own agents (SPEC §4b): the private room where she, in person,
//! writes **commands** to one of her connections or to "any of my agents", and watches each
//! one's lifecycle; the join code an agent uses to bind itself to the room; the end of a session.
//!
//! Choices where the spec is silent, written down here (and in the members' guide):
//!
//! - **Where commands live.** A command is a `request` thread in her personal channel `@alice`
//!   (made the first time she opens a session; she is its only member, admins cannot change it),
//!   addressed to the session's connection (`alice/claude-laptop`) or to all her connections
//!   (`alice`). So claims, receipts, approvals, progress notes, labels and the live console work
//!   for commands as for every thread; her connection's rights decide its approval
//!   (`service::rights`): `allowed` needs none, `confirm` is her "allow once", `off` is refused
//!   at posting.
//! - **Who writes commands.** Only she, in person: the console, or a token with scope `human`
//!   (another application acting as her through `/api/v1`). Her agents cannot write commands
//!   (that would forge her instruction); they reply, ask and report in the command's thread.
//! - **Joining.** A join code is single use, lives [`JOIN_CODE_TTL_S`], and is stored as a hash;
//!   a new code kills the old one. `join` binds the calling connection (the session's own
//!   connection only, when the session is with one) and answers the session, its pending
//!   commands and the consumer to read it with: the session id itself, so that reading the
//!   session never moves the cursor of the agent's everyday consumer. An unknown, foreign, used
//!   or expired code, or one of an ended session, answers the same `not_found`.
//! - **Reading a session.** `inbox` with `session` returns only that session's entries, and only
//!   to a connection that joined it; once the session ends, a waiting call returns
//!   `session_ended` at once and every later call with it is refused the same way.
//! - **Expiry.** Each command has a time to be picked up (claimed): default 10 minutes, 1 minute
//!   to 1 day. Past it, unclaimed, the sweep withdraws it (no inbox shows it any more, its
//!   thread closed as `canceled`, the timeline says `expired`); a claim after the deadline is
//!   refused and withdraws it at once. A command claimed once never expires. Ending a session
//!   withdraws its unclaimed commands the same way.
//! - **After the end.** Her connections can no longer post or claim in an ended session's
//!   commands (`session_ended`); she still can (to close one), and everything stays readable.

use serde::{Deserialize, Serialize};

use super::command_timeline::{CommandView, context_attachment};
use super::{Caller, ErrorCode, Result, Service, ServiceError, input};
use crate::domain::personal::{
    COMMAND_TTL_RANGE, CommandContext, DEFAULT_COMMAND_TTL_S, JOIN_CODE_TTL_S, MAX_SESSION_TITLE,
    SessionId, new_join_code, normalize_join_code,
};
use crate::domain::{
    Address, ApprovalPolicy, Attachment, ChannelName, ConnectionSlug, Impact, Kind, Rights,
    ThreadId, ThreadState, Timestamp, WrittenBy, text,
};
use crate::store::{
    ChannelRecord, ConfirmationRecord, JoinAttempt, MemberRecord, NewCommand, NewPersonalSession,
    PersonalSessionRecord, ThreadRecord,
};

/// Most sessions a person may have open at once.
pub const MAX_OPEN_SESSIONS: i64 = 20;
/// Most commands a session view shows (the newest).
pub const COMMANDS_SHOWN: usize = 50;
/// How many commands the sweep withdraws per round.
const EXPIRY_BATCH: i64 = 100;

/// What opening a session asks for.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSpec {
    /// One of her connections; none: any of her agents.
    #[serde(default)]
    pub connection: Option<ConnectionSlug>,
    #[serde(default)]
    pub title: Option<String>,
}

/// A command as she writes it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CommandSpec {
    /// What she asks, in her words: delivered to her agent as her instruction.
    pub instruction: String,
    /// A short subject (default: the instruction's first line).
    #[serde(default)]
    pub subject: Option<String>,
    /// The effect it may have (default `none`); her connection's rights decide what follows.
    #[serde(default)]
    pub impact: Option<Impact>,
    /// Where she was: delivered as fenced data, never as her instruction.
    #[serde(default)]
    pub context: Option<CommandContext>,
    /// Seconds an agent has to pick it up (default 600; 60-86400).
    #[serde(default)]
    pub expires_in_s: Option<i64>,
    /// Files, as fenced data.
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    /// A retry with the same key is answered with the first command.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// A connection that joined a session.
#[derive(Debug, Clone, Serialize)]
pub struct SessionMember {
    /// Its name now; none when it was revoked since.
    pub connection: Option<ConnectionSlug>,
    pub joined_at: Timestamp,
}

/// A session as its person sees it in lists.
#[derive(Debug, Clone, Serialize)]
pub struct SessionSummary {
    pub id: SessionId,
    pub title: String,
    /// `alice/claude-laptop`, or `alice` for any of her agents.
    pub with: Address,
    /// `open` or `ended`.
    pub state: &'static str,
    pub created_at: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_at: Option<Timestamp>,
    /// Until when the live join code works, while there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code_expires_at: Option<Timestamp>,
    pub joined: Vec<SessionMember>,
}

/// A session with its commands.
#[derive(Debug, Clone, Serialize)]
pub struct SessionView {
    #[serde(flatten)]
    pub session: SessionSummary,
    pub channel: ChannelName,
    /// The newest [`COMMANDS_SHOWN`] commands, oldest first.
    pub commands: Vec<CommandView>,
    /// True when older commands are not shown.
    pub more_commands: bool,
    /// Her agents' tool calls waiting for her "allow once" (SPEC §5b): of the session's
    /// connection, or of all hers for "any of my agents"; newest first.
    pub confirmations: Vec<ConfirmationRecord>,
}

/// A new join code: shown once.
#[derive(Debug, Clone, Serialize)]
pub struct JoinCode {
    pub code: String,
    pub expires_at: Timestamp,
    /// The start prompt to paste into the agent (SPEC §4b).
    pub prompt: String,
}

/// A command an agent that joined may pick up.
#[derive(Debug, Clone, Serialize)]
pub struct PendingCommand {
    pub thread: ThreadId,
    pub subject: String,
    pub pickup_by: Timestamp,
}

/// What `join` answers.
#[derive(Debug, Clone, Serialize)]
pub struct Joined {
    pub session: SessionSummary,
    pub channel: ChannelName,
    /// Read the session with `inbox(consumer = this, session = session.id)`.
    pub consumer: String,
    /// Where that consumer stands (pass as `after`).
    pub cursor: i64,
    /// Commands nobody claimed yet, oldest first.
    pub pending: Vec<PendingCommand>,
}

/// The start prompt for a code (SPEC §4b).
pub fn start_prompt(code: &str) -> String {
    format!(
        "Join my liaison session with code {code}: call the liaison MCP tool `join` with this code. \
         Then wait for commands with `inbox` (the consumer and session `join` returns, wait_s 50). \
         Run each new command once: claim it, then report status, questions, results and errors in \
         its thread with `post`. Keep waiting until I explicitly ask you to stop or the session ends."
    )
}

fn ended(id: &SessionId) -> ServiceError {
    ServiceError::new(
        ErrorCode::SessionEnded,
        format!("session {id} has ended: nothing more is sent or accepted in it"),
    )
}

/// Only the person herself (the console, a `human` token) runs her sessions.
fn in_person(caller: &Caller) -> Result<()> {
    caller.require_participant()?;
    if caller.connection.is_some() || caller.writes_as() != WrittenBy::Human {
        return Err(ServiceError::forbidden(
            "sessions with your agents are opened and written to by you in person: the console, \
             or a token with scope `human`; an agent token cannot",
        ));
    }
    Ok(())
}

impl Service {
    /// Opens a session with one of her connections (`spec.connection`) or any of her agents.
    pub async fn open_session(&self, caller: &Caller, spec: SessionSpec) -> Result<SessionView> {
        in_person(caller)?;
        input::storable("session", &spec)?;
        let token = match &spec.connection {
            Some(name) => Some(
                self.connection_named(caller.id(), name)
                    .await?
                    .ok_or_else(|| ServiceError::not_found("connection", name))?
                    .id,
            ),
            None => None,
        };
        let title = match spec.title.as_deref().map(str::trim) {
            Some(t)
                if t.chars().count() > MAX_SESSION_TITLE || t.chars().any(text::is_line_break) =>
            {
                return Err(ServiceError::invalid(format!(
                    "title must be one line of at most {MAX_SESSION_TITLE} characters"
                )));
            }
            Some(t) if !t.is_empty() => t.to_owned(),
            _ => match &spec.connection {
                Some(c) => format!("With {c}"),
                None => "With any of my agents".to_owned(),
            },
        };
        let open = self.inner.store.open_session_count(caller.id()).await?;
        if open >= MAX_OPEN_SESSIONS {
            return Err(ServiceError::new(
                ErrorCode::TooManySessions,
                format!(
                    "you have {open} open sessions, the most there may be: end one you no longer use"
                ),
            ));
        }
        let now = self.now();
        let id = SessionId::generate();
        let channel = ChannelRecord {
            name: ChannelName::personal(caller.id()),
            description: "Her sessions with her own agents".into(),
            policy: ApprovalPolicy::default(),
            created_at: now,
            members: vec![MemberRecord {
                person: caller.id().clone(),
                rights: Rights::all(),
            }],
            removed_at: None,
        };
        self.inner
            .store
            .open_personal_session(
                NewPersonalSession {
                    id: id.clone(),
                    person: caller.id().clone(),
                    connection: token,
                    title,
                    created_at: now,
                },
                channel,
            )
            .await?;
        self.directory_changed();
        tracing::info!(session = %id, person = %caller.id(), "Personal session opened.");
        self.session(caller, &id).await
    }

    /// Her sessions, newest first.
    pub async fn sessions(&self, caller: &Caller) -> Result<Vec<SessionSummary>> {
        in_person(caller)?;
        let mut out = Vec::new();
        for s in self.inner.store.personal_sessions(caller.id()).await? {
            out.push(self.summary(&s).await?);
        }
        Ok(out)
    }

    /// One of her sessions with its commands' lifecycles. Unknown and foreign look the same.
    pub async fn session(&self, caller: &Caller, id: &SessionId) -> Result<SessionView> {
        in_person(caller)?;
        let s = self.own_session(caller, id).await?;
        let mut all = self.inner.store.session_commands(id).await?;
        let more = all.len() > COMMANDS_SHOWN;
        let all = all.split_off(all.len().saturating_sub(COMMANDS_SHOWN));
        let mut commands = Vec::with_capacity(all.len());
        for (c, t) in all {
            commands.push(self.command_view(caller, c, t).await?);
        }
        let mut confirmations = self
            .inner
            .store
            .pending_confirmations(caller.id(), self.now())
            .await?;
        if let Some(token) = &s.connection {
            confirmations.retain(|c| &c.credential == token);
        }
        Ok(SessionView {
            session: self.summary(&s).await?,
            channel: ChannelName::personal(caller.id()),
            commands,
            more_commands: more,
            confirmations,
        })
    }

    /// A new join code for one of her open sessions (the previous one dies).
    pub async fn new_join_code(&self, caller: &Caller, id: &SessionId) -> Result<JoinCode> {
        in_person(caller)?;
        let s = self.own_session(caller, id).await?;
        if s.ended_at.is_some() {
            return Err(ended(id));
        }
        let code = new_join_code();
        let expires_at = self.now().plus_secs(JOIN_CODE_TTL_S as u64);
        let stored = self
            .inner
            .store
            .set_join_code(
                id.clone(),
                caller.id().clone(),
                crate::domain::sha256_hex(code.as_bytes()),
                expires_at,
            )
            .await?;
        if !stored {
            return Err(ended(id));
        }
        self.inner
            .bus
            .publish(&crate::bus::Topic::seen(caller.id()));
        Ok(JoinCode {
            prompt: start_prompt(&code),
            code,
            expires_at,
        })
    }

    /// `join(code)`: binds the calling connection to the session the code opens.
    pub async fn join_session(&self, caller: &Caller, code: &str) -> Result<Joined> {
        caller.require_participant()?;
        let Some(connection) = &caller.connection else {
            return Err(ServiceError::forbidden(
                "join with one of your agent connections (an agent token you issued on Connect)",
            ));
        };
        let unknown = || ServiceError::not_found("join code", "given");
        let code = normalize_join_code(code).ok_or_else(unknown)?;
        let attempt = self
            .inner
            .store
            .join_personal_session(
                crate::domain::sha256_hex(code.as_bytes()),
                caller.id().clone(),
                connection.token.clone(),
                self.now(),
            )
            .await?;
        let s = match attempt {
            JoinAttempt::Joined(s) => s,
            JoinAttempt::Unknown => return Err(unknown()),
            JoinAttempt::OtherConnection(s) => {
                let with = self.summary(&s).await?.with;
                return Err(ServiceError::forbidden(format!(
                    "this session is with {with}, not with your connection {}: join from that \
                     connection, or ask for a session with any of your agents",
                    connection.name
                )));
            }
        };
        self.inner
            .bus
            .publish(&crate::bus::Topic::seen(caller.id()));
        tracing::info!(session = %s.id, connection = %connection.name, "Connection joined a personal session.");
        let consumer = s.id.to_string();
        let reader = caller.reader();
        let position = self
            .inner
            .store
            .inbox_position(caller.id(), &reader.consumer_key(&consumer), &consumer)
            .await?;
        let pending = self
            .inner
            .store
            .session_commands(&s.id)
            .await?
            .into_iter()
            .filter(|(c, t)| {
                c.claimed_at.is_none()
                    && c.expired_at.is_none()
                    && !matches!(t.state, ThreadState::Closed { .. })
            })
            .map(|(c, t)| PendingCommand {
                thread: t.id,
                subject: t.subject,
                pickup_by: c.pickup_by,
            })
            .collect();
        Ok(Joined {
            session: self.summary(&s).await?,
            channel: ChannelName::personal(caller.id()),
            consumer,
            cursor: position.acked,
            pending,
        })
    }

    /// Ends one of her sessions at once: waiting reads of it return `session_ended`, its code
    /// and bindings die, its unclaimed commands are withdrawn.
    pub async fn end_session(&self, caller: &Caller, id: &SessionId) -> Result<SessionView> {
        in_person(caller)?;
        let s = self.own_session(caller, id).await?;
        if s.ended_at.is_some() {
            return Err(ended(id));
        }
        let withdrawn = self
            .inner
            .store
            .end_personal_session(id.clone(), caller.id().clone(), self.now())
            .await?
            .ok_or_else(|| ended(id))?;
        // Her waiting agents (and her console) wake and find the session ended.
        self.inner
            .bus
            .publish(&crate::bus::Topic::inbox(caller.id()));
        tracing::info!(session = %id, withdrawn = withdrawn.len(), "Personal session ended.");
        self.session(caller, id).await
    }

    /// Writes a command in one of her open sessions.
    pub async fn command(
        &self,
        caller: &Caller,
        id: &SessionId,
        spec: CommandSpec,
    ) -> Result<super::PostReceipt> {
        in_person(caller)?;
        let s = self.own_session(caller, id).await?;
        if s.ended_at.is_some() {
            return Err(ended(id));
        }
        let ttl = spec.expires_in_s.unwrap_or(DEFAULT_COMMAND_TTL_S);
        if !COMMAND_TTL_RANGE.contains(&ttl) {
            return Err(ServiceError::invalid(format!(
                "expires_in_s {ttl} is out of range: use {}-{} seconds",
                COMMAND_TTL_RANGE.start(),
                COMMAND_TTL_RANGE.end()
            )));
        }
        let mut attachments = spec.attachments;
        if let Some(context) = spec.context.filter(|c| !c.is_empty()) {
            context
                .check()
                .map_err(|e| ServiceError::invalid(e.to_string()))?;
            attachments.push(context_attachment(&context));
        }
        let to = match &s.connection {
            Some(token) => {
                let name = self.connection_name(token).await?.ok_or_else(|| {
                    ServiceError::invalid(
                        "the connection this session is with was revoked: end this session and \
                         open one with another connection",
                    )
                })?;
                Address::Connection(caller.id().clone(), name)
            }
            None => Address::Person(caller.id().clone()),
        };
        let req = super::PostRequest {
            kind: Some(Kind::Request),
            channel: Some(ChannelName::personal(caller.id())),
            to: Some(vec![to]),
            subject: spec.subject,
            body: spec.instruction,
            impact: Some(spec.impact.unwrap_or(Impact::None)),
            attachments,
            idempotency_key: spec.idempotency_key,
            ..Default::default()
        };
        let command = NewCommand {
            session: id.clone(),
            pickup_by: self.now().plus_secs(ttl as u64),
        };
        self.post_command(caller, req, command).await
    }

    /// What may happen in a thread of her personal channel: in an ended session, her
    /// connections can no longer post or claim (`session_ended`); a command withdrawn unclaimed
    /// cannot be claimed. Called by posts and claims for threads of personal channels only.
    pub(super) async fn command_gate(
        &self,
        caller: &Caller,
        thread: &ThreadRecord,
        claiming: bool,
    ) -> Result<()> {
        if thread.channel.personal_owner().is_none() {
            return Ok(());
        }
        let Some(c) = self.inner.store.command(&thread.id).await? else {
            return Ok(());
        };
        if claiming && c.expired_at.is_some() {
            return Err(ServiceError::new(
                ErrorCode::NotClaimable,
                format!(
                    "command {} expired before anyone picked it up and was withdrawn; its person \
                     can send it again",
                    thread.id
                ),
            ));
        }
        if caller.connection.is_some() {
            let s = self.inner.store.personal_session(&c.session).await?;
            if s.is_none_or(|s| s.ended_at.is_some()) {
                return Err(ended(&c.session));
            }
        }
        Ok(())
    }

    /// For `inbox` with a session: the session is the caller's, its connection joined it, and it
    /// has not ended; anything else is `session_ended` (a session she may not read, unknown).
    pub(super) async fn readable_session(&self, caller: &Caller, id: &SessionId) -> Result<()> {
        let s = self.inner.store.personal_session(id).await?;
        let Some(s) = s.filter(|s| &s.person == caller.id()) else {
            return Err(ServiceError::not_found("session", id));
        };
        let joined = caller
            .connection
            .as_ref()
            .is_some_and(|c| s.joined.iter().any(|(t, _)| t == &c.token));
        if !joined {
            return Err(ServiceError::not_found("session", id));
        }
        if s.ended_at.is_some() {
            return Err(ended(id));
        }
        Ok(())
    }

    /// Withdraws every command whose pickup deadline passed unclaimed. Returns how many. The
    /// server runs it every second; tests call it after moving the clock.
    pub async fn expire_commands(&self) -> Result<usize> {
        let mut expired = 0;
        loop {
            let now = self.now();
            let due = self.inner.store.due_commands(now, EXPIRY_BATCH).await?;
            for (thread, person) in &due {
                if self.inner.store.expire_command(thread.clone(), now).await? {
                    expired += 1;
                    tracing::info!(thread = %thread, "Command expired unclaimed; withdrawn.");
                    self.inner.bus.publish(&crate::bus::Topic::inbox(person));
                    self.thread_id_changed(thread).await?;
                }
            }
            if (due.len() as i64) < EXPIRY_BATCH {
                return Ok(expired);
            }
        }
    }

    /// The threads of one of her sessions' commands (for its activity figures); a session she may
    /// not see is unknown.
    pub(super) async fn session_threads(
        &self,
        caller: &Caller,
        id: &SessionId,
    ) -> Result<Vec<ThreadId>> {
        self.own_session(caller, id).await?;
        Ok(self
            .inner
            .store
            .session_commands(id)
            .await?
            .into_iter()
            .map(|(c, _)| c.thread)
            .collect())
    }

    async fn own_session(&self, caller: &Caller, id: &SessionId) -> Result<PersonalSessionRecord> {
        self.inner
            .store
            .personal_session(id)
            .await?
            .filter(|s| &s.person == caller.id())
            .ok_or_else(|| ServiceError::not_found("session", id))
    }

    async fn summary(&self, s: &PersonalSessionRecord) -> Result<SessionSummary> {
        let with = match &s.connection {
            Some(token) => match self.connection_name(token).await? {
                Some(name) => Address::Connection(s.person.clone(), name),
                None => Address::Person(s.person.clone()),
            },
            None => Address::Person(s.person.clone()),
        };
        let mut joined = Vec::new();
        for (token, at) in &s.joined {
            joined.push(SessionMember {
                connection: self.connection_name(token).await?,
                joined_at: *at,
            });
        }
        let now = self.now();
        Ok(SessionSummary {
            id: s.id.clone(),
            title: s.title.clone(),
            with,
            state: if s.ended_at.is_some() {
                "ended"
            } else {
                "open"
            },
            created_at: s.created_at,
            ended_at: s.ended_at,
            code_expires_at: s.code_expires_at.filter(|t| *t > now),
            joined,
        })
    }
}
