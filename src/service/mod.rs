//! The service: every operation of liaison, once, whatever front calls it.
//!
//! A front authenticates the bearer token with [`Service::authenticate`], gets a [`Caller`], and calls
//! one method per operation. All rules (scopes, rights, kinds, limits, visibility, the exactly-once
//! drain, claims, leases) live here; the store only persists, the fronts only translate. Nothing here
//! knows about HTTP, MCP or A2A.

mod activity;
mod addressing;
mod admin;
mod admin_lists;
mod approvals;
mod audit;
mod auth;
mod channels;
mod claim_wait;
mod command_timeline;
mod confirmation_links;
mod connections;
mod coordination;
mod counted;
mod credentials;
mod delivery;
mod error;
mod figures;
mod follow_ups;
mod inbox;
mod input;
mod keys;
mod limits;
mod live;
mod messages;
mod oauth;
mod oauth_grants;
mod own_tokens;
mod personal;
mod progress;
mod reading;
mod receipts;
mod remote_follow;
mod remote_review;
mod remote_send;
mod remotes;
mod retention;
mod rights;
mod sessions;
mod task_keys;
mod task_push;
mod task_routes;
mod tasks;
mod tool_checks;
mod tool_rules;
mod traced;
mod webhooks;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

pub use activity::{
    Activity, ActivityFigures, ActivityRequest, ActivityScope, DEFAULT_ACTIVITY_WEEKS,
    MAX_ACTIVITY_WEEKS, MAX_SINCE_DAYS, WeekActivity, week_start,
};
pub use admin::{AddedParty, IssuedToken, PartySpec, TokenSpec};
pub use admin_lists::{ListQuery, Listed, MAX_LIST_PAGE, MAX_LIST_PAGES};
pub use approvals::{ApprovalPage, ApprovalView, CONFIRM_CHARS};
pub use audit::{AuditPage, AuditQuery, MAX_AUDIT_PAGE};
pub use channels::{ChannelSpec, MemberChange, MembersPlan};
pub use command_timeline::{CommandView, Step};
pub use confirmation_links::OpenedConfirmationLink;
pub use connections::{CallerConnection, ConnectionUpdate, NewConnection, slug_from};
pub use coordination::{ClaimAction, ClaimTarget, LeaseSpec, PresenceSpec};
pub use credentials::CredentialHold;
pub use delivery::{DeliveryView, PushParts};
pub use error::{ErrorCode, Result, ServiceError};
pub use figures::EXPIRING_SOON_MS;
pub use inbox::{InboxItem, InboxPage, InboxRequest, ItemContent, UNREAD_COUNTED};
pub(crate) use input::storable;
pub use input::{storable_address, storable_json_text};
pub use keys::{CardSignature, PublishedCard};
pub use limits::{LimitSettings, Presented, Rate, StreamPermit};
pub use live::ConsoleChanges;
pub use messages::{PostReceipt, PostRequest};
pub use oauth::{
    ClientMetadata, DOCUMENT_FRESH_S, MAX_DOCUMENT_BYTES, OAuthClientView, OAuthSettings,
    issuer_for,
};
pub use oauth_grants::{
    AuthorizationRequest, AuthorizeParams, AuthorizeRefusal, Consent, ConsentError, TokenParams,
};
pub use own_tokens::{MAX_OWN_AGENT_TOKENS, OWN_TOKEN_MAX_DAYS, OwnToken, OwnTokenSpec};
pub use personal::{
    COMMANDS_SHOWN, CommandSpec, JoinCode, Joined, MAX_OPEN_SESSIONS, PendingCommand,
    SessionMember, SessionSpec, SessionSummary, SessionView, start_prompt,
};
pub use progress::{COALESCE_S, PER_MINUTE, PER_THREAD, ProgressOutcome, ProgressReport};
pub use reading::{
    BodyExtent, BodyRest, DeliveredMessage, MAX_SLICE_CHARS, MessageSlice, ThreadMessage,
    ThreadView,
};
pub use receipts::{ConsumerReceipt, RecipientReceipt};
pub use remote_review::ReviewedCard;
pub use remote_send::OutboundSend;
pub use remotes::{
    REMOTE_TASKS_SHOWN, RefreshReport, RefreshSpec, RemoteAgent, RemoteSpec, RemoteView,
};
pub use retention::{Purged, Retention};
pub use sessions::{
    IssuedLink, LINK_TTL_S, MAX_LINK_TTL_S, OpenedSession, SESSION_TTL_S, ThreadFilter,
    session_csrf,
};
pub use task_keys::{A2A_KEY_PREFIX, MAX_MESSAGE_ID_USES, client_message_id};
pub use task_push::PushConfigSpec;
pub use task_routes::SkillRoute;
pub use tasks::{TaskApproval, TaskListing, TaskMessage, TaskView};
pub use tool_checks::{
    ConfirmationDecision, DEFAULT_CONFIRM_WAIT_S, MAX_READ_WAIT_S, SETTLED_PAGE,
    SettledConfirmations, ToolCheckRequest, ToolCheckSettings, ToolVerdict, Verdict,
};
pub use tool_rules::MAX_PERSON_RULES;
pub use webhooks::{
    WEBHOOK_EVENTS, WEBHOOK_ROTATION_MAX_OVERLAP_S, WEBHOOK_ROTATION_OVERLAP_S, WebhookSpec,
};

