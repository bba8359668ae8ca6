//! A member's agent connections (SPEC §2, §4b): every `agent` token of a member is a connection
//! with a name she chose (a slug unique among her live connections, addressed as
//! `alice/claude-laptop`) and rights per impact. The name is bound to the credential, so the
//! server knows it; the self-declared agent identity is never used in its place.
//!
//! How consumers relate to connections: a consumer (`inbox`'s `consumer`) belongs to the
//! credential that reads with it. Two connections using the name `claude` have two cursors;
//! renaming a connection keeps its cursors (they hang on the credential, not on the name), and
//! no connection can read another's cursor. The person's own credentials (a `human` token) keep
//! plain consumer names. A connection reading a consumer name for the first time starts where
//! the person's plain consumer of that name stands (how a consumer used before connections
//! existed carries over without a single entry delivered twice).
//!
//! Only the member herself (a `human` credential) names, renames, changes the rights of and
//! revokes her connections; unknown and foreign connections look the same.

use serde::{Deserialize, Serialize};

use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::{ConnectionRights, ConnectionSlug, PersonId, PersonKind, Reader, Scope};
use crate::store::{StoreError, TokenRecord};

/// The connection a new agent token becomes: its name (none: derived from the token's
/// description) and rights (none: the defaults).
#[derive(Debug, Clone, Default)]
pub struct NewConnection {
    pub name: Option<ConnectionSlug>,
    pub rights: Option<ConnectionRights>,
}

/// The connection a request arrived with: the credential, its name and its rights.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallerConnection {
    /// The token's id: what inbox entries, consumers and claims are keyed by.
    pub token: String,
    pub name: ConnectionSlug,
    pub rights: ConnectionRights,
}

/// What a member may change of one of her connections.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ConnectionUpdate {
    /// A new name: 1–32 of `a-z`, `0-9`, `-`, unique among her live connections.
    #[serde(default)]
    pub name: Option<ConnectionSlug>,
    /// New rights per impact.
    #[serde(default)]
    pub rights: Option<ConnectionRights>,
}

/// A member's own credential (a `human` one): only she manages her connections and tokens.
pub(super) fn own(caller: &Caller) -> Result<()> {
    caller.require(Scope::Human)?;
    if caller.person.kind != PersonKind::Member {
        return Err(ServiceError::forbidden(
            "only members connect their own agents",
        ));
    }
    Ok(())
}

/// The error a taken connection name becomes.
pub(super) fn name_taken(e: StoreError) -> ServiceError {
    match e {
        StoreError::Conflict(c) if c == "connection name taken" => ServiceError::new(
            ErrorCode::AlreadyExists,
            "another of your live connections has this name; choose another",
        ),
        other => other.into(),
    }
}

/// A connection name made from free text: lowercase letters and digits, every other run of
/// characters one `-`, at most 32; `agent` when nothing is left.
pub fn slug_from(text: &str) -> ConnectionSlug {
    let mut out = String::new();
    for c in text.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= 32 {
            break;
        }
    }
    let out = out.trim_end_matches('-');
    ConnectionSlug::parse(if out.is_empty() { "agent" } else { out })
        .unwrap_or_else(|_| ConnectionSlug::parse("agent").expect("a valid name"))
}

impl Caller {
    /// Who this caller reads inboxes as (SPEC §4b): its connection, or the person herself.
    pub fn reader(&self) -> Reader {
        match &self.connection {
            Some(c) => Reader::Connection(c.token.clone()),
            None => Reader::Person,
        }
    }
}

impl Service {
    /// The connection of a member's agent token, as the caller it authenticates carries it.
    pub(super) fn caller_connection(token: &TokenRecord, member: bool) -> Option<CallerConnection> {
        let name = token.connection.clone()?;
        (member && token.scopes.contains(Scope::Agent)).then(|| CallerConnection {
            token: token.id.clone(),
            name,
            rights: token.rights.unwrap_or_default(),
        })
    }

