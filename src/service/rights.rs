//! Rights per connection (SPEC §4b): what a member lets each of her agents do, per impact —
//! `allowed` (her command is the authorisation), `confirm` (she allows each one once) or `off`
//! (refused at posting). Enforced here, on every front, whatever the prompt says.
//!
//! - Her command, written in person, to her own connections only: the rights of the connections
//!   it addresses decide (the strictest of them; "any of my agents" is all her live ones).
//!   `allowed` needs no approval, `confirm` creates an approval only she decides, `off` is refused.
//! - A connection's own request with an effect to her other agents only: its own rights decide in
//!   the same way (her agents act on her authority, so her rights bound it).
//! - Anything asked of other people, by her or her agents, is theirs to approve: the channel's
//!   policy (§5) applies as for everyone, so an agent whose production right is `off` may still
//!   ask a teammate, whose human decides. Requests from other people are unchanged.
//! - A channel policy that says `deny` refuses the request whatever her rights say: the admin's
//!   rule is the outer bound.

use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::{ConnectionRights, Impact, Kind, PersonId, RightLevel};
use crate::store::Addressing;

/// What a request's rights say before the channel's policy is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RightsSay {
    /// Not a request to her own agents: the channel's policy decides, as for everyone.
    Policy,
    /// Her command or her agent's request to her agents, with an `allowed` impact.
    Allowed,
    /// Each such action needs her "allow once": an approval only she decides.
    Confirm,
}

/// The level of `impact` in the strictest of `rights`.
fn strictest(rights: &[ConnectionRights], impact: Impact) -> RightLevel {
    rights
        .iter()
        .map(|r| r.level(impact))
        .max_by_key(|l| match l {
            RightLevel::Allowed => 0,
            RightLevel::Confirm => 1,
            RightLevel::Off => 2,
        })
        .unwrap_or(RightLevel::Allowed)
}

impl Service {
    /// What the rights of the connections involved say of a post (SPEC §4b); `off` is refused
    /// here, with nothing written.
    pub(super) async fn rights_say(
        &self,
        caller: &Caller,
        kind: Kind,
        impact: Option<Impact>,
        recipients: &[PersonId],
        addressing: &Addressing,
    ) -> Result<RightsSay> {
        let Some(impact) = impact.filter(|_| kind == Kind::Request) else {
            return Ok(RightsSay::Policy);
        };
        let own_only = !recipients.is_empty() && recipients.iter().all(|p| p == caller.id());
        if !own_only {
            return Ok(RightsSay::Policy);
        }
        let (level, whose) = match &caller.connection {
            Some(c) => (
                c.rights.level(impact),
                format!("your connection {}", c.name),
            ),
            None => {
                // Her command: the connections it reaches.
                let narrowed: Vec<&str> = addressing
                    .narrow
                    .iter()
                    .filter(|(p, _)| p == caller.id())
                    .map(|(_, r)| r.as_str())
                    .collect();
                let now = self.now();
                let mut rights = Vec::new();
                let mut names = Vec::new();
                for t in self.inner.store.tokens(Some(caller.id())).await? {
                    let live = t.revoked_at.is_none() && t.expires_at.is_none_or(|e| e > now);
                    let Some(name) = &t.connection else { continue };
                    if live && (narrowed.is_empty() || narrowed.contains(&t.id.as_str())) {
                        rights.push(t.rights.unwrap_or_default());
                        names.push(name.to_string());
                    }
                }
                (
                    strictest(&rights, impact),
                    format!("connection {}", names.join(", ")),
                )
            }
        };
        match level {
            RightLevel::Off => Err(ServiceError::new(
                ErrorCode::DeniedByPolicy,
                format!(
                    "the rights of {whose} say `off` for impact {impact}: nothing was posted; \
                     its person can change them on Connect"
                ),
            )),
            RightLevel::Allowed => Ok(RightsSay::Allowed),
            RightLevel::Confirm => Ok(RightsSay::Confirm),
        }
    }
}