use crate::bus::{Topic, WakeBus};
use crate::clock::Clock;
use crate::domain::delivery::OutboxSettings;
use crate::domain::{AgentIdentity, LabelLanguage, PersonId, PersonKind, Scope, Scopes};
use crate::keys::KeyManager;
use crate::keys::ring::MasterKey;
use crate::net::outbound::OutboundClient;
use crate::remote::A2aClient;
use crate::store::{PersonRecord, Store};

/// Tunables of the service, resolved from the configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    pub label_language: LabelLanguage,
    /// Longest inbox long-poll, in seconds (the spec's maximum is 50).
    pub max_wait_s: u64,
    /// Most long-polls waiting for one person at once.
    pub max_waiters_per_person: usize,
    /// Default claim lease, in seconds.
    pub claim_lease_s: u64,
    /// Default presence TTL, in seconds.
    pub presence_ttl_s: u64,
    /// A2A skills and the route each opens (from `agent-card/`).
    pub skills: Vec<SkillRoute>,
    /// The skill used when neither the message nor the party names one.
    pub default_skill: Option<String>,
    /// Request rates per token, failed authentications per address, streams per party.
    pub limits: LimitSettings,
    /// Outbound deliveries: retry schedule, address allow-list, timeouts.
    pub outbox: OutboxSettings,
    /// How an agent's own tool calls are checked (`[tool_checks]`, SPEC §5b).
    pub tool_checks: ToolCheckSettings,
    /// The OAuth authorization server of the MCP resource (`[oauth]`).
    pub oauth: OAuthSettings,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            label_language: LabelLanguage::En,
            max_wait_s: 50,
            max_waiters_per_person: 32,
            claim_lease_s: 600,
            presence_ttl_s: 120,
            skills: Vec::new(),
            default_skill: None,
            limits: LimitSettings::default(),
            outbox: OutboxSettings::default(),
            tool_checks: ToolCheckSettings::default(),
            oauth: OAuthSettings::default(),
        }
    }
}

/// Who is calling: the authenticated person, the token's scopes, and the agent identity the client
/// declared (never trusted, never used to authorise).
#[derive(Debug, Clone)]
pub struct Caller {
    pub person: PersonRecord,
    pub scopes: Scopes,
    pub token_id: String,
    pub agent: Option<AgentIdentity>,
    /// The agent connection the credential is (SPEC §2): a member's `agent` token; none for
    /// her own credentials (the console, a `human` token), parties and admin tokens.
    pub connection: Option<CallerConnection>,
    /// How the request arrived, for the audit log: `api` unless the front knows better (the
    /// console; the CLI, which says so in a header). Self-declared by token holders: it records
    /// the path, it never authorises.
    pub via: crate::domain::DecisionPath,
    /// When the credential stops working by itself (a token's or a JWT's expiry, the end of a
    /// console session); `None` when it does not. What the caller holds open ends then (see
    /// [`Service::hold_credential`]).
    pub expires_at: Option<crate::domain::Timestamp>,
}

impl Caller {
    pub fn id(&self) -> &PersonId {
        &self.person.id
    }

    /// Records how this request arrived (see [`Caller::via`]).
    pub fn arriving_via(mut self, via: crate::domain::DecisionPath) -> Self {
        self.via = via;
        self
    }

    /// Attaches the self-declared agent identity of this request.
    pub fn declaring(mut self, agent: Option<AgentIdentity>) -> Self {
        self.agent = agent;
        self
    }

    fn require(&self, scope: Scope) -> Result<()> {
        if self.scopes.contains(scope) {
            Ok(())
        } else {
            Err(ServiceError::forbidden(format!(
                "this needs a token with scope `{scope}`; yours has `{}`",
                self.scopes
            )))
        }
    }

