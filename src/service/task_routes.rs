//! Where an external party's task goes: the skills of the Agent Card (`agent-card/`), each the
//! route of a task into one channel with its kind and impact, and which of them a party may use
//! (those whose channel it may post in).

use super::{Caller, Result, Service, ServiceError};
use crate::domain::{ChannelName, Impact, Kind, PersonId};

/// A skill and the route a task sent to it takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRoute {
    pub id: String,
    pub channel: ChannelName,
    pub kind: Kind,
    pub impact: Option<Impact>,
    /// A conversational skill (`reply = "message"` in `agent-card/`): a single reply within a
    /// blocking wait goes back to the party as a bare A2A `Message` ([`Service::direct_answer`]).
    pub direct_answers: bool,
}

impl Service {
    /// The skills a party may use (for the extended card): all configured skills whose channel
    /// the party may post in.
    pub async fn skills_for(&self, caller: &Caller) -> Result<Vec<SkillRoute>> {
        caller.require_party()?;
        let mut out = Vec::new();
        for s in &self.inner.settings.skills {
            if self.may_use(caller, s).await? {
                out.push(s.clone());
            }
        }
        Ok(out)
    }

    /// Whether the party may post in the channel the skill routes to.
    pub(super) async fn may_use(&self, caller: &Caller, skill: &SkillRoute) -> Result<bool> {
        let channel = self.inner.store.channel(&skill.channel).await?;
        Ok(channel
            .and_then(|c| c.member(caller.id()).map(|m| m.rights))
            .is_some_and(|r| r.contains(crate::domain::Right::Post)))
    }

    /// The first skill the party may use whose route is what `envelope` describes (kind, and a
    /// request's impact); none when no such skill is open to it.
    pub(super) async fn route_of_envelope(
        &self,
        caller: &Caller,
        envelope: &crate::domain::Envelope,
    ) -> Result<Option<SkillRoute>> {
        for skill in &self.inner.settings.skills {
            if envelope.matches(skill.kind, skill.impact) && self.may_use(caller, skill).await? {
                return Ok(Some(skill.clone()));
            }
        }
        Ok(None)
    }

    /// The skill a party's message names, or the party's default, or the server's.
    pub(super) async fn route_for(
        &self,
        party: &PersonId,
        skill: Option<&str>,
    ) -> Result<SkillRoute> {
        let settings = &self.inner.settings;
        let chosen = match skill {
            Some(s) => s.to_owned(),
            None => {
                let party_default = self
                    .inner
                    .store
                    .party(party)
                    .await?
                    .and_then(|p| p.default_skill);
                party_default.or_else(|| settings.default_skill.clone()).ok_or_else(|| {
                    ServiceError::invalid("name a skill in message.metadata.skill; no default skill is configured")
                })?
            }
        };
        settings
            .skills
            .iter()
            .find(|s| s.id == chosen)
            .cloned()
            .ok_or_else(|| {
                let known: Vec<&str> = settings.skills.iter().map(|s| s.id.as_str()).collect();
                ServiceError::invalid(format!(
                    "unknown skill {chosen:?}; the skills are: {}",
                    known.join(", ")
                ))
            })
    }
}
