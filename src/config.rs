//! Configuration: embedded defaults, then the TOML file, then `LIAISON_*` environment variables,
//! then command-line flags. The raw layers merge as TOML values and resolve once into [`Config`];
//! every field is documented in `config/liaison.example.toml`.

use crate::mcp::McpSettings;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use serde::Deserialize;

use crate::domain::LabelLanguage;
use crate::domain::duration::{
    deserialize_seconds as seconds, deserialize_seconds_list as seconds_list,
};
use crate::net::ServerSettings;
use crate::service::{LimitSettings, Rate, Settings};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    data_dir: PathBuf,
    listen: String,
    public_url: Option<String>,
    database_url: Option<String>,
    label_language: LabelLanguage,
    log_format: LogFormat,
    inbox: RawInbox,
    claims: RawClaims,
    presence: RawPresence,
    mcp: RawMcp,
    a2a: RawA2a,
    server: RawServer,
    limits: RawLimits,
    tls: Option<TlsFiles>,
    #[serde(default)]
    metrics: RawMetrics,
    #[serde(default)]
    telemetry: RawTelemetry,
    outbox: RawOutbox,
    #[serde(default)]
    retention: RawRetention,
    database: RawDatabase,
    #[serde(default)]
    tool_checks: RawToolChecks,
    oauth: RawOAuth,
}

/// `[tool_checks]`: how an agent's own tool calls are checked (SPEC §5b). `rules` add to the
/// built-in ones (`crate::domain::tool_check::default_rules`); a rule can only make a call
/// stricter, never relax another rule's verdict.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RawToolChecks {
    rules: Vec<crate::domain::tool_check::ToolRule>,
    #[serde(deserialize_with = "seconds")]
    max_wait_s: u64,
    pending_per_connection: usize,
}

impl Default for RawToolChecks {
    fn default() -> Self {
        let d = crate::service::ToolCheckSettings::default();
        Self {
            rules: Vec::new(),
            max_wait_s: d.max_wait_s,
            pending_per_connection: d.pending_per_connection,
        }
    }
}

impl RawToolChecks {
    fn resolve(self) -> anyhow::Result<crate::service::ToolCheckSettings> {
        for rule in &self.rules {
            rule.check()
                .map_err(|e| anyhow::anyhow!("[tool_checks] rules: {e}"))?;
        }
        if !(1..=3600).contains(&self.max_wait_s) {
            anyhow::bail!("[tool_checks] max_wait_s must be 1-3600 seconds");
        }
        if !(1..=1000).contains(&self.pending_per_connection) {
            anyhow::bail!("[tool_checks] pending_per_connection must be 1-1000");
        }
        let mut rules = crate::domain::tool_check::default_rules();
        rules.extend(self.rules);
        Ok(crate::service::ToolCheckSettings {
            rules,
            max_wait_s: self.max_wait_s,
            pending_per_connection: self.pending_per_connection,
        })
    }
}

/// `[oauth]`: the authorization server of liaison's own MCP resource (SPEC §7).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOAuth {
    enabled: bool,
    #[serde(deserialize_with = "seconds")]
    access_token_ttl_s: u64,
    grant_ttl_days: u64,
    #[serde(deserialize_with = "seconds")]
    code_ttl_s: u64,
    registrations_per_hour: usize,
    max_registered_clients: i64,
}

impl RawOAuth {
    fn resolve(&self) -> anyhow::Result<crate::service::OAuthSettings> {
        for (name, v) in [
            ("oauth.access_token_ttl_s", self.access_token_ttl_s),
            ("oauth.grant_ttl_days", self.grant_ttl_days),
            ("oauth.code_ttl_s", self.code_ttl_s),
        ] {
            if v == 0 {
                anyhow::bail!("{name} must be at least 1");
            }
        }
        if self.code_ttl_s > 600 {
            anyhow::bail!("oauth.code_ttl_s must be at most 600 (RFC 6749 §4.1.2)");
        }
        if self.max_registered_clients < 1 {
            anyhow::bail!("oauth.max_registered_clients must be at least 1");
        }
        Ok(crate::service::OAuthSettings {
            enabled: self.enabled,
            // Filled from public_url by the app.
            issuer: String::new(),
            resource: String::new(),
            access_token_ttl_s: self.access_token_ttl_s,
            grant_ttl_days: self.grant_ttl_days,
            code_ttl_s: self.code_ttl_s,
            registrations_per_hour: self.registrations_per_hour,
            max_registered_clients: self.max_registered_clients,
        })
    }
}

