//! Remote agents (SPEC §8b): registration by an admin (`add`, `list`, `show`, `refresh`,
//! `remove`), what internal agents see of them (name, channels, skills), and the
//! [`RemoteTarget`] the outbound bridge calls. The card is fetched and verified by
//! `crate::remote::card` through the outbound client, which the service builds once from
//! `[outbox]` (the same address allow-list and timeouts as every delivery).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Caller, ErrorCode, Result, Service, ServiceError, input};
use crate::domain::{ChannelName, PersonId, PersonKind, Scope, Timestamp};
use crate::keys::ring::Jwks;
use crate::remote::card::{self, CardError, Changes, Interface, Skill};
use crate::remote::{A2aClient, Binding, Credentials, RemoteAuth, RemoteTarget};
use crate::store::{PersonRecord, RemoteRecord, RemoteTaskRecord, RemoteUpdate};

/// Most remote tasks [`Service::remote_tasks`] answers.
pub const REMOTE_TASKS_SHOWN: i64 = 50;
/// Most extra headers per remote.
const MAX_HEADERS: usize = 16;
/// Longest secret, header value or URL accepted.
const MAX_SECRET: usize = 8 * 1024;
/// Headers liaison sets itself on every call, which an admin's extra header may not replace.
const RESERVED_HEADERS: [&str; 8] = [
    "authorization",
    "a2a-version",
    "content-type",
    "content-length",
    "accept",
    "host",
    "te",
    "transfer-encoding",
];

/// What `remote add` asks for.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RemoteSpec {
    /// The person id agents address it by.
    pub name: PersonId,
    pub card_url: String,
    /// Shown in labels; default: the card's `name`.
    #[serde(default)]
    pub display_name: Option<String>,
    /// Channels it joins, with rights read and post.
    #[serde(default)]
    pub channels: Vec<ChannelName>,
    /// Accept a card without signatures.
    #[serde(default)]
    pub allow_unsigned: bool,
    /// `grpc`, `jsonrpc` or `http-json`; default: the preference order.
    #[serde(default)]
    pub binding: Option<String>,
    #[serde(default)]
    pub credentials: Credentials,
}

/// What `remote refresh` asks for.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefreshSpec {
    /// Pin the keys the card is signed with now, even if they differ from the pinned ones.
    #[serde(default)]
    pub accept_new_keys: bool,
    /// Replace the credentials.
    #[serde(default)]
    pub credentials: Option<Credentials>,
}

/// A remote as admins see it (never a secret).
#[derive(Debug, Clone, Serialize)]
pub struct RemoteView {
    pub name: PersonId,
    pub display_name: String,
    pub card_url: String,
    /// Whether the card was verified; false when registered unsigned.
    pub signed: bool,
    /// Ids of the pinned keys.
    pub keys: Vec<String>,
    pub binding: Binding,
    /// The admin chose the binding (a refresh keeps it).
    pub binding_forced: bool,
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
    pub streaming: bool,
    pub push: bool,
    pub interfaces: Vec<Interface>,
    pub skills: Vec<Skill>,
    /// Which kind of credentials, and the names of extra headers; never their values.
    pub credentials: serde_json::Value,
    pub channels: Vec<ChannelName>,
    pub created_at: Timestamp,
    pub refreshed_at: Timestamp,
}

/// What a refresh found.
#[derive(Debug, Clone, Serialize)]
pub struct RefreshReport {
    pub changed: bool,
    pub changes: Changes,
    pub remote: RemoteView,
}

/// A remote agent as internal agents see it: whom they can ask for what.
#[derive(Debug, Clone, Serialize)]
pub struct RemoteAgent {
    pub name: PersonId,
    pub display_name: String,
    /// The channels it shares with the caller.
    pub channels: Vec<ChannelName>,
    /// Untrusted text from the remote's card: quote it when rendering.
    pub skills: Vec<Skill>,
    pub streaming: bool,
}

fn card_error(e: CardError) -> ServiceError {
    match e {
        CardError::InvalidUrl(m) | CardError::Refused(m) => ServiceError::invalid(m),
        CardError::Unreachable(m) => ServiceError::new(ErrorCode::RemoteUnreachable, m),
        CardError::Rejected(m) => ServiceError::new(ErrorCode::CardRejected, m),
    }
}

