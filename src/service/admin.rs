//! Administration: persons, parties and tokens (channels: `channels`). Every method needs a caller with scope `admin`,
//! except [`Service::bootstrap`], which runs at start without one.

use serde::{Deserialize, Serialize};

use super::auth::{hash_secret, new_secret};
use super::{Caller, ErrorCode, Result, Service, ServiceError, input};
use crate::domain::{ChannelName, PersonId, PersonKind, Rights, Scope, Scopes, text};
use crate::store::{PartyRecord, PersonRecord, StoreError, TokenRecord};

/// What `token issue` asks for.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    pub person: PersonId,
    pub scopes: Scopes,
    /// Lifetime in seconds from now; none means no expiry.
    #[serde(default)]
    pub expires_in_s: Option<u64>,
    #[serde(default)]
    pub description: String,
}

/// A token just issued: the only time its secret is shown.
#[derive(Debug, Clone, Serialize)]
pub struct IssuedToken {
    #[serde(flatten)]
    pub token: TokenRecord,
    pub secret: String,
}

/// What `party add` asks for.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PartySpec {
    pub id: PersonId,
    pub display_name: String,
    /// The skill used when the party's message names none.
    #[serde(default)]
    pub default_skill: Option<String>,
    /// The `sub` of JWTs from the configured issuer that authenticate as this party.
    #[serde(default)]
    pub jwt_subject: Option<String>,
    /// Issue an `agent` bearer token for the party (default true).
    #[serde(default = "yes")]
    pub issue_token: bool,
    /// The channels it joins as it is added, with every right (default none). A party in no
    /// channel is refused everything until an admin adds it to one.
    #[serde(default)]
    pub channels: Vec<ChannelName>,
}