    /// Who a post of this caller is written by (SPEC §3, the server label): the person herself
    /// when the credential is a human's (a console session, a token with scope `human` and not
    /// `agent`), else her agent. A token can only be issued by an admin or, for `agent` tokens, by
    /// the person herself, so no agent credential can claim to be its human.
    pub fn writes_as(&self) -> crate::domain::WrittenBy {
        if self.scopes.contains(Scope::Human) && !self.scopes.contains(Scope::Agent) {
            crate::domain::WrittenBy::Human
        } else {
            crate::domain::WrittenBy::Agent
        }
    }

    /// Agents and humans may act in channels; an admin-only token may not.
    fn require_participant(&self) -> Result<()> {
        if !(self.scopes.contains(Scope::Agent) || self.scopes.contains(Scope::Human)) {
            return Err(ServiceError::forbidden(
                "this needs a token with scope `agent` or `human`",
            ));
        }
        if self.person.kind != PersonKind::Member {
            return Err(ServiceError::forbidden(
                "external parties use the A2A interface, not the member tools",
            ));
        }
        Ok(())
    }

    /// An external party with an agent token: the A2A interface.
    fn require_party(&self) -> Result<()> {
        if self.person.kind != PersonKind::External || !self.scopes.contains(Scope::Agent) {
            return Err(ServiceError::forbidden(
                "the A2A interface is for external parties with an agent token",
            ));
        }
        Ok(())
    }

    /// The declared agent session, required where sessions must be told apart (claims, presence, leases).
    fn session(&self) -> Result<&AgentIdentity> {
        self.agent.as_ref().ok_or_else(|| {
            ServiceError::invalid("declare your agent identity (agent_id@host:session) to claim, lease or report presence")
        })
    }
}

/// The service. Cheap to clone.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<Store>,
    bus: Arc<dyn WakeBus>,
    clock: Arc<dyn Clock>,
    settings: Settings,
    /// Cancelled at shutdown: long-polls return their current (empty) answer.
    shutdown: CancellationToken,
    /// Long-polls waiting per person, to enforce `max_waiters_per_person`.
    waiters: Mutex<HashMap<PersonId, usize>>,
    /// The same long-polls per token (the "connect an agent" page shows them).
    token_waiters: Mutex<HashMap<String, usize>>,
    /// When this replica last recorded a token's use (`last_used_at` is written at most once a
    /// minute per token).
    token_uses: Mutex<HashMap<String, crate::domain::Timestamp>>,
    /// The watchers of credentials held open by streams, long-polls and sessions.
    credential_watchers: credentials::Watchers,
    /// Threads a `claim` with `thread="next"` is claiming on this replica right now: the other
    /// claimers woken by the same entry try them last (`coordination.rs`).
    claims_in_flight: Mutex<std::collections::HashSet<crate::domain::ThreadId>>,
    /// Rates per token and per address, open streams per party.
    limits: limits::Limits,
    /// Seals webhook secrets, remote credentials, push tokens and MCP request state.
    master_key: Option<Arc<MasterKey>>,
    /// The signing key ring (listing and rotation are admin operations).
    keys: Option<Arc<KeyManager>>,
    /// The SSRF-safe client of remote-agent calls (cards, key sets, OAuth2 tokens).
    outbound: OutboundClient,
    /// The A2A client of the outbound bridge; its clones share OAuth2 tokens and gRPC connections.
    a2a_client: A2aClient,
    /// OAuth client registrations per address in the last hour, on this replica.
    oauth_registrations: oauth::Registrations,
    /// Tool calls a `PreToolUse` check allowed, for their `PermissionRequest` (`follow_ups.rs`).
    follow_ups: follow_ups::FollowUps,
}

/// Everything the service is built from, handed in once by the app (or a test).
pub struct Deps {
    pub store: Arc<Store>,
    pub bus: Arc<dyn WakeBus>,
    pub clock: Arc<dyn Clock>,
    pub settings: Settings,
    /// Cancelled at shutdown: long-polls return their current (empty) answer.
    pub shutdown: CancellationToken,
    /// The master key (`master.key` or `LIAISON_MASTER_KEY`); without one, every operation that
    /// seals or opens a secret answers `internal`.
    pub master: Option<Arc<MasterKey>>,
    /// The signing key ring's manager; without one, the key operations answer `unavailable`.
    pub keys: Option<Arc<KeyManager>>,
    /// The SSRF-safe outbound client, built from `[outbox]`.
    pub outbound: OutboundClient,
    /// The A2A client of the outbound bridge, over `outbound`; the workers share it.
    pub a2a: A2aClient,
}

