//! The web console's rules (SPEC §11, §5): single-use login links, console sessions, and
//! single-use approval links. Nothing here knows about HTTP; the console front passes secrets and
//! CSRF tokens in and gets callers and records out.
//!
//! - **Links** are issued by admins, for one person (an approval link also for one approval, and
//!   only for one of its approvers). Each is a random secret stored as its SHA-256 hash, expires
//!   ([`LINK_TTL_S`] by default, at most [`MAX_LINK_TTL_S`]), and is used at most once, by an
//!   atomic conditional update. Opening one (showing its confirmation page) never uses it: it mints
//!   a CSRF token whose hash is recorded on the link; only the POST carrying that token (in the
//!   form, and in the cookie the page set: a cross-site form cannot send both) uses the link.
//! - **Sessions** last [`SESSION_TTL_S`] and act as their person with scope `human` and nothing
//!   else: deciding approvals, reading threads, fleet and leases, never agent or admin operations.
//!   Their CSRF token is derived from the session secret (a hash of it), so it is never stored and
//!   changes with every session. Logout ends a session for good.

use super::auth::{SECRET_PREFIX, hash_secret, new_secret};
use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::SERVER_PERSON;
use crate::domain::secret::same;
use crate::domain::{
    ApprovalId, ApprovalState, ChannelName, Decision, DecisionPath, PersonId, PersonKind, Scope,
    Scopes,
};
use crate::store::{ApprovalRecord, LinkKind, LinkRecord, NewLink, SessionRecord, ThreadRecord};

/// Default lifetime of a login or approval link, in seconds (1 hour).
pub const LINK_TTL_S: u64 = 3_600;
/// Longest lifetime an admin may give a link, in seconds (7 days).
pub const MAX_LINK_TTL_S: u64 = 7 * 24 * 3_600;
/// Lifetime of a console session, in seconds (12 hours); then the person opens a new login link.
pub const SESSION_TTL_S: u64 = 12 * 3_600;
/// Most threads the console lists per channel.
const CHANNEL_THREADS: i64 = 100;
/// Longest subject search, in characters.
const MAX_SEARCH_CHARS: usize = 100;

/// Which threads of a channel a member lists.
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct ThreadFilter {
    /// `open`, `answered` or `closed`.
    pub state: Option<String>,
    /// Only open threads whose awaited answer is someone else's question, request or handoff:
    /// what waits for the caller (or her agents) to answer.
    #[serde(default)]
    pub waiting_for_me: bool,
    /// Words the subject contains (case-insensitive).
    pub search: Option<String>,
}

/// How a link is issued.
pub(super) enum LinkIssue {
    /// With a random secret, by an admin, audited as this event.
    Audited(&'static str),
    /// With the id and secret the caller derived (the server's own links in webhook bodies,
    /// which must be the same at every attempt of their delivery): not an admin change.
    Derived { id: String, secret: String },
}

/// What a link is for.
pub(super) enum LinkFor {
    Login,
    Approval(ApprovalId),
    Confirmation(crate::domain::tool_check::ConfirmationId),
}

/// A link just issued: its secret is shown once.
#[derive(Debug, Clone)]
pub struct IssuedLink {
    pub link: LinkRecord,
    pub secret: String,
}

/// A console session just opened: the secret goes into the cookie and nowhere else.
#[derive(Debug, Clone)]
pub struct OpenedSession {
    pub session: SessionRecord,
    pub secret: String,
}

/// The CSRF token of the session whose secret is `session_secret`.
pub fn session_csrf(session_secret: &str) -> String {
    hash_secret(&format!("liaison console csrf\n{session_secret}"))
}

fn bad_csrf() -> ServiceError {
    ServiceError::forbidden(
        "the form's CSRF token is missing or wrong: reload the page you came from and submit \
         its form again; nothing was changed",
    )
}

fn unknown_link() -> ServiceError {
    ServiceError::new(
        ErrorCode::Unauthenticated,
        "this link is not valid (mistyped, cut short, or for another page); ask an admin for a \
         new one",
    )
}

fn link_ttl(expires_in_s: Option<u64>) -> Result<u64> {
    match expires_in_s {
        None => Ok(LINK_TTL_S),
        Some(s) if (60..=MAX_LINK_TTL_S).contains(&s) => Ok(s),
        Some(s) => Err(ServiceError::invalid(format!(
            "expires_in_s {s} is out of range: use 60-{MAX_LINK_TTL_S} seconds"
        ))),
    }
}

impl Service {
    /// A single-use console login link for `person` (admins).
    pub async fn issue_login_link(
        &self,
        admin: &Caller,
        person: &PersonId,
        expires_in_s: Option<u64>,
    ) -> Result<IssuedLink> {
        self.login_link(admin, person, expires_in_s, false).await
    }