pub(super) fn internal(cause: impl std::fmt::Display) -> ServiceError {
    tracing::error!(error = %cause, "A remote agent operation failed.");
    ServiceError::new(ErrorCode::Internal, "internal error")
}

/// Checks credentials as given: non-empty secrets that fit in a header, valid and unreserved
/// header names, token URLs liaison may call.
fn check_credentials(
    c: &Credentials,
    policy: &crate::domain::address::AddressPolicy,
) -> Result<()> {
    let header_value = |what: &str, v: &str| -> Result<()> {
        if v.is_empty() || v.len() > MAX_SECRET {
            return Err(ServiceError::invalid(format!(
                "{what} must be 1-{MAX_SECRET} bytes"
            )));
        }
        if reqwest::header::HeaderValue::from_str(v).is_err() || v.chars().any(char::is_control) {
            return Err(ServiceError::invalid(format!(
                "{what} must be visible ASCII text usable in an HTTP header"
            )));
        }
        Ok(())
    };
    match &c.auth {
        None => {}
        Some(RemoteAuth::Bearer { token }) => header_value("the bearer token", token)?,
        Some(RemoteAuth::Oauth2 {
            token_url,
            client_id,
            client_secret,
            scopes,
        }) => {
            super::delivery::check_url(token_url, policy)?;
            header_value("the OAuth2 client id", client_id)?;
            header_value("the OAuth2 client secret", client_secret)?;
            if scopes
                .iter()
                .any(|s| s.is_empty() || s.contains(char::is_whitespace) || s.len() > 200)
            {
                return Err(ServiceError::invalid(
                    "OAuth2 scopes must be non-empty words without spaces",
                ));
            }
        }
    }
    if c.headers.len() > MAX_HEADERS {
        return Err(ServiceError::invalid(format!(
            "at most {MAX_HEADERS} extra headers"
        )));
    }
    for (i, h) in c.headers.iter().enumerate() {
        let lower = h.name.to_ascii_lowercase();
        if reqwest::header::HeaderName::from_bytes(h.name.as_bytes()).is_err() {
            return Err(ServiceError::invalid(format!(
                "{:?} is not a valid header name",
                h.name
            )));
        }
        if RESERVED_HEADERS.contains(&lower.as_str()) {
            return Err(ServiceError::invalid(format!(
                "header {} is set by liaison; use --auth for credentials",
                h.name
            )));
        }
        if c.headers[..i]
            .iter()
            .any(|o| o.name.eq_ignore_ascii_case(&h.name))
        {
            return Err(ServiceError::invalid(format!(
                "header {} is given twice",
                h.name
            )));
        }
        header_value(&format!("the value of header {}", h.name), &h.value)?;
    }
    Ok(())
}

fn parse_binding(b: Option<&str>) -> Result<Option<Binding>> {
    b.map(|s| {
        Binding::parse(s).ok_or_else(|| {
            ServiceError::invalid(format!("unknown binding {s:?}: grpc, jsonrpc or http-json"))
        })
    })
    .transpose()
}

pub(super) fn aad(name: &PersonId) -> String {
    format!("remote-credentials:{name}")
}

impl Service {
    /// The A2A client of the outbound bridge (one per service: its clones share OAuth2 tokens
    /// and gRPC connections).
    pub fn a2a_client(&self) -> &A2aClient {
        &self.inner.a2a_client
    }

    fn seal_credentials(&self, name: &PersonId, c: &Credentials) -> Result<Option<String>> {
        if *c == Credentials::default() {
            return Ok(None);
        }
        use base64::Engine as _;
        let plain = serde_json::to_vec(c).map_err(internal)?;
        let sealed = self
            .master_key()?
            .seal(&plain, aad(name).as_bytes())
            .map_err(internal)?;
        Ok(Some(
            base64::engine::general_purpose::STANDARD.encode(sealed),
        ))
    }