/// `[database]`: how long liaison waits on its database before a request is answered
/// `unavailable` (`crate::store::Deadlines`), and `/readyz`'s own deadline.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDatabase {
    #[serde(deserialize_with = "seconds")]
    connect_timeout_s: u64,
    #[serde(deserialize_with = "seconds")]
    acquire_timeout_s: u64,
    #[serde(deserialize_with = "seconds")]
    statement_timeout_s: u64,
    #[serde(deserialize_with = "seconds")]
    ready_timeout_s: u64,
}

impl RawDatabase {
    fn resolve(&self) -> anyhow::Result<(crate::store::Deadlines, Duration)> {
        for (name, v) in [
            ("database.connect_timeout_s", self.connect_timeout_s),
            ("database.acquire_timeout_s", self.acquire_timeout_s),
            ("database.statement_timeout_s", self.statement_timeout_s),
            ("database.ready_timeout_s", self.ready_timeout_s),
        ] {
            if v == 0 {
                anyhow::bail!("{name} must be at least 1");
            }
        }
        let deadlines = crate::store::Deadlines {
            connect: Duration::from_secs(self.connect_timeout_s),
            acquire: Duration::from_secs(self.acquire_timeout_s),
            statement: Duration::from_secs(self.statement_timeout_s),
        };
        Ok((deadlines, Duration::from_secs(self.ready_timeout_s)))
    }
}

/// `[retention]`: how long each kind of record is kept; 0 or absent keeps it forever.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetention {
    #[serde(default, deserialize_with = "seconds")]
    closed_threads: u64,
    #[serde(default, deserialize_with = "seconds")]
    task_events: u64,
    #[serde(default, deserialize_with = "seconds")]
    delivery_attempts: u64,
    #[serde(default, deserialize_with = "seconds")]
    audit: u64,
}

impl RawRetention {
    fn resolve(&self) -> crate::service::Retention {
        let keep = |s: u64| (s > 0).then(|| Duration::from_secs(s));
        crate::service::Retention {
            closed_threads: keep(self.closed_threads),
            task_events: keep(self.task_events),
            delivery_attempts: keep(self.delivery_attempts),
            audit: keep(self.audit),
        }
    }
}

/// `[telemetry]`: where OpenTelemetry traces go (`crate::telemetry`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTelemetry {
    /// The OTLP/HTTP base URL; unset (and no `OTEL_EXPORTER_OTLP_*ENDPOINT`): no traces.
    otlp_endpoint: Option<String>,
}