    /// A single-use login link that opens an **admin** console session for `person` (admins).
    /// Only a person who holds a live `admin` token gets one; the session it opens reaches the
    /// admin pages only while she still does (see [`Service::console_admin`]).
    pub async fn issue_admin_login_link(
        &self,
        admin: &Caller,
        person: &PersonId,
        expires_in_s: Option<u64>,
    ) -> Result<IssuedLink> {
        self.login_link(admin, person, expires_in_s, true).await
    }

    async fn login_link(
        &self,
        admin: &Caller,
        person: &PersonId,
        expires_in_s: Option<u64>,
        admin_session: bool,
    ) -> Result<IssuedLink> {
        admin.require(Scope::Admin)?;
        let ttl = link_ttl(expires_in_s)?;
        match self.inner.store.person(person).await? {
            Some(p) if p.kind == PersonKind::Member && p.id.as_str() != SERVER_PERSON => {}
            Some(_) => {
                return Err(ServiceError::invalid(format!(
                    "{person} is not a member: only members use the console"
                )));
            }
            None => return Err(ServiceError::not_found("person", person)),
        }
        if admin_session && !self.holds_admin_token(person).await? {
            return Err(ServiceError::invalid(format!(
                "{person} holds no live admin token, so an admin login link would grant nothing: \
                 issue them one first (`liaison token issue {person} --scopes admin`)"
            )));
        }
        let event = if admin_session {
            "link.admin_login_issued"
        } else {
            "link.login_issued"
        };
        self.issue_link(
            admin,
            person.clone(),
            LinkFor::Login,
            ttl,
            LinkIssue::Audited(event),
            admin_session,
        )
        .await
    }

    /// A single-use link deciding approval `id` as `person` (default: its first approver), for
    /// admins (e.g. to send in a chat notification). Only a pending approval gets one, and only
    /// for one of its approvers.
    pub async fn issue_approval_link(
        &self,
        admin: &Caller,
        id: &ApprovalId,
        person: Option<&PersonId>,
        expires_in_s: Option<u64>,
    ) -> Result<IssuedLink> {
        self.approval_link(
            admin,
            id,
            person,
            expires_in_s,
            LinkIssue::Audited("link.approval_issued"),
        )
        .await
    }