    fn open_credentials(&self, r: &RemoteRecord) -> Result<Credentials> {
        use base64::Engine as _;
        let Some(sealed) = &r.sealed_credentials else {
            return Ok(Credentials::default());
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(sealed)
            .map_err(internal)?;
        let plain = self
            .master_key()?
            .open(&bytes, aad(&r.person.id).as_bytes())
            .ok_or_else(|| internal("the credentials of a remote agent do not open"))?;
        serde_json::from_slice(&plain).map_err(internal)
    }

    /// Registers a remote agent from its card.
    pub async fn add_remote(&self, caller: &Caller, spec: RemoteSpec) -> Result<RemoteView> {
        self.add_remote_reviewed(caller, spec, None).await
    }

    /// Everything `add_remote` checks, and the record it would store with the binding chosen.
    pub(super) async fn prepare_remote(
        &self,
        caller: &Caller,
        spec: &RemoteSpec,
    ) -> Result<(RemoteRecord, String)> {
        caller.require(Scope::Admin)?;
        input::storable("remote", spec)?;
        let policy = &self.inner.settings.outbox.allow;
        super::delivery::check_url(&spec.card_url, policy)?;
        check_credentials(&spec.credentials, policy)?;
        let forced = parse_binding(spec.binding.as_deref())?;
        for (i, channel) in spec.channels.iter().enumerate() {
            if spec.channels[..i].contains(channel) {
                return Err(ServiceError::invalid(format!("{channel} is listed twice")));
            }
            if self.inner.store.channel(channel).await?.is_none() {
                return Err(ServiceError::not_found("channel", channel));
            }
        }
        if self.inner.store.person(&spec.name).await?.is_some() {
            return Err(taken_name(&spec.name));
        }
        let client = &self.inner.outbound;
        let fetched = card::fetch(client, &spec.card_url, spec.allow_unsigned)
            .await
            .map_err(card_error)?;
        let interface = card::choose(&fetched.interfaces, forced).map_err(card_error)?;
        super::delivery::check_url(&interface.url, policy).map_err(|e| {
            ServiceError::new(
                ErrorCode::CardRejected,
                format!(
                    "the card's {} interface is refused: {}",
                    interface.binding, e.message
                ),
            )
        })?;
        let display_name = match &spec.display_name {
            Some(d) => super::admin::clean_display_name(d)?,
            // Another liaison left at the shipped card name: "liaison" tells nobody which one
            // it is, so it is shown by the name the admin registered it under.
            None if fetched.name.trim() == crate::domain::DEFAULT_CARD_NAME => {
                tracing::warn!(
                    remote = %spec.name,
                    "The remote's card has the shipped name \"{}\"; it is shown as {} (give a \
                     display_name to choose another).",
                    crate::domain::DEFAULT_CARD_NAME,
                    spec.name
                );
                spec.name.to_string()
            }
            None => super::admin::clean_display_name(&fetched.name).map_err(|_| {
                ServiceError::invalid(
                    "the card's name is not usable as a display name (1-100 visible characters on one line); give one with display_name",
                )
            })?,
        };
        let now = self.now();
        let record = RemoteRecord {
            person: PersonRecord {
                id: spec.name.clone(),
                kind: PersonKind::Remote,
                display_name,
                created_at: now,
            },
            card_url: spec.card_url.clone(),
            card: fetched.json.clone(),
            jwks: serde_json::to_string(&fetched.keys).map_err(internal)?,
            unsigned: fetched.verified_by.is_none(),
            binding: interface.binding.as_str().to_owned(),
            binding_forced: forced.is_some(),
            url: interface.url.clone(),
            tenant: interface.tenant.clone(),
            streaming: fetched.streaming,
            push: fetched.push,
            sealed_credentials: self.seal_credentials(&spec.name, &spec.credentials)?,
            credentials_summary: spec.credentials.summary().to_string(),
            created_at: now,
            refreshed_at: now,
        };
        Ok((record, interface.binding.to_string()))
    }

    pub async fn list_remotes(&self, caller: &Caller) -> Result<Vec<RemoteView>> {
        caller.require(Scope::Admin)?;
        let mut out = Vec::new();
        for r in self.inner.store.remotes().await? {
            out.push(self.remote_view(r).await?);
        }
        Ok(out)
    }

    pub async fn show_remote(&self, caller: &Caller, name: &PersonId) -> Result<RemoteView> {
        caller.require(Scope::Admin)?;
        self.remote_view_of(name).await
    }

    pub(super) async fn remote_view_of(&self, name: &PersonId) -> Result<RemoteView> {
        let r = self
            .inner
            .store
            .remote(name)
            .await?
            .ok_or_else(|| ServiceError::not_found("remote agent", name))?;
        self.remote_view(r).await
    }

    pub(super) async fn remote_view(&self, r: RemoteRecord) -> Result<RemoteView> {
        let parsed = card::parse(&r.card, &r.card_url).map_err(internal)?;
        let keys: Jwks = serde_json::from_str(&r.jwks).map_err(internal)?;
        let channels = self
            .inner
            .store
            .channels(Some(&r.person.id))
            .await?
            .into_iter()
            .map(|c| c.name)
            .collect();
        Ok(RemoteView {
            name: r.person.id,
            display_name: r.person.display_name,
            card_url: r.card_url,
            signed: !r.unsigned,
            keys: keys.keys.into_iter().map(|k| k.kid).collect(),
            binding: Binding::parse(&r.binding).ok_or_else(|| internal("stored binding"))?,
            binding_forced: r.binding_forced,
            url: r.url,
            tenant: r.tenant,
            streaming: r.streaming,
            push: r.push,
            interfaces: parsed.interfaces,
            skills: parsed.skills,
            credentials: serde_json::from_str(&r.credentials_summary).map_err(internal)?,
            channels,
            created_at: r.created_at,
            refreshed_at: r.refreshed_at,
        })
    }

    /// Fetches the card again and stores what changed. New signing keys (or a card no longer
    /// signed) are refused with `keys_changed` unless `accept_new_keys`.
    pub async fn refresh_remote(
        &self,
        caller: &Caller,
        name: &PersonId,
        spec: RefreshSpec,
    ) -> Result<RefreshReport> {
        caller.require(Scope::Admin)?;
        let policy = &self.inner.settings.outbox.allow;
        if let Some(c) = &spec.credentials {
            input::storable("credentials", c)?;
            check_credentials(c, policy)?;
        }
        let r = self
            .inner
            .store
            .remote(name)
            .await?
            .ok_or_else(|| ServiceError::not_found("remote agent", name))?;
        let before = card::parse(&r.card, &r.card_url).map_err(internal)?;
        let before_keys: Jwks = serde_json::from_str(&r.jwks).map_err(internal)?;
        let before_binding =
            Binding::parse(&r.binding).ok_or_else(|| internal("stored binding"))?;
        let before_interface = Interface {
            binding: before_binding,
            url: r.url.clone(),
            tenant: r.tenant.clone(),
        };
        // An unsigned card is fetched here; whether it may replace a signed one is decided
        // below with the other key changes.
        let fetched = card::fetch(&self.inner.outbound, &r.card_url, true)
            .await
            .map_err(card_error)?;
        let forced = r.binding_forced.then_some(before_binding);
        let interface = card::choose(&fetched.interfaces, forced).map_err(card_error)?;
        super::delivery::check_url(&interface.url, policy).map_err(|e| {
            ServiceError::new(
                ErrorCode::CardRejected,
                format!(
                    "the card's {} interface is refused: {}",
                    interface.binding, e.message
                ),
            )
        })?;
        let changes = card::changes(
            &before,
            &before_interface,
            &before_keys,
            !r.unsigned,
            &fetched,
            &interface,
        );
        if changes.keys_changed() && !spec.accept_new_keys {
            let mut what = Vec::new();
            if !changes.keys_added.is_empty() {
                what.push(format!("new keys {}", changes.keys_added.join(", ")));
            }
            if !changes.keys_removed.is_empty() {
                what.push(format!("keys gone {}", changes.keys_removed.join(", ")));
            }
            if let Some((_, now_signed)) = changes.signed {
                what.push(if now_signed {
                    "the card is signed now".to_owned()
                } else {
                    "the card is no longer signed".to_owned()
                });
            }
            return Err(ServiceError::new(
                ErrorCode::KeysChanged,
                format!(
                    "the signing keys of {name} changed since they were pinned ({}); nothing was \
                     updated. Check with the remote's operator, then refresh again accepting the \
                     new keys (--accept-new-keys)",
                    what.join("; ")
                ),
            )
            .with_details(serde_json::to_value(&changes).map_err(internal)?));
        }
        let credentials = match &spec.credentials {
            Some(c) => Some((self.seal_credentials(name, c)?, c.summary().to_string())),
            None => None,
        };
        let update = RemoteUpdate {
            card: fetched.json.clone(),
            jwks: serde_json::to_string(&fetched.keys).map_err(internal)?,
            unsigned: fetched.verified_by.is_none(),
            binding: interface.binding.as_str().to_owned(),
            binding_forced: r.binding_forced,
            url: interface.url.clone(),
            tenant: interface.tenant.clone(),
            streaming: fetched.streaming,
            push: fetched.push,
            credentials,
            refreshed_at: self.now(),
        };
        let mut next = r.clone();
        next.card = update.card.clone();
        next.jwks = update.jwks.clone();
        next.unsigned = update.unsigned;
        next.binding = update.binding.clone();
        next.url = update.url.clone();
        next.tenant = update.tenant.clone();
        next.streaming = update.streaming;
        next.push = update.push;
        next.refreshed_at = update.refreshed_at;
        if let Some((_, summary)) = &update.credentials {
            next.credentials_summary = summary.clone();
        }
        let mut after = super::audit::shown(&self.remote_view(next).await?);
        if let Some(serde_json::Value::Object(a)) = &mut after {
            a.insert("accepted_new_keys".into(), changes.keys_changed().into());
        }
        let audit = self.change(
            caller,
            "remote.refreshed",
            name,
            super::audit::shown(&self.remote_view(r.clone()).await?),
            after,
        );
        if !self
            .inner
            .store
            .update_remote(name.clone(), update, audit)
            .await?
        {
            return Err(ServiceError::not_found("remote agent", name));
        }
        tracing::info!(remote = %name, changed = !changes.is_empty(), "Remote agent refreshed.");
        Ok(RefreshReport {
            changed: !changes.is_empty() || spec.credentials.is_some(),
            changes,
            remote: self.remote_view_of(name).await?,
        })
    }

    /// The remote tasks of the threads delegated to `name`, newest first, at most
    /// [`REMOTE_TASKS_SHOWN`]: how each is followed, its last state and trouble.
    pub async fn remote_tasks(
        &self,
        caller: &Caller,
        name: &PersonId,
    ) -> Result<Vec<RemoteTaskRecord>> {
        caller.require(Scope::Admin)?;
        Ok(self
            .inner
            .store
            .remote_tasks_of(name, REMOTE_TASKS_SHOWN)
            .await?)
    }

    /// Removes a remote: it leaves its channels and can no longer be addressed; its person
    /// record stays for the messages that name it.
    pub async fn remove_remote(&self, caller: &Caller, name: &PersonId) -> Result<()> {
        caller.require(Scope::Admin)?;
        let before = match self.inner.store.remote(name).await? {
            Some(r) => super::audit::shown(&self.remote_view(r).await?),
            None => None,
        };
        let audit = self.change(caller, "remote.removed", name, before, None);
        if !self
            .inner
            .store
            .remove_remote(name.clone(), self.now(), audit)
            .await?
        {
            return Err(ServiceError::not_found("remote agent", name));
        }
        self.directory_changed();
        tracing::info!(remote = %name, "Remote agent removed.");
        Ok(())
    }

    /// Where and how to call `person`, when it is a live remote agent.
    pub async fn remote_target(&self, person: &PersonId) -> Result<Option<RemoteTarget>> {
        let Some(r) = self.inner.store.remote(person).await? else {
            return Ok(None);
        };
        let credentials = self.open_credentials(&r)?;
        let skills = card::parse(&r.card, &r.card_url)
            .map(|p| p.skills.into_iter().map(|s| s.id).collect())
            .unwrap_or_default();
        Ok(Some(RemoteTarget {
            skills,
            binding: Binding::parse(&r.binding).ok_or_else(|| internal("stored binding"))?,
            keys: serde_json::from_str(&r.jwks).map_err(internal)?,
            person: r.person.id,
            url: r.url,
            tenant: r.tenant,
            streaming: r.streaming,
            push: r.push,
            credentials: Arc::new(credentials),
        }))
    }

    /// The remote agents that share a channel with the caller, with their skills.
    pub async fn remote_agents(&self, caller: &Caller) -> Result<Vec<RemoteAgent>> {
        caller.require_participant()?;
        let mut out = Vec::new();
        for (r, channels) in self.inner.store.remotes_visible_to(caller.id()).await? {
            let skills = card::parse(&r.card, &r.card_url)
                .map(|p| p.skills)
                .unwrap_or_default();
            out.push(RemoteAgent {
                name: r.person.id,
                display_name: r.person.display_name,
                channels,
                skills,
                streaming: r.streaming,
            });
        }
        Ok(out)
    }
}

/// The refusal of a name already taken.
pub(super) fn taken_name(name: &PersonId) -> ServiceError {
    ServiceError::new(
        ErrorCode::AlreadyExists,
        format!("a person named {name} already exists (ids are never reused, even after removal)"),
    )
}