    /// A name for a new connection of `person`: the one `description` suggests, with `-2`,
    /// `-3`… when another live connection holds it.
    pub(super) async fn free_connection_name(
        &self,
        person: &PersonId,
        description: &str,
    ) -> Result<ConnectionSlug> {
        let taken: Vec<ConnectionSlug> = self
            .inner
            .store
            .tokens(Some(person))
            .await?
            .into_iter()
            .filter(|t| t.revoked_at.is_none())
            .filter_map(|t| t.connection)
            .collect();
        let base = slug_from(description);
        if !taken.contains(&base) {
            return Ok(base);
        }
        for n in 2.. {
            let suffix = format!("-{n}");
            let stem: String = base.as_str().chars().take(32 - suffix.len()).collect();
            let candidate =
                ConnectionSlug::parse(format!("{}{suffix}", stem.trim_end_matches('-')))
                    .map_err(|e| ServiceError::invalid(e.0))?;
            if !taken.contains(&candidate) {
                return Ok(candidate);
            }
        }
        unreachable!("the loop returns")
    }

    /// The live connection `name` of `person` (none when unknown, revoked or expired).
    pub(super) async fn connection_named(
        &self,
        person: &PersonId,
        name: &ConnectionSlug,
    ) -> Result<Option<TokenRecord>> {
        let now = self.now();
        Ok(self
            .inner
            .store
            .tokens(Some(person))
            .await?
            .into_iter()
            .find(|t| {
                t.connection.as_ref() == Some(name)
                    && t.revoked_at.is_none()
                    && t.expires_at.is_none_or(|e| e > now)
            }))
    }

    /// The name of the connection whose token is `token` (none when it is not a connection).
    pub(super) async fn connection_name(&self, token: &str) -> Result<Option<ConnectionSlug>> {
        Ok(self
            .inner
            .store
            .token_by_id(token)
            .await?
            .and_then(|t| t.connection))
    }

    /// [`Service::connection_name`] as `caller` sees it: its own connection (an agent reading
    /// what it claimed or wrote) named as its request authenticated it, without a read (a rename
    /// changes the directory, so the next request has the new name).
    pub(super) async fn connection_name_for(
        &self,
        caller: &Caller,
        token: &str,
    ) -> Result<Option<ConnectionSlug>> {
        match &caller.connection {
            Some(own) if own.token == token => Ok(Some(own.name.clone())),
            _ => self.connection_name(token).await,
        }
    }

    /// Renames one of the caller's own connections, or changes its rights; audited. Unknown,
    /// foreign and revoked connections answer `not_found` alike.
    pub async fn update_own_connection(
        &self,
        caller: &Caller,
        token: &str,
        update: ConnectionUpdate,
    ) -> Result<TokenRecord> {
        own(caller)?;
        if update.name.is_none() && update.rights.is_none() {
            return Err(ServiceError::invalid(
                "give a new name or new rights for the connection",
            ));
        }
        let before = self
            .inner
            .store
            .token_by_id(token)
            .await?
            .filter(|t| {
                &t.person == caller.id() && t.connection.is_some() && t.revoked_at.is_none()
            })
            .ok_or_else(|| ServiceError::not_found("connection", token))?;
        let event = if update.name.is_some() {
            "connection.renamed"
        } else {
            "connection.rights_changed"
        };
        let shown = |t: &TokenRecord| {
            Some(serde_json::json!({
                "connection": t.connection,
                "rights": t.rights.unwrap_or_default(),
            }))
        };
        let mut after = before.clone();
        if let Some(name) = &update.name {
            after.connection = Some(name.clone());
        }
        if let Some(rights) = update.rights {
            after.rights = Some(rights);
        }
        let audit = self.change(caller, event, token, shown(&before), shown(&after));
        let done = self
            .inner
            .store
            .update_connection(
                caller.id().clone(),
                token.to_owned(),
                update.name,
                update.rights,
                audit,
            )
            .await
            .map_err(name_taken)?;
        if !done {
            return Err(ServiceError::not_found("connection", token));
        }
        self.directory_changed();
        tracing::info!(token = %token, person = %caller.id(), event, "Connection changed.");
        Ok(after)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_free_text_are_valid_slugs() {
        assert_eq!(
            slug_from("Claude on my laptop").as_str(),
            "claude-on-my-laptop"
        );
        assert_eq!(slug_from("  codex!! ").as_str(), "codex");
        assert_eq!(slug_from("éé").as_str(), "agent");
        assert_eq!(slug_from("").as_str(), "agent");
        assert_eq!(slug_from(&"x".repeat(50)).as_str().len(), 32);
        assert_eq!(slug_from("a\u{2028}b").as_str(), "a-b");
    }
}