/// `[metrics]`: who may scrape `/metrics`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetrics {
    /// When set, scrapes must send `Authorization: Bearer <token>`; unset, `/metrics` is open.
    token: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOutbox {
    #[serde(deserialize_with = "seconds_list")]
    schedule_s: Vec<u64>,
    jitter: f64,
    disable_after: u32,
    #[serde(deserialize_with = "seconds")]
    lease_s: u64,
    #[serde(deserialize_with = "seconds")]
    connect_timeout_s: u64,
    #[serde(deserialize_with = "seconds")]
    timeout_s: u64,
    #[serde(deserialize_with = "string_list")]
    allow: Vec<String>,
    concurrency: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServer {
    max_connections: usize,
    /// 0: an eighth of `max_connections` (at least 1).
    max_connections_per_address: usize,
    #[serde(deserialize_with = "seconds")]
    header_read_timeout_s: u64,
    #[serde(deserialize_with = "seconds")]
    idle_timeout_s: u64,
    #[serde(deserialize_with = "seconds")]
    tls_handshake_timeout_s: u64,
    #[serde(deserialize_with = "seconds")]
    http2_keep_alive_s: u64,
    /// KiB: the largest HTTP/1.1 request head (request line and headers), 8 at least.
    max_request_head_kib: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLimits {
    agent: Rate,
    human: Rate,
    admin: Rate,
    external: Rate,
    auth_failures: Rate,
    auth_failures_per_address: Rate,
    streams_per_party: usize,
}

/// `[tls]`: serve every route (gRPC included) over TLS with this PEM certificate chain and key.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawA2a {
    card_dir: PathBuf,
    /// The card's name, replacing card.toml's (other liaisons label this server with it).
    #[serde(default)]
    card_name: Option<String>,
    #[serde(deserialize_with = "seconds")]
    blocking_wait_s: u64,
    spec_version: crate::wire::errors::SpecVersion,
    rest_content_type: String,
    jwt: Option<RawJwt>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJwt {
    issuer: String,
    audience: String,
    jwks_file: Option<PathBuf>,
    jwks_url: Option<String>,
    #[serde(default = "default_leeway_s")]
    #[serde(deserialize_with = "seconds")]
    leeway_s: u64,
}

fn default_leeway_s() -> u64 {
    60
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInbox {
    #[serde(deserialize_with = "seconds")]
    max_wait_s: u64,
    max_waiters_per_person: usize,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClaims {
    #[serde(deserialize_with = "seconds")]
    lease_s: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPresence {
    #[serde(deserialize_with = "seconds")]
    ttl_s: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMcp {
    #[serde(deserialize_with = "string_list")]
    allowed_hosts: Vec<String>,
    #[serde(deserialize_with = "string_list")]
    allowed_origins: Vec<String>,
    sessions_per_token: usize,
    #[serde(deserialize_with = "seconds")]
    session_idle_s: u64,
    #[serde(deserialize_with = "seconds")]
    sse_keep_alive_s: u64,
}

/// A list of strings, from a TOML array or (as environment variables give) a comma-separated string.
fn string_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum List {
        Many(Vec<String>),
        One(String),
    }
    Ok(match List::deserialize(d)? {
        List::Many(v) => v,
        List::One(s) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

const DEFAULTS: &str = r#"
data_dir = "./liaison-data"
listen = "127.0.0.1:8080"
label_language = "en"
log_format = "text"
[inbox]
max_wait_s = 50
max_waiters_per_person = 32
[claims]
lease_s = 600
[presence]
ttl_s = 120
[a2a]
card_dir = "agent-card"
blocking_wait_s = 30
spec_version = "1.0.1"
rest_content_type = "application/json"
[mcp]
allowed_hosts = []
allowed_origins = []
sessions_per_token = 16
session_idle_s = 300
sse_keep_alive_s = 15
[server]
max_connections = 512
max_connections_per_address = 0
header_read_timeout_s = 10
idle_timeout_s = 60
tls_handshake_timeout_s = 10
http2_keep_alive_s = 20
max_request_head_kib = 8
[limits]
agent = { per_s = 200, burst = 400 }
human = { per_s = 50, burst = 100 }
admin = { per_s = 100, burst = 200 }
external = { per_s = 2000, burst = 4000 }
auth_failures = { per_s = 10, burst = 50 }
auth_failures_per_address = { per_s = 100, burst = 1000 }
streams_per_party = 32
[metrics]
[telemetry]
[outbox]
schedule_s = [5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 28800]
jitter = 0.2
disable_after = 5
lease_s = 60
connect_timeout_s = 5
timeout_s = 15
allow = []
concurrency = 64
[retention]
[database]
connect_timeout_s = 5
acquire_timeout_s = 5
statement_timeout_s = 10
ready_timeout_s = 2
[oauth]
enabled = true
access_token_ttl_s = 900
grant_ttl_days = 90
code_ttl_s = 120
registrations_per_hour = 20
max_registered_clients = 1000
"#;

/// The embedded defaults, as TOML text (the generated configuration reference reads them).
pub fn defaults() -> &'static str {
    DEFAULTS
}

/// Whether `table` deserializes as the raw configuration (before the checks of resolving it);
/// the error is serde's, naming the field it refused and, for an unknown one, the fields its
/// section knows. The generated configuration reference walks the types with it.
pub fn check_raw(table: toml::Table) -> Result<(), String> {
    toml::Value::Table(table)
        .try_into::<Raw>()
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Top-level fields without a default, which the environment may still set.
const OPTIONAL_FIELDS: &[&str] = &["public_url", "database_url", "tls"];

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub data_dir: PathBuf,
    pub listen: SocketAddr,
    /// Explicit public URL; when none, derived from the bound address.
    pub public_url: Option<String>,
    pub database_url: String,
    pub log_format: LogFormat,
    pub settings: Settings,
    /// Directory of the Agent Card definition (`card.toml`).
    pub card_dir: PathBuf,
    /// The card's name when set, replacing card.toml's.
    pub card_name: Option<String>,
    /// Longest wait of a blocking SendMessage before it returns the task as it stands.
    pub blocking_wait_s: u64,
    /// The A2A error table answered with (v1.0.1 unless configured).
    pub spec_version: crate::wire::errors::SpecVersion,
    /// The media type of A2A HTTP+JSON responses.
    pub rest_content_type: &'static str,
    /// JWTs of this issuer authenticate parties (`[a2a.jwt]`).
    pub jwt: Option<crate::a2a::jwt::JwtSettings>,
    pub mcp: McpSettings,
    /// Certificate and key to serve TLS with; plaintext (h2c for gRPC) when none.
    pub tls: Option<TlsFiles>,
    /// Connection limits and timeouts of the listener.
    pub server: ServerSettings,
    /// The bearer token `/metrics` wants (`[metrics] token`); open when none.
    pub metrics_token: Option<String>,
    /// Where traces are exported (`[telemetry]`).
    pub telemetry: crate::telemetry::Settings,
    /// How long each kind of record is kept (`[retention]`); forever unless configured.
    pub retention: crate::service::Retention,
    /// How long the store waits on the database (`[database]`).
    pub database: crate::store::Deadlines,
    /// The longest `/readyz` takes to answer (`[database] ready_timeout_s`).
    pub ready_timeout: Duration,
}

/// Values given on the command line; each overrides the file and the environment.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    pub config: Option<PathBuf>,
    pub data_dir: Option<PathBuf>,
    pub listen: Option<String>,
    pub public_url: Option<String>,
    pub database_url: Option<String>,
}

impl Config {
    /// Loads the layers. `env` is the process environment (passed in, so tests need no `set_var`).
    pub fn load(
        overrides: &Overrides,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Config> {
        let mut value: toml::Table = DEFAULTS.parse().expect("the embedded defaults parse");
        let env: Vec<(String, String)> = env
            .into_iter()
            .filter(|(k, _)| k.starts_with("LIAISON_"))
            .collect();
        let file = overrides.config.clone().or_else(|| {
            env.iter()
                .find(|(k, _)| k == "LIAISON_CONFIG")
                .map(|(_, v)| v.into())
        });
        if let Some(path) = &file {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("Could not read config file {}", path.display()))?;
            let table: toml::Table = text
                .parse()
                .with_context(|| format!("Invalid TOML in {}", path.display()))?;
            merge(&mut value, table);
        }
        for (key, raw) in &env {
            let name = key.trim_start_matches("LIAISON_").to_lowercase();
            let path: Vec<&str> = name.split("__").collect();
            // Only variables naming a configuration field or section count; others (LIAISON_CONFIG,
            // LIAISON_ADMIN_TOKEN, LIAISON_MASTER_KEY, …) belong to the CLI or to secrets.
            if !(value.contains_key(path[0]) || OPTIONAL_FIELDS.contains(&path[0]))
                || name == "config"
            {
                continue;
            }
            set_path(&mut value, &path, parse_scalar(raw));
        }
        let flags = [
            (
                "data_dir",
                overrides.data_dir.as_ref().map(|p| p.display().to_string()),
            ),
            ("listen", overrides.listen.clone()),
            ("public_url", overrides.public_url.clone()),
            ("database_url", overrides.database_url.clone()),
        ];
        for (key, v) in flags {
            if let Some(v) = v {
                value.insert(key.into(), toml::Value::String(v));
            }
        }
        let raw: Raw = toml::Value::Table(value)
            .try_into()
            .context("Invalid configuration")?;
        Self::resolve(raw)
    }

    fn resolve(raw: Raw) -> anyhow::Result<Config> {
        let listen: SocketAddr = raw
            .listen
            .parse()
            .with_context(|| format!("listen {:?} is not host:port", raw.listen))?;
        if raw.inbox.max_wait_s > 50 {
            anyhow::bail!("inbox.max_wait_s must be at most 50");
        }
        if let Some(url) = &raw.public_url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            anyhow::bail!("public_url {url:?} must start with http:// or https://");
        }
        let database_url = raw
            .database_url
            .clone()
            .unwrap_or_else(|| sqlite_url(&raw.data_dir));
        let rest_content_type = crate::a2a::handler::REST_CONTENT_TYPES
            .into_iter()
            .find(|t| *t == raw.a2a.rest_content_type)
            .with_context(|| {
                format!(
                    "a2a.rest_content_type {:?} must be application/json or application/a2a+json",
                    raw.a2a.rest_content_type
                )
            })?;
        let jwt = raw.a2a.jwt.clone().map(jwt_settings).transpose()?;
        let (server, limits) = bounds(&raw)?;
        let outbox = outbox_settings(&raw.outbox)?;
        let (database, ready_timeout) = raw.database.resolve()?;
        Ok(Config {
            data_dir: raw.data_dir,
            listen,
            public_url: raw.public_url.map(|u| u.trim_end_matches('/').to_owned()),
            database_url,
            log_format: raw.log_format,
            card_dir: raw.a2a.card_dir.clone(),
            card_name: raw.a2a.card_name.clone().filter(|n| !n.trim().is_empty()),
            blocking_wait_s: raw.a2a.blocking_wait_s,
            spec_version: raw.a2a.spec_version,
            rest_content_type,
            jwt,
            settings: Settings {
                label_language: raw.label_language,
                max_wait_s: raw.inbox.max_wait_s,
                max_waiters_per_person: raw.inbox.max_waiters_per_person,
                claim_lease_s: raw.claims.lease_s,
                presence_ttl_s: raw.presence.ttl_s,
                // Filled from agent-card/ by the app.
                skills: Vec::new(),
                default_skill: None,
                limits,
                outbox,
                tool_checks: raw.tool_checks.clone().resolve()?,
                oauth: raw.oauth.resolve()?,
            },
            mcp: McpSettings {
                allowed_hosts: raw.mcp.allowed_hosts,
                allowed_origins: raw.mcp.allowed_origins,
                sessions_per_token: raw.mcp.sessions_per_token,
                session_idle: Duration::from_secs(raw.mcp.session_idle_s),
                sse_keep_alive: Duration::from_secs(raw.mcp.sse_keep_alive_s),
            },
            tls: raw.tls,
            server,
            metrics_token: raw.metrics.token.filter(|t| !t.trim().is_empty()),
            telemetry: crate::telemetry::Settings {
                otlp_endpoint: raw.telemetry.otlp_endpoint.filter(|u| !u.trim().is_empty()),
            },
            retention: raw.retention.resolve(),
            database,
            ready_timeout,
        })
    }

    pub fn uses_sqlite(&self) -> bool {
        self.database_url.starts_with("sqlite:")
    }
}

/// `[outbox]`, checked: a usable schedule, a lease longer than a request, a valid allow-list.
fn outbox_settings(raw: &RawOutbox) -> anyhow::Result<crate::domain::delivery::OutboxSettings> {
    if raw.schedule_s.len() > 100 {
        anyhow::bail!("outbox.schedule_s holds at most 100 steps");
    }
    if !(0.0..=1.0).contains(&raw.jitter) {
        anyhow::bail!("outbox.jitter must be between 0 and 1");
    }
    for (name, v) in [
        ("outbox.connect_timeout_s", raw.connect_timeout_s),
        ("outbox.timeout_s", raw.timeout_s),
        ("outbox.concurrency", raw.concurrency as u64),
        ("outbox.disable_after", u64::from(raw.disable_after)),
    ] {
        if v == 0 {
            anyhow::bail!("{name} must be at least 1");
        }
    }
    if raw.lease_s <= raw.timeout_s {
        anyhow::bail!(
            "outbox.lease_s ({}) must exceed outbox.timeout_s ({}): a lease must outlive its request",
            raw.lease_s,
            raw.timeout_s
        );
    }
    let allow = crate::domain::address::AddressPolicy::parse(&raw.allow)
        .map_err(|e| anyhow::anyhow!("outbox.allow: {e}"))?;
    Ok(crate::domain::delivery::OutboxSettings {
        schedule: raw
            .schedule_s
            .iter()
            .map(|s| Duration::from_secs(*s))
            .collect(),
        jitter: raw.jitter,
        disable_after: raw.disable_after,
        lease: Duration::from_secs(raw.lease_s),
        connect_timeout: Duration::from_secs(raw.connect_timeout_s),
        timeout: Duration::from_secs(raw.timeout_s),
        allow,
        concurrency: raw.concurrency,
    })
}

/// The listener's and the service's limits, each checked to be usable.
fn bounds(raw: &Raw) -> anyhow::Result<(ServerSettings, LimitSettings)> {
    let s = &raw.server;
    if s.max_connections == 0 {
        anyhow::bail!("server.max_connections must be at least 1");
    }
    for (name, v) in [
        ("server.header_read_timeout_s", s.header_read_timeout_s),
        ("server.idle_timeout_s", s.idle_timeout_s),
        ("server.tls_handshake_timeout_s", s.tls_handshake_timeout_s),
        ("server.http2_keep_alive_s", s.http2_keep_alive_s),
        ("mcp.session_idle_s", raw.mcp.session_idle_s),
        ("mcp.sse_keep_alive_s", raw.mcp.sse_keep_alive_s),
    ] {
        if v == 0 {
            anyhow::bail!("{name} must be at least 1");
        }
    }
    if raw.mcp.session_idle_s <= raw.inbox.max_wait_s {
        anyhow::bail!(
            "mcp.session_idle_s ({}) must exceed inbox.max_wait_s ({}): a long-poll must not outlive its session",
            raw.mcp.session_idle_s,
            raw.inbox.max_wait_s
        );
    }
    if raw.mcp.sessions_per_token == 0 {
        anyhow::bail!("mcp.sessions_per_token must be at least 1");
    }
    let l = &raw.limits;
    for (name, rate) in [
        ("agent", l.agent),
        ("human", l.human),
        ("admin", l.admin),
        ("external", l.external),
        ("auth_failures", l.auth_failures),
        ("auth_failures_per_address", l.auth_failures_per_address),
    ] {
        if rate.per_s > 0 && rate.burst == 0 {
            anyhow::bail!("limits.{name}.burst must be at least 1 (or per_s = 0 for no limit)");
        }
    }
    if l.streams_per_party == 0 {
        anyhow::bail!("limits.streams_per_party must be at least 1");
    }
    if !(8..=1024).contains(&s.max_request_head_kib) {
        anyhow::bail!(
            "server.max_request_head_kib ({}) must be 8-1024",
            s.max_request_head_kib
        );
    }
    let per_address = match s.max_connections_per_address {
        0 => (s.max_connections / 8).max(1),
        n if n > s.max_connections => anyhow::bail!(
            "server.max_connections_per_address ({n}) must not exceed server.max_connections ({})",
            s.max_connections
        ),
        n => n,
    };
    let server = ServerSettings {
        max_connections: s.max_connections,
        max_connections_per_address: per_address,
        header_read_timeout: Duration::from_secs(s.header_read_timeout_s),
        idle_timeout: Duration::from_secs(s.idle_timeout_s),
        tls_handshake_timeout: Duration::from_secs(s.tls_handshake_timeout_s),
        http2_keep_alive: Duration::from_secs(s.http2_keep_alive_s),
        max_request_head: s.max_request_head_kib * 1024,
    };
    let limits = LimitSettings {
        agent: l.agent,
        human: l.human,
        admin: l.admin,
        external: l.external,
        auth_failures: l.auth_failures,
        auth_failures_per_address: l.auth_failures_per_address,
        streams_per_party: l.streams_per_party,
    };
    Ok((server, limits))
}

fn jwt_settings(raw: RawJwt) -> anyhow::Result<crate::a2a::jwt::JwtSettings> {
    use crate::a2a::jwt::{JwtSettings, KeySource};
    let keys = match (raw.jwks_file, raw.jwks_url) {
        (Some(file), None) => KeySource::File(file),
        (None, Some(url)) if url.starts_with("https://") || url.starts_with("http://") => {
            KeySource::Url(url)
        }
        (None, Some(url)) => anyhow::bail!("a2a.jwt.jwks_url {url:?} must be an http(s) URL"),
        _ => anyhow::bail!("a2a.jwt needs exactly one of jwks_file and jwks_url"),
    };
    if raw.issuer.is_empty() || raw.audience.is_empty() {
        anyhow::bail!("a2a.jwt.issuer and a2a.jwt.audience must not be empty");
    }
    Ok(JwtSettings {
        issuer: raw.issuer,
        audience: raw.audience,
        keys,
        leeway_s: raw.leeway_s,
    })
}

/// The SQLite database's file name in the data directory (the default database).
pub const SQLITE_FILE: &str = "liaison.db";

fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}", dir.join(SQLITE_FILE).display())
}

fn merge(into: &mut toml::Table, from: toml::Table) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(toml::Value::Table(a)), toml::Value::Table(b)) => merge(a, b),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

fn set_path(table: &mut toml::Table, path: &[&str], v: toml::Value) {
    match path {
        [] => {}
        [last] => {
            table.insert((*last).to_owned(), v);
        }
        [first, rest @ ..] => {
            let entry = table
                .entry((*first).to_owned())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            if let toml::Value::Table(t) = entry {
                set_path(t, rest, v);
            }
        }
    }
}

/// Environment values are numbers or booleans when they read as such, else strings.
fn parse_scalar(raw: &str) -> toml::Value {
    if let Ok(i) = raw.parse::<i64>() {
        toml::Value::Integer(i)
    } else if let Ok(b) = raw.parse::<bool>() {
        toml::Value::Boolean(b)
    } else {
        toml::Value::String(raw.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_resolve_and_layers_override_in_order() {
        let c = Config::load(&Overrides::default(), []).unwrap();
        assert_eq!(c.listen.port(), 8080);
        assert!(c.database_url.ends_with("liaison-data/liaison.db"));
        let env = [
            ("LIAISON_LISTEN".to_owned(), "127.0.0.1:9000".to_owned()),
            ("LIAISON_INBOX__MAX_WAIT_S".to_owned(), "30".to_owned()),
            ("LIAISON_LABEL_LANGUAGE".to_owned(), "fr".to_owned()),
        ];
        let flags = Overrides {
            listen: Some("127.0.0.1:9100".into()),
            ..Default::default()
        };
        let c = Config::load(&flags, env).unwrap();
        assert_eq!(c.listen.port(), 9100);
        assert_eq!(c.settings.max_wait_s, 30);
        assert_eq!(c.settings.label_language, LabelLanguage::Fr);
    }

    #[test]
    fn the_example_file_is_valid_and_unknown_fields_are_refused() {
        let example = Overrides {
            config: Some(
                concat!(env!("CARGO_MANIFEST_DIR"), "/config/liaison.example.toml").into(),
            ),
            ..Default::default()
        };
        Config::load(&example, []).unwrap();
        let env = [("LIAISON_INBOX__NO_SUCH_FIELD".to_owned(), "1".to_owned())];
        assert!(Config::load(&Overrides::default(), env).is_err());
    }

    #[test]
    fn the_request_head_bound_is_kib_from_8_to_1024() {
        let c = Config::load(&Overrides::default(), []).unwrap();
        assert_eq!(c.server.max_request_head, 8 * 1024);
        let c = with_env(&[("LIAISON_SERVER__MAX_REQUEST_HEAD_KIB", "64")]).unwrap();
        assert_eq!(c.server.max_request_head, 64 * 1024);
        for bad in ["0", "7", "1025"] {
            let e = with_env(&[("LIAISON_SERVER__MAX_REQUEST_HEAD_KIB", bad)]).unwrap_err();
            assert!(
                format!("{e:#}").contains("server.max_request_head_kib"),
                "{bad}: {e:#}"
            );
        }
    }

    #[test]
    fn durations_are_seconds_or_one_unit_in_the_file_and_the_environment() {
        let c = with_env(&[
            ("LIAISON_CLAIMS__LEASE_S", "10m"),
            ("LIAISON_MCP__SESSION_IDLE_S", "1h"),
            ("LIAISON_INBOX__MAX_WAIT_S", "30"),
        ])
        .unwrap();
        assert_eq!(c.settings.claim_lease_s, 600);
        assert_eq!(c.mcp.session_idle, Duration::from_secs(3_600));
        assert_eq!(c.settings.max_wait_s, 30);
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("liaison.toml");
        std::fs::write(
            &file,
            "[outbox]\nschedule_s = [5, \"1m\", \"1h\"]\n[presence]\nttl_s = \"2m\"\n",
        )
        .unwrap();
        let c = Config::load(
            &Overrides {
                config: Some(file),
                ..Default::default()
            },
            [],
        )
        .unwrap();
        assert_eq!(c.settings.presence_ttl_s, 120);
        let schedule: Vec<u64> = c
            .settings
            .outbox
            .schedule
            .iter()
            .map(|d| d.as_secs())
            .collect();
        assert_eq!(schedule, [5, 60, 3_600]);
        let e = format!(
            "{:#}",
            with_env(&[("LIAISON_CLAIMS__LEASE_S", "10 minutes")]).unwrap_err()
        );
        assert!(e.contains("30s, 10m, 24h"), "{e}");
    }

    fn with_env(pairs: &[(&str, &str)]) -> anyhow::Result<Config> {
        let env = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        Config::load(&Overrides::default(), env)
    }

    #[test]
    fn a2a_switches_resolve_and_bad_values_are_refused() {
        use crate::a2a::jwt::KeySource;
        use crate::wire::errors::SpecVersion;
        let c = with_env(&[]).unwrap();
        assert_eq!(c.spec_version, SpecVersion::V1_0_1);
        assert_eq!(c.rest_content_type, "application/json");
        assert!(c.jwt.is_none());
        let c = with_env(&[
            ("LIAISON_A2A__SPEC_VERSION", "1.0.0"),
            ("LIAISON_A2A__REST_CONTENT_TYPE", "application/a2a+json"),
            ("LIAISON_A2A__JWT__ISSUER", "https://issuer.test"),
            ("LIAISON_A2A__JWT__AUDIENCE", "https://liaison.test"),
            ("LIAISON_A2A__JWT__JWKS_URL", "https://issuer.test/jwks"),
        ])
        .unwrap();
        assert_eq!(c.spec_version, SpecVersion::V1_0_0);
        assert_eq!(c.rest_content_type, "application/a2a+json");
        let jwt = c.jwt.unwrap();
        assert_eq!(jwt.keys, KeySource::Url("https://issuer.test/jwks".into()));
        assert_eq!(jwt.leeway_s, 60);
        for bad in [
            vec![("LIAISON_A2A__SPEC_VERSION", "0.3")],
            vec![("LIAISON_A2A__REST_CONTENT_TYPE", "text/html")],
            // Neither key source.
            vec![
                ("LIAISON_A2A__JWT__ISSUER", "https://issuer.test"),
                ("LIAISON_A2A__JWT__AUDIENCE", "a"),
            ],
            // Both key sources.
            vec![
                ("LIAISON_A2A__JWT__ISSUER", "https://issuer.test"),
                ("LIAISON_A2A__JWT__AUDIENCE", "a"),
                ("LIAISON_A2A__JWT__JWKS_URL", "https://issuer.test/jwks"),
                ("LIAISON_A2A__JWT__JWKS_FILE", "/etc/jwks.json"),
            ],
        ] {
            assert!(with_env(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn database_deadlines_are_short_by_default_configurable_and_never_zero() {
        let c = Config::load(&Overrides::default(), []).unwrap();
        assert_eq!(c.database, crate::store::Deadlines::default());
        assert_eq!(c.ready_timeout, Duration::from_secs(2));
        let c = with_env(&[
            ("LIAISON_DATABASE__CONNECT_TIMEOUT_S", "2"),
            ("LIAISON_DATABASE__ACQUIRE_TIMEOUT_S", "3"),
            ("LIAISON_DATABASE__STATEMENT_TIMEOUT_S", "1m"),
            ("LIAISON_DATABASE__READY_TIMEOUT_S", "1"),
        ])
        .unwrap();
        assert_eq!(
            c.database,
            crate::store::Deadlines {
                connect: Duration::from_secs(2),
                acquire: Duration::from_secs(3),
                statement: Duration::from_secs(60),
            }
        );
        assert_eq!(c.ready_timeout, Duration::from_secs(1));
        for bad in [
            ("LIAISON_DATABASE__STATEMENT_TIMEOUT_S", "0"),
            ("LIAISON_DATABASE__CONNECT_TIMEOUT_S", "soon"),
            ("LIAISON_DATABASE__QUERY_TIMEOUT_S", "5"),
        ] {
            assert!(with_env(&[bad]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn retention_keeps_every_kind_forever_unless_configured() {
        let c = Config::load(&Overrides::default(), []).unwrap();
        assert_eq!(c.retention, crate::service::Retention::default());
        assert!(!c.retention.purges());
        let c = with_env(&[
            ("LIAISON_RETENTION__CLOSED_THREADS", "90d"),
            ("LIAISON_RETENTION__DELIVERY_ATTEMPTS", "3600"),
            ("LIAISON_RETENTION__AUDIT", "0"),
        ])
        .unwrap();
        assert_eq!(
            c.retention.closed_threads,
            Some(Duration::from_secs(90 * 86_400))
        );
        assert_eq!(
            c.retention.delivery_attempts,
            Some(Duration::from_secs(3_600))
        );
        assert_eq!((c.retention.task_events, c.retention.audit), (None, None));
        for bad in [
            ("LIAISON_RETENTION__MESSAGES", "1d"),
            ("LIAISON_RETENTION__AUDIT", "ten days"),
            ("LIAISON_RETENTION__TASK_EVENTS", "-1"),
        ] {
            assert!(with_env(&[bad]).is_err(), "{bad:?}");
        }
    }
}