    /// An approval link as [`Service::issue_approval_link`] makes, issued `how`.
    pub(super) async fn approval_link(
        &self,
        admin: &Caller,
        id: &ApprovalId,
        person: Option<&PersonId>,
        expires_in_s: Option<u64>,
        how: LinkIssue,
    ) -> Result<IssuedLink> {
        admin.require(Scope::Admin)?;
        let ttl = link_ttl(expires_in_s)?;
        let approval = self
            .inner
            .store
            .approval(id)
            .await?
            .ok_or_else(|| ServiceError::not_found("approval", id))?;
        let person =
            match person {
                Some(p) if approval.approvers.contains(p) => p.clone(),
                Some(p) => {
                    return Err(ServiceError::invalid(format!(
                        "{p} is not an approver of approval {id}; its approvers are {}",
                        approval
                            .approvers
                            .iter()
                            .map(PersonId::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                }
                None => approval.approvers.first().cloned().ok_or_else(|| {
                    ServiceError::invalid(format!("approval {id} has no approver"))
                })?,
            };
        undecided(&approval, self.now())?;
        self.issue_link(
            admin,
            person,
            LinkFor::Approval(id.clone()),
            ttl,
            how,
            false,
        )
        .await
    }

    /// A login link, an approval link or a confirmation link, as `what` says.
    pub(super) async fn issue_link(
        &self,
        admin: &Caller,
        person: PersonId,
        what: LinkFor,
        ttl: u64,
        how: LinkIssue,
        admin_session: bool,
    ) -> Result<IssuedLink> {
        let (kind, approval, confirmation) = match what {
            LinkFor::Login => (LinkKind::Login, None, None),
            LinkFor::Approval(a) => (LinkKind::Approval, Some(a), None),
            LinkFor::Confirmation(c) => (LinkKind::Confirmation, None, Some(c)),
        };
        let (id, secret, event) = match how {
            LinkIssue::Audited(event) => {
                let (id, secret) = new_secret();
                (id.replacen("tok_", "lnk_", 1), secret, Some(event))
            }
            LinkIssue::Derived { id, secret } => (id, secret, None),
        };
        let now = self.now();
        let audit = event.map(|e| {
            let shown = serde_json::json!({
                "person": person, "approval": approval, "confirmation": confirmation,
                "admin": admin_session,
                "expires_at": now.plus_secs(ttl),
            });
            self.change(admin, e, &id, None, Some(shown))
        });
        let new = NewLink {
            kind,
            id,
            secret_hash: hash_secret(&secret),
            person,
            approval,
            confirmation,
            admin: admin_session,
            created_by: admin.id().clone(),
            created_at: now,
            expires_at: now.plus_secs(ttl),
            audit,
        };
        self.inner.store.insert_link(new.clone()).await?;
        tracing::info!(link = %new.id, person = %new.person, by = %admin.id(), "Console link issued.");
        Ok(IssuedLink {
            link: LinkRecord {
                id: new.id,
                person: new.person,
                approval: new.approval,
                confirmation: new.confirmation,
                admin: new.admin,
                created_at: new.created_at,
                expires_at: new.expires_at,
                used_at: None,
            },
            secret,
        })
    }

    /// Opens a link's confirmation page: checks the link is usable (and, for an approval link,
    /// that it is the link of `approval`), and returns it with a fresh CSRF token for the page's
    /// form. Uses nothing.
    pub async fn open_link(
        &self,
        kind: LinkKind,
        secret: &str,
        subject: Option<&str>,
    ) -> Result<(LinkRecord, String)> {
        let link = self.usable_link(kind, secret, subject).await?;
        let (_, csrf) = new_secret();
        if !self
            .inner
            .store
            .show_link(kind, hash_secret(secret), hash_secret(&csrf), self.now())
            .await?
        {
            // Used or expired between the read and the update.
            return Err(self.link_refusal(kind, secret, subject).await?);
        }
        Ok((link, csrf))
    }

    /// The caller a link acts as: its person, with scope `human` only.
    pub async fn link_caller(&self, link: &LinkRecord) -> Result<Caller> {
        self.human_caller(&link.person, format!("link:{}", link.id))
            .await
    }

    /// Uses a login link (once) and opens a console session for its person.
    pub async fn console_login(
        &self,
        secret: &str,
        form_csrf: &str,
        cookie_csrf: Option<&str>,
    ) -> Result<OpenedSession> {
        let link = self
            .use_link(LinkKind::Login, secret, None, form_csrf, cookie_csrf)
            .await?;
        let caller = self.link_caller(&link).await?;
        let (id, secret) = new_secret();
        let now = self.now();
        let session = SessionRecord {
            id: id.replacen("tok_", "ses_", 1),
            person: caller.id().clone(),
            created_at: now,
            expires_at: now.plus_secs(SESSION_TTL_S),
            ended_at: None,
            admin: link.admin && self.holds_admin_token(&link.person).await?,
        };
        self.inner
            .store
            .insert_session(session.clone(), hash_secret(&secret))
            .await?;
        tracing::info!(session = %session.id, person = %session.person, link = %link.id, "Console session opened.");
        Ok(OpenedSession { session, secret })
    }

    /// Decides approval `id` through its single-use link: the link is used (once) and the
    /// decision is its person's, via the `link` path. A rejection without a reason is refused
    /// before the link is used.
    pub async fn decide_by_link(
        &self,
        id: &ApprovalId,
        secret: &str,
        form_csrf: &str,
        cookie_csrf: Option<&str>,
        decision: Decision,
        reason: Option<String>,
    ) -> Result<ApprovalRecord> {
        let reason = reason
            .map(|r| r.trim().to_owned())
            .filter(|r| !r.is_empty());
        if decision == Decision::Reject && reason.is_none() {
            return Err(ServiceError::invalid(
                "a rejection needs a reason: the requester is told it; the link was not used",
            ));
        }
        let link = self
            .use_link(
                LinkKind::Approval,
                secret,
                Some(id.as_str()),
                form_csrf,
                cookie_csrf,
            )
            .await?;
        let caller = self.link_caller(&link).await?;
        self.decide(&caller, id, decision, reason, DecisionPath::Link)
            .await
    }

    /// The caller of a console session: its person with scope `human`, or why the session is
    /// no longer valid.
    pub async fn console_caller(&self, session_secret: &str) -> Result<(Caller, SessionRecord)> {
        let signed_out = || {
            ServiceError::new(
                ErrorCode::Unauthenticated,
                "you are not signed in to the console: open a login link (an admin makes one \
                 with `liaison login-link YOU`)",
            )
        };
        if !session_secret.starts_with(SECRET_PREFIX) || session_secret.len() > 200 {
            return Err(signed_out());
        }
        let session = self
            .inner
            .store
            .session_by_hash(&hash_secret(session_secret))
            .await?
            .ok_or_else(signed_out)?;
        if session.ended_at.is_some() {
            return Err(signed_out());
        }
        if session.expires_at <= self.now() {
            return Err(ServiceError::new(
                ErrorCode::TokenExpired,
                format!(
                    "your console session expired at {}; open a new login link",
                    session.expires_at
                ),
            ));
        }
        let mut caller = self
            .human_caller(
                &session.person,
                format!("{}{}", super::auth::CONSOLE_PREFIX, session.id),
            )
            .await?;
        caller.expires_at = Some(session.expires_at);
        // A session is rate-limited as a token is.
        self.inner.limits.admit(&caller)?;
        Ok((caller, session))
    }

    /// The admin caller of a console session: its person with scope `admin` only (never
    /// `human`, so admin pages cannot decide approvals, and never `agent`), via `console`. Only
    /// a session opened by an admin login link has one, and only while its person still holds a
    /// live `admin` token: revoking her last admin token closes the admin pages at once. Any
    /// other session is told "not found", as if the admin pages did not exist.
    pub async fn console_admin(&self, member: &Caller, session: &SessionRecord) -> Result<Caller> {
        let hidden = || ServiceError::new(ErrorCode::NotFound, "no such page");
        if !session.admin || !self.holds_admin_token(member.id()).await? {
            return Err(hidden());
        }
        Ok(Caller {
            person: member.person.clone(),
            scopes: Scopes::default().with(Scope::Admin),
            token_id: member.token_id.clone(),
            agent: None,
            connection: None,
            via: DecisionPath::Console,
            expires_at: member.expires_at,
        })
    }

    /// Whether `person` holds a token with scope `admin` that is neither revoked nor expired.
    pub(super) async fn holds_admin_token(&self, person: &PersonId) -> Result<bool> {
        let now = self.now();
        Ok(self
            .inner
            .store
            .tokens(Some(person))
            .await?
            .iter()
            .any(|t| t.scopes.contains(Scope::Admin) && super::own_tokens::usable(t, now)))
    }

    /// Checks a state-changing request of a session carries the session's CSRF token.
    pub fn check_console_csrf(&self, session_secret: &str, form_csrf: Option<&str>) -> Result<()> {
        match form_csrf {
            Some(token) if same(token, &session_csrf(session_secret)) => Ok(()),
            _ => Err(bad_csrf()),
        }
    }

    /// Ends a console session (logout).
    pub async fn console_logout(
        &self,
        session_secret: &str,
        form_csrf: Option<&str>,
    ) -> Result<()> {
        let (caller, session) = self.console_caller(session_secret).await?;
        self.check_console_csrf(session_secret, form_csrf)?;
        self.inner
            .store
            .end_session(hash_secret(session_secret), self.now())
            .await?;
        // What the session holds open (event streams) ends on every replica, as at a revocation.
        self.directory_changed();
        tracing::info!(session = %session.id, person = %caller.id(), "Console session ended.");
        Ok(())
    }

    /// The threads of a channel the caller reads, most recently active first.
    pub async fn channel_threads(
        &self,
        caller: &Caller,
        channel: &ChannelName,
        filter: &ThreadFilter,
    ) -> Result<Vec<ThreadRecord>> {
        caller.require_participant()?;
        self.visible_channel(caller, channel).await?;
        let state = match filter.state.as_deref() {
            None | Some("") => None,
            Some(s) => Some(
                ["open", "answered", "closed"]
                    .into_iter()
                    .find(|n| *n == s)
                    .ok_or_else(|| {
                        ServiceError::invalid(format!(
                            "state {} is not one of open, answered, closed",
                            crate::domain::text::quote(s)
                        ))
                    })?,
            ),
        };
        let search = filter
            .search
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty());
        if search.is_some_and(|s| s.chars().count() > MAX_SEARCH_CHARS) {
            return Err(ServiceError::invalid(format!(
                "search is longer than {MAX_SEARCH_CHARS} characters"
            )));
        }
        Ok(self
            .inner
            .store
            .channel_threads(
                channel,
                state,
                filter.waiting_for_me.then(|| caller.id()),
                search,
                CHANNEL_THREADS,
            )
            .await?)
    }

    /// Wakes when outbox deliveries fall due (an admin page of the outbox listens to it, with a
    /// tick for attempts that finish).
    pub fn outbox_changes(&self, admin: &Caller) -> Result<crate::bus::Subscription> {
        admin.require(Scope::Admin)?;
        Ok(self.inner.bus.subscribe(&crate::bus::Topic::outbox()))
    }

    async fn human_caller(&self, person: &PersonId, token_id: String) -> Result<Caller> {
        let person =
            self.inner.store.person(person).await?.ok_or_else(|| {
                ServiceError::new(ErrorCode::TokenRevoked, "this person was removed")
            })?;
        Ok(Caller {
            person,
            scopes: Scopes::default().with(Scope::Human),
            token_id,
            agent: None,
            connection: None,
            via: crate::domain::DecisionPath::Console,
            expires_at: None,
        })
    }

    /// A link that can be used now, or why not.
    async fn usable_link(
        &self,
        kind: LinkKind,
        secret: &str,
        subject: Option<&str>,
    ) -> Result<LinkRecord> {
        match self.link(kind, secret, subject).await? {
            Some(l) if l.used_at.is_none() && l.expires_at > self.now() => Ok(l),
            _ => Err(self.link_refusal(kind, secret, subject).await?),
        }
    }

    /// The link of `kind` with this secret, if it is the link of `subject` (the approval or
    /// confirmation it decides; none for a login link).
    async fn link(
        &self,
        kind: LinkKind,
        secret: &str,
        subject: Option<&str>,
    ) -> Result<Option<LinkRecord>> {
        if !secret.starts_with(SECRET_PREFIX) || secret.len() > 200 {
            return Ok(None);
        }
        Ok(self
            .inner
            .store
            .link_by_hash(kind, &hash_secret(secret))
            .await?
            .filter(|l| l.subject() == subject))
    }

    /// Why a link cannot be used: unknown, used, expired, or (when it is usable) a CSRF token
    /// that is not its page's.
    async fn link_refusal(
        &self,
        kind: LinkKind,
        secret: &str,
        subject: Option<&str>,
    ) -> Result<ServiceError> {
        Ok(match self.link(kind, secret, subject).await? {
            None => unknown_link(),
            Some(l) => match l.used_at {
                Some(at) => ServiceError::new(
                    ErrorCode::Unauthenticated,
                    format!(
                        "this link was already used at {at}; a link works once. Ask an admin \
                         for a new one if you still need it"
                    ),
                ),
                None if l.expires_at <= self.now() => ServiceError::new(
                    ErrorCode::TokenExpired,
                    format!(
                        "this link expired at {}; ask an admin for a new one",
                        l.expires_at
                    ),
                ),
                None => bad_csrf(),
            },
        })
    }

    /// Uses a link once, if the form's CSRF token is the one its page minted (and the cookie
    /// that page set carries the same token).
    pub(super) async fn use_link(
        &self,
        kind: LinkKind,
        secret: &str,
        subject: Option<&str>,
        form_csrf: &str,
        cookie_csrf: Option<&str>,
    ) -> Result<LinkRecord> {
        let link = self.usable_link(kind, secret, subject).await?;
        if form_csrf.is_empty() || !cookie_csrf.is_some_and(|c| same(c, form_csrf)) {
            return Err(bad_csrf());
        }
        match self
            .inner
            .store
            .use_link(
                kind,
                hash_secret(secret),
                hash_secret(form_csrf),
                self.now(),
            )
            .await?
        {
            Some(used) => {
                tracing::info!(link = %link.id, person = %used.person, "Console link used.");
                Ok(used)
            }
            None => Err(self.link_refusal(kind, secret, subject).await?),
        }
    }
}

/// Refuses a link for an approval nobody can decide any more.
fn undecided(a: &ApprovalRecord, now: crate::domain::Timestamp) -> Result<()> {
    match a.state {
        ApprovalState::Pending if a.expires_at > now => Ok(()),
        ApprovalState::Pending | ApprovalState::Expired => Err(ServiceError::new(
            ErrorCode::ApprovalExpired,
            format!(
                "approval {} expired at {}; no link can decide it",
                a.id, a.expires_at
            ),
        )),
        ApprovalState::Withdrawn => Err(ServiceError::new(
            ErrorCode::ApprovalDecided,
            format!(
                "approval {} was withdrawn: its request's thread was closed before anyone \
                 decided; no link can decide it",
                a.id
            ),
        )),
        state => Err(ServiceError::new(
            ErrorCode::ApprovalDecided,
            format!(
                "approval {} is already {state}; no link can decide it",
                a.id
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csrf_tokens_differ_per_session_and_compare_exactly() {
        let a = session_csrf("lsn_a");
        assert_eq!(a, session_csrf("lsn_a"));
        assert_ne!(a, session_csrf("lsn_b"));
        assert!(same(&a, &a.clone()));
        assert!(!same(&a, &a[1..]));
        assert!(!same(&a, &session_csrf("lsn_b")));
    }
}