impl Deps {
    /// The dependencies of a service over `store`, with the outbound clients built from
    /// `settings.outbox`, and neither master key nor key manager (add them as needed).
    pub fn new(
        store: Arc<Store>,
        bus: Arc<dyn WakeBus>,
        clock: Arc<dyn Clock>,
        settings: Settings,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Deps> {
        let o = &settings.outbox;
        let outbound = OutboundClient::new(o.allow.clone(), o.connect_timeout, o.timeout)?;
        Ok(Deps {
            a2a: A2aClient::new(outbound.clone()),
            outbound,
            store,
            bus,
            clock,
            settings,
            shutdown,
            master: None,
            keys: None,
        })
    }

    /// With `master` as the master key.
    pub fn with_master(self, master: MasterKey) -> Deps {
        self.with_optional_master(Some(master))
    }

    /// With `master`, if any, as the master key.
    pub fn with_optional_master(mut self, master: Option<MasterKey>) -> Deps {
        self.master = master.map(Arc::new);
        self
    }
}

impl Service {
    pub fn new(deps: Deps) -> Self {
        let Deps {
            store,
            bus,
            clock,
            settings,
            shutdown,
            master,
            keys,
            outbound,
            a2a,
        } = deps;
        forget_directory_on_notice(&store, bus.as_ref(), &shutdown);
        Self {
            inner: Arc::new(Inner {
                store,
                bus,
                clock,
                limits: limits::Limits::new(settings.limits.clone()),
                settings,
                shutdown,
                waiters: Mutex::default(),
                token_waiters: Mutex::default(),
                token_uses: Mutex::default(),
                credential_watchers: Mutex::default(),
                claims_in_flight: Mutex::default(),
                master_key: master,
                keys,
                outbound,
                a2a_client: a2a,
                oauth_registrations: oauth::Registrations::default(),
                follow_ups: follow_ups::FollowUps::default(),
            }),
        }
    }

    /// The store, for the app's wiring (start-up, readiness, shutdown) and tests; fronts and
    /// workers ask the service instead (the layer test checks that they never call this).
    pub fn store(&self) -> &Arc<Store> {
        &self.inner.store
    }

    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// Resolves when the server begins to stop: streams end so that shutdown is not held open.
    pub async fn stopping(&self) {
        self.inner.shutdown.cancelled().await;
    }

    /// The bootstrap admin as a caller, for start-up tasks such as `--demo`; never for a front.
    pub async fn system_admin(&self) -> Result<Caller> {
        let id = PersonId::parse("admin").expect("a valid slug");
        let person = self
            .inner
            .store
            .person(&id)
            .await?
            .ok_or_else(|| ServiceError::not_found("person", &id))?;
        Ok(Caller {
            person,
            scopes: Scopes::default().with(Scope::Admin),
            token_id: "system".into(),
            agent: None,
            connection: None,
            via: crate::domain::DecisionPath::Api,
            expires_at: None,
        })
    }

    fn now(&self) -> crate::domain::Timestamp {
        self.inner.clock.now()
    }

    /// Tells every replica, through the bus, that tokens, persons, channels or policies changed,
    /// so that each forgets its cached directory now rather than at its TTL (this replica's store
    /// has already forgotten its own).
    fn directory_changed(&self) {
        self.inner.bus.publish(&Topic::directory());
    }

    /// Wakes the outbox workers on every replica when a commit enqueued deliveries (`due`, as
    /// the store's answer says). The store holds no callback: every wake-up topic is the
    /// service's to publish, after the commit.
    fn outbox_due(&self, due: bool) {
        if due {
            self.inner.bus.publish(&Topic::outbox());
        }
    }
}

/// A page size: 1–100, default 50.
fn page_limit(limit: Option<i64>) -> Result<i64> {
    match limit {
        None => Ok(50),
        Some(l) if (1..=100).contains(&l) => Ok(l),
        Some(l) => Err(ServiceError::invalid(format!(
            "limit {l} is out of range: use 1-100"
        ))),
    }
}

/// Forgets `store`'s cached directory whenever the bus says it changed (on PostgreSQL, also when
/// another replica changed it, or when notifications may have been lost). Runs until `shutdown`;
/// outside a runtime (no task can run) the cache's TTL alone bounds staleness.
fn forget_directory_on_notice(store: &Arc<Store>, bus: &dyn WakeBus, shutdown: &CancellationToken) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    // Subscribed here, before the service serves anything, so no change can slip past.
    let mut changes = bus.subscribe(&Topic::directory());
    let store = Arc::downgrade(store);
    let shutdown = shutdown.clone();
    runtime.spawn(async move {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = changes.woken() => match store.upgrade() {
                    Some(store) => store.forget_directory(),
                    None => return,
                },
            }
        }
    });
}