/// What adding a party made: the party, its token (secret shown once), the channels it joined,
/// and a warning when it joined none.
#[derive(Debug, Clone, Serialize)]
pub struct AddedParty {
    pub party: PartyRecord,
    pub token: Option<IssuedToken>,
    pub channels: Vec<ChannelName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

fn yes() -> bool {
    true
}

const MAX_DISPLAY_NAME: usize = 100;
/// Most channels a party joins as it is added.
const MAX_PARTY_CHANNELS: usize = 100;
pub(super) const MAX_DESCRIPTION: usize = 500;

pub(super) fn conflict_as(
    what: &str,
    id: &impl std::fmt::Display,
) -> impl FnOnce(StoreError) -> ServiceError {
    let message =
        format!("a {what} named {id} already exists (ids are never reused, even after removal)");
    move |e| match e {
        StoreError::Conflict(_) => ServiceError::new(ErrorCode::AlreadyExists, message),
        other => other.into(),
    }
}

/// A display name as it will be shown: bidi controls and other invisible characters removed,
/// unusual spaces made plain and collapsed (see [`text::display_name`]); one line of 1 to
/// [`MAX_DISPLAY_NAME`] visible characters.
pub(super) fn clean_display_name(raw: &str) -> Result<String> {
    input::storable_str("display_name", raw)?;
    let name = text::display_name(raw);
    if name.is_empty()
        || name.chars().count() > MAX_DISPLAY_NAME
        || raw.chars().any(text::is_line_break)
    {
        return Err(ServiceError::invalid(format!(
            "display_name must be one line of 1-{MAX_DISPLAY_NAME} visible characters"
        )));
    }
    Ok(name)
}

impl Service {
    /// Creates the first admin person and token if there is no person yet; returns the secret then.
    pub async fn bootstrap(&self) -> Result<Option<IssuedToken>> {
        let store = &self.inner.store;
        let admin = PersonId::parse("admin").expect("a valid slug");
        let people = store.persons().await?;
        if store.person(&admin).await?.is_some()
            || people
                .iter()
                .any(|p| p.id.as_str() != crate::domain::SERVER_PERSON)
        {
            return Ok(None);
        }
        let person = PersonRecord {
            id: admin.clone(),
            kind: PersonKind::Member,
            display_name: "Administrator".into(),
            created_at: self.now(),
        };
        let audit = self.server_change("person.added", &admin, super::audit::shown(&person));
        match store.insert_person(person, audit).await {
            Ok(()) => {}
            // Another replica bootstrapped at the same moment: it created (and printed) the token.
            Err(StoreError::Conflict(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        let spec = TokenSpec {
            person: admin,
            scopes: Scopes::default().with(Scope::Admin),
            expires_in_s: None,
            description: "bootstrap admin token".into(),
        };
        Ok(Some(self.issue_token_unchecked(spec, None).await?))
    }

    pub async fn add_person(
        &self,
        caller: &Caller,
        id: PersonId,
        kind: PersonKind,
        display_name: String,
    ) -> Result<PersonRecord> {
        caller.require(Scope::Admin)?;
        if kind == PersonKind::Remote {
            return Err(ServiceError::invalid(
                "remote agents are registered from their Agent Card: use `liaison remote add`",
            ));
        }
        let display_name = clean_display_name(&display_name)?;
        let person = PersonRecord {
            id: id.clone(),
            kind,
            display_name,
            created_at: self.now(),
        };
        let audit = self.change(
            caller,
            "person.added",
            &id,
            None,
            super::audit::shown(&person),
        );
        self.inner
            .store
            .insert_person(person.clone(), audit)
            .await
            .map_err(conflict_as("person", &id))?;
        tracing::info!(person = %id, kind = %kind, "Person added.");
        Ok(person)
    }

    /// Adds an external party: an external person with its A2A settings, and (unless `issue_token`
    /// is false) an `agent` token it authenticates with.
    pub async fn add_party(&self, caller: &Caller, spec: PartySpec) -> Result<AddedParty> {
        caller.require(Scope::Admin)?;
        input::storable("party", &spec)?;
        let display_name = clean_display_name(&spec.display_name)?;
        if let Some(skill) = &spec.default_skill
            && !self.inner.settings.skills.iter().any(|s| &s.id == skill)
        {
            let known: Vec<&str> = self
                .inner
                .settings
                .skills
                .iter()
                .map(|s| s.id.as_str())
                .collect();
            return Err(ServiceError::invalid(format!(
                "unknown skill {skill:?}; the skills are: {}",
                known.join(", ")
            )));
        }
        if spec
            .jwt_subject
            .as_ref()
            .is_some_and(|s| s.is_empty() || s.len() > 255)
        {
            return Err(ServiceError::invalid(
                "jwt_subject must be 1-255 characters",
            ));
        }
        let person = PersonRecord {
            id: spec.id.clone(),
            kind: PersonKind::External,
            display_name,
            created_at: self.now(),
        };
        let shown = PartyRecord {
            person: person.clone(),
            default_skill: spec.default_skill.clone(),
            jwt_subject: spec.jwt_subject.clone(),
        };
        let audit = self.change(
            caller,
            "party.added",
            &spec.id,
            None,
            super::audit::shown(&shown),
        );
        let joins = self.party_joins(caller, &spec).await?;
        match self
            .inner
            .store
            .insert_party(
                person.clone(),
                spec.default_skill.clone(),
                spec.jwt_subject.clone(),
                audit,
                joins,
            )
            .await
        {
            Ok(()) => {}
            // A channel removed since it was checked: nothing was written.
            Err(StoreError::NotFound(_)) => {
                return Err(ServiceError::invalid(
                    "one of the channels was removed meanwhile; nothing was changed",
                ));
            }
            Err(e) => return Err(conflict_as("person or JWT subject", &spec.id)(e)),
        }
        if !spec.channels.is_empty() {
            self.directory_changed();
        }
        let token = if spec.issue_token {
            let t = TokenSpec {
                person: spec.id.clone(),
                scopes: Scopes::default().with(Scope::Agent),
                expires_in_s: None,
                description: "party token".into(),
            };
            Some(self.issue_token_unchecked(t, Some(caller)).await?)
        } else {
            None
        };
        let warning = spec.channels.is_empty().then(|| {
            format!(
                "{} is in no channel: it is refused everything until an admin adds it to one \
                 (liaison channel members CHANNEL --add {}, or party add --channel CHANNEL)",
                spec.id, spec.id
            )
        });
        match &warning {
            Some(w) => tracing::warn!(party = %spec.id, "Party added; {w}."),
            None => tracing::info!(party = %spec.id, channels = ?spec.channels, "Party added."),
        }
        let party = PartyRecord {
            person,
            default_skill: spec.default_skill,
            jwt_subject: spec.jwt_subject,
        };
        Ok(AddedParty {
            party,
            token,
            channels: spec.channels,
            warning,
        })
    }

    /// The memberships `spec.channels` asks for, each with its audit entry, checked before
    /// anything is written: every channel live, none listed twice.
    async fn party_joins(
        &self,
        caller: &Caller,
        spec: &PartySpec,
    ) -> Result<Vec<(ChannelName, Rights, crate::store::AdminChange)>> {
        if spec.channels.len() > MAX_PARTY_CHANNELS {
            return Err(ServiceError::invalid(format!(
                "at most {MAX_PARTY_CHANNELS} channels at once"
            )));
        }
        let mut joins = Vec::with_capacity(spec.channels.len());
        for (i, name) in spec.channels.iter().enumerate() {
            if spec.channels[..i].contains(name) {
                return Err(ServiceError::invalid(format!(
                    "channel {name} is listed twice"
                )));
            }
            let before = self.live_channel(name).await?;
            let mut after = before.members.clone();
            after.push(crate::store::MemberRecord {
                person: spec.id.clone(),
                rights: Rights::all(),
            });
            after.sort_by(|a, b| a.person.cmp(&b.person));
            let audit = self.change(
                caller,
                "channel.members_changed",
                name,
                Some(serde_json::json!({ "members": before.members })),
                Some(serde_json::json!({ "members": after })),
            );
            joins.push((name.clone(), Rights::all(), audit));
        }
        Ok(joins)
    }

    /// Removes an external party as [`Service::remove_person`] removes a person (tokens revoked,
    /// out of every channel, id never reused); its JWT subject no longer authenticates. A member's
    /// id is "not found" here: members are removed with `person remove`.
    pub async fn remove_party(&self, caller: &Caller, id: &PersonId) -> Result<()> {
        caller.require(Scope::Admin)?;
        let Some(party) = self.inner.store.party(id).await? else {
            return Err(ServiceError::not_found("party", id));
        };
        self.remove(caller, id, "party.removed", super::audit::shown(&party))
            .await
    }

    pub async fn list_parties(&self, caller: &Caller) -> Result<Vec<PartyRecord>> {
        caller.require(Scope::Admin)?;
        Ok(self.inner.store.parties().await?)
    }

    /// The people an admin manages: members and parties, never the server's own voice
    /// (`liaison`, which no admin created, changes or removes).
    pub async fn list_persons(&self, caller: &Caller) -> Result<Vec<PersonRecord>> {
        caller.require(Scope::Admin)?;
        let mut people = self.inner.store.persons().await?;
        people.retain(|p| p.id.as_str() != crate::domain::SERVER_PERSON);
        Ok(people)
    }

    pub async fn remove_person(&self, caller: &Caller, id: &PersonId) -> Result<()> {
        caller.require(Scope::Admin)?;
        let before = self.inner.store.person(id).await?;
        self.remove(caller, id, "person.removed", super::audit::shown(&before))
            .await
    }

    /// Removes a person or a party, with the audit entry `event` showing `before`.
    async fn remove(
        &self,
        caller: &Caller,
        id: &PersonId,
        event: &'static str,
        before: Option<serde_json::Value>,
    ) -> Result<()> {
        if id == caller.id() {
            return Err(ServiceError::invalid("you cannot remove yourself"));
        }
        if id.as_str() == crate::domain::SERVER_PERSON {
            return Err(ServiceError::invalid(
                "liaison is the server's own voice in threads (rejections, expiries); it cannot be removed",
            ));
        }
        if !self
            .inner
            .store
            .remove_person(
                id.clone(),
                self.now(),
                self.change(caller, event, id, before, None),
            )
            .await?
        {
            return Err(ServiceError::not_found("person", id));
        }
        self.directory_changed();
        tracing::info!(person = %id, "Person removed.");
        Ok(())
    }

    pub async fn issue_token(&self, caller: &Caller, spec: TokenSpec) -> Result<IssuedToken> {
        caller.require(Scope::Admin)?;
        input::storable("token", &spec)?;
        self.issue_token_unchecked(spec, Some(caller)).await
    }

    /// Issues a token as `by` (none: the server, at bootstrap) asked, with its audit entry. A
    /// member's agent token is a connection named after its description (SPEC §2; she renames
    /// it on Connect).
    pub(super) async fn issue_token_unchecked(
        &self,
        spec: TokenSpec,
        by: Option<&Caller>,
    ) -> Result<IssuedToken> {
        self.issue_token_as(spec, super::connections::NewConnection::default(), by)
            .await
    }

    /// [`Service::issue_token_unchecked`], with the connection's name and rights when the token
    /// is a member's agent token (none: derived from the description, and the defaults).
    pub(super) async fn issue_token_as(
        &self,
        spec: TokenSpec,
        connection: super::connections::NewConnection,
        by: Option<&Caller>,
    ) -> Result<IssuedToken> {
        if spec.scopes.is_empty() {
            return Err(ServiceError::invalid(
                "a token needs at least one scope: agent, human or admin",
            ));
        }
        if spec.description.chars().count() > MAX_DESCRIPTION {
            return Err(ServiceError::invalid(format!(
                "description is longer than {MAX_DESCRIPTION} characters"
            )));
        }
        let person = self
            .inner
            .store
            .person(&spec.person)
            .await?
            .ok_or_else(|| ServiceError::not_found("person", &spec.person))?;
        if person.kind == PersonKind::Remote {
            return Err(ServiceError::invalid(
                "remote agents get no liaison token: liaison calls them, they do not call liaison",
            ));
        }
        if person.kind == PersonKind::External
            && spec.scopes != Scopes::default().with(Scope::Agent)
        {
            return Err(ServiceError::invalid(
                "external parties get `agent` tokens only",
            ));
        }
        let now = self.now();
        let expires_at = match spec.expires_in_s {
            Some(0) => return Err(ServiceError::invalid("expires_in_s must be at least 1")),
            Some(s) => Some(now.plus_secs(s)),
            None => None,
        };
        let (connection, rights) =
            if person.kind == PersonKind::Member && spec.scopes.contains(Scope::Agent) {
                let name = match connection.name {
                    Some(name) => name,
                    None => {
                        self.free_connection_name(&person.id, &spec.description)
                            .await?
                    }
                };
                (Some(name), connection.rights)
            } else if connection.name.is_some() || connection.rights.is_some() {
                return Err(ServiceError::invalid(
                    "only a member's agent token is a connection with a name and rights",
                ));
            } else {
                (None, None)
            };
        let (id, secret) = new_secret();
        let token = TokenRecord {
            id,
            person: spec.person,
            scopes: spec.scopes,
            description: spec.description,
            created_at: now,
            expires_at,
            revoked_at: None,
            last_used_at: None,
            connection,
            rights,
        };
        let shown = super::audit::shown(&token);
        let audit = match by {
            Some(c) => self.change(c, "token.issued", &token.id, None, shown),
            None => self.server_change("token.issued", &token.id, shown),
        };
        self.inner
            .store
            .insert_token(token.clone(), hash_secret(&secret), audit)
            .await
            .map_err(super::connections::name_taken)?;
        tracing::info!(token = %token.id, person = %token.person, scopes = %token.scopes, "Token issued.");
        Ok(IssuedToken { token, secret })
    }

    pub async fn list_tokens(
        &self,
        caller: &Caller,
        person: Option<&PersonId>,
    ) -> Result<Vec<TokenRecord>> {
        caller.require(Scope::Admin)?;
        Ok(self.inner.store.tokens(person).await?)
    }

    /// Revokes at once: the next request with this token is refused.
    pub async fn revoke_token(&self, caller: &Caller, id: &str) -> Result<()> {
        caller.require(Scope::Admin)?;
        let token = self.inner.store.token_by_id(id).await?;
        let audit = self.change(
            caller,
            "token.revoked",
            id,
            super::audit::shown(&token),
            None,
        );
        if !self
            .inner
            .store
            .revoke_token(id.to_owned(), self.now(), audit)
            .await?
        {
            return Err(ServiceError::not_found(
                "token (or it is already revoked)",
                id,
            ));
        }
        match &token {
            // Its long-polls end and its MCP sessions close at once.
            Some(t) => self.token_revoked(t),
            None => self.directory_changed(),
        }
        tracing::info!(token = %id, "Token revoked.");
        Ok(())
    }
}
