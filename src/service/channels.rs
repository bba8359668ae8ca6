//! Channels as admins shape them (SPEC §4): create, change members and their rights, set or
//! change the approval policy, remove; and the previews the console shows before a change
//! (`preview_channel`, `preview_members`, `preview_policy`), which check exactly what the change
//! itself checks. A policy that sends an impact to `approve` needs a member who can approve.
//! Every method needs scope `admin` and appends its audit entry in the change's transaction.

use serde::{Deserialize, Serialize};

use super::admin::{MAX_DESCRIPTION, conflict_as};
use super::{Caller, Result, Service, ServiceError, input};
use crate::domain::{
    ApprovalPolicy, ChannelName, PersonId, PersonKind, PolicyChange, Rights, Scope,
};
use crate::store::{ChannelRecord, MemberRecord, StoreError};

/// What `channel add` asks for.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelSpec {
    pub name: ChannelName,
    #[serde(default)]
    pub description: String,
    /// Members with all rights unless `rights` says otherwise.
    pub members: Vec<PersonId>,
    #[serde(default)]
    pub rights: Option<Rights>,
    #[serde(default)]
    pub policy: Option<ApprovalPolicy>,
}

/// What a member change would do: the channel before, the members added or updated, and the
/// members after.
#[derive(Debug, Clone)]
pub struct MembersPlan {
    pub before: ChannelRecord,
    pub upsert: Vec<MemberRecord>,
    pub after: Vec<MemberRecord>,
}

/// What `channel members` asks for.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemberChange {
    #[serde(default)]
    pub add: Vec<PersonId>,
    /// Rights for the added members (default: all).
    #[serde(default)]
    pub rights: Option<Rights>,
    #[serde(default)]
    pub remove: Vec<PersonId>,
}

fn check_policy(policy: &ApprovalPolicy) -> Result<()> {
    if crate::domain::APPROVAL_TTL_RANGE.contains(&policy.approval_ttl_s) {
        Ok(())
    } else {
        Err(ServiceError::invalid(format!(
            "approval_ttl_s {} is out of range: use {}-{} seconds",
            policy.approval_ttl_s,
            crate::domain::APPROVAL_TTL_RANGE.start(),
            crate::domain::APPROVAL_TTL_RANGE.end()
        )))
    }
}

/// Refuses a personal channel (`@alice`, SPEC §4b): its person's sessions make it, with her as
/// its only member, and nobody shapes it.
fn admin_managed(name: &ChannelName) -> Result<()> {
    match name.personal_owner() {
        Some(person) => Err(ServiceError::invalid(format!(
            "{name} is {person}'s personal channel (names starting with @ are made by a person's \
             sessions with her own agents): admins cannot create, change or remove one"
        ))),
        None => Ok(()),
    }
}

impl Service {
    pub async fn add_channel(&self, caller: &Caller, spec: ChannelSpec) -> Result<ChannelRecord> {
        let channel = self.preview_channel(caller, spec).await?;
        let audit = self.change(
            caller,
            "channel.added",
            &channel.name,
            None,
            super::audit::shown(&channel),
        );
        self.inner
            .store
            .insert_channel(channel.clone(), audit)
            .await
            .map_err(conflict_as("channel", &channel.name))?;
        tracing::info!(channel = %channel.name, members = channel.members.len(), "Channel added.");
        Ok(channel)
    }

    /// The channel `spec` would create, checked as [`Service::add_channel`] checks it (a name
    /// taken before is refused here too), without creating it: what the console shows before
    /// an admin confirms.
    pub async fn preview_channel(
        &self,
        caller: &Caller,
        spec: ChannelSpec,
    ) -> Result<ChannelRecord> {
        caller.require(Scope::Admin)?;
        input::storable("channel", &spec)?;
        admin_managed(&spec.name)?;
        if let Some(policy) = &spec.policy {
            check_policy(policy)?;
        }
        if spec.description.chars().count() > MAX_DESCRIPTION {
            return Err(ServiceError::invalid(format!(
                "description is longer than {MAX_DESCRIPTION} characters"
            )));
        }
        let rights = spec.rights.unwrap_or_else(Rights::all);
        let members = self.members_of(&spec.members, rights).await?;
        let channel = ChannelRecord {
            name: spec.name.clone(),
            description: spec.description,
            policy: spec.policy.unwrap_or_default(),
            created_at: self.now(),
            members,
            removed_at: None,
        };
        self.check_approvers(&channel.policy, &channel.members)
            .await?;
        if self.inner.store.channel(&channel.name).await?.is_some() {
            return Err(conflict_as("channel", &channel.name)(StoreError::Conflict(
                String::new(),
            )));
        }
        Ok(channel)
    }

    pub async fn change_members(
        &self,
        caller: &Caller,
        name: &ChannelName,
        change: MemberChange,
    ) -> Result<ChannelRecord> {
        let plan = self.preview_members(caller, name, &change).await?;
        let audit = self.change(
            caller,
            "channel.members_changed",
            name,
            Some(serde_json::json!({ "members": plan.before.members })),
            Some(serde_json::json!({ "members": plan.after })),
        );
        if !self
            .inner
            .store
            .change_members(name.clone(), plan.upsert, change.remove, audit)
            .await?
        {
            return Err(ServiceError::not_found("channel", name));
        }
        self.directory_changed();
        self.channel_for_admin(name).await
    }

    /// The members `change` would leave, checked as [`Service::change_members`] checks it,
    /// without changing them.
    pub async fn preview_members(
        &self,
        caller: &Caller,
        name: &ChannelName,
        change: &MemberChange,
    ) -> Result<MembersPlan> {
        caller.require(Scope::Admin)?;
        if change.add.iter().any(|p| change.remove.contains(p)) {
            return Err(ServiceError::invalid(
                "a person cannot be both added and removed",
            ));
        }
        let before = self.live_channel(name).await?;
        if let Some(p) = change
            .remove
            .iter()
            .find(|p| !before.members.iter().any(|m| &m.person == *p))
        {
            return Err(ServiceError::invalid(format!(
                "{p} is not a member of {name}; nothing was changed"
            )));
        }
        let upsert = self
            .members_of(&change.add, change.rights.unwrap_or_else(Rights::all))
            .await?;
        let mut after = before.members.clone();
        after.retain(|m| {
            !change.remove.contains(&m.person) && !upsert.iter().any(|n| n.person == m.person)
        });
        after.extend(upsert.iter().cloned());
        after.sort_by(|a, b| a.person.cmp(&b.person));
        self.check_approvers(&before.policy, &after).await?;
        Ok(MembersPlan {
            before,
            upsert,
            after,
        })
    }

    /// The policy `change` would give the channel, checked as [`Service::change_policy`]
    /// checks it, without changing it: the channel as it is, and the policy after.
    pub async fn preview_policy(
        &self,
        caller: &Caller,
        name: &ChannelName,
        change: &PolicyChange,
    ) -> Result<(ChannelRecord, ApprovalPolicy)> {
        caller.require(Scope::Admin)?;
        if change.is_empty() {
            return Err(ServiceError::invalid(
                "name at least one of none, code, database, production, outbound, approval_ttl_s, approval_via_elicitation",
            ));
        }
        // The other fields are valid already: only a new deadline needs checking.
        if let Some(ttl) = change.approval_ttl_s {
            check_policy(&ApprovalPolicy {
                approval_ttl_s: ttl,
                ..ApprovalPolicy::default()
            })?;
        }
        let before = self.live_channel(name).await?;
        let after = change.apply(before.policy);
        self.check_approvers(&after, &before.members).await?;
        Ok((before, after))
    }

    pub async fn set_policy(
        &self,
        caller: &Caller,
        name: &ChannelName,
        policy: ApprovalPolicy,
    ) -> Result<ChannelRecord> {
        caller.require(Scope::Admin)?;
        check_policy(&policy)?;
        let before = self.live_channel(name).await?;
        self.check_approvers(&policy, &before.members).await?;
        let audit = self.change(
            caller,
            "channel.policy_changed",
            name,
            Some(serde_json::json!({ "policy": before.policy })),
            Some(serde_json::json!({ "policy": policy })),
        );
        if !self
            .inner
            .store
            .set_policy(name.clone(), policy, audit)
            .await?
        {
            return Err(ServiceError::not_found("channel", name));
        }
        self.directory_changed();
        self.channel_for_admin(name).await
    }

    /// Changes only the policy fields `change` names (`PATCH`; [`Service::set_policy`] replaces
    /// the whole policy).
    pub async fn change_policy(
        &self,
        caller: &Caller,
        name: &ChannelName,
        change: PolicyChange,
    ) -> Result<ChannelRecord> {
        self.preview_policy(caller, name, &change).await?;
        // The store records the policy before and after under the row's lock.
        let audit = self.change(caller, "channel.policy_changed", name, None, None);
        let policy = self
            .inner
            .store
            .change_policy(name.clone(), change, audit)
            .await?
            .ok_or_else(|| ServiceError::not_found("channel", name))?;
        self.directory_changed();
        tracing::info!(channel = %name, ?policy, "Channel policy changed.");
        self.channel_for_admin(name).await
    }

    /// Removes a channel. Its threads and messages stay (its members keep `read`, so they can
    /// still read them, and so do the audit log and the console); nothing new can be posted or
    /// requested in it; its members, policy and name can no longer change, and the name is never
    /// reused. Approvals already pending keep their approvers until decided or expired.
    pub async fn remove_channel(&self, caller: &Caller, name: &ChannelName) -> Result<()> {
        caller.require(Scope::Admin)?;
        admin_managed(name)?;
        let before = self.inner.store.channel(name).await?;
        let audit = self.change(
            caller,
            "channel.removed",
            name,
            super::audit::shown(&before),
            None,
        );
        if !self
            .inner
            .store
            .remove_channel(name.clone(), self.now(), audit)
            .await?
        {
            return Err(ServiceError::not_found(
                "channel (or it is already removed)",
                name,
            ));
        }
        self.directory_changed();
        tracing::info!(channel = %name, "Channel removed.");
        Ok(())
    }

    pub async fn list_all_channels(&self, caller: &Caller) -> Result<Vec<ChannelRecord>> {
        caller.require(Scope::Admin)?;
        Ok(self.inner.store.channels(None).await?)
    }

    /// A channel an admin may still change: known and not removed.
    pub(super) async fn live_channel(&self, name: &ChannelName) -> Result<ChannelRecord> {
        admin_managed(name)?;
        let channel = self.channel_for_admin(name).await?;
        if channel.removed_at.is_some() {
            return Err(ServiceError::invalid(format!(
                "channel {name} was removed: its history stays, it cannot be changed"
            )));
        }
        Ok(channel)
    }

    async fn channel_for_admin(&self, name: &ChannelName) -> Result<ChannelRecord> {
        self.inner
            .store
            .channel(name)
            .await?
            .ok_or_else(|| ServiceError::not_found("channel", name))
    }

    /// Refuses a policy that needs a human's approval in a channel where no member could give
    /// it: every such request would be refused at once. A channel without members is being set
    /// up and passes; so does one whose policy needs no approval.
    async fn check_approvers(
        &self,
        policy: &ApprovalPolicy,
        members: &[MemberRecord],
    ) -> Result<()> {
        let needing = policy.needing_approval();
        if members.is_empty() || needing.is_empty() {
            return Ok(());
        }
        for m in members {
            if m.rights.contains(crate::domain::Right::Approve)
                && self
                    .inner
                    .store
                    .person(&m.person)
                    .await?
                    .is_some_and(|p| p.kind == PersonKind::Member)
            {
                return Ok(());
            }
        }
        Err(ServiceError::invalid(format!(
            "the policy needs a human's approval for {}, and no member of the channel has the \
             approve right: give a member `approve`, or set those to auto or deny; nothing was \
             changed",
            needing.join(", ")
        )))
    }

    async fn members_of(&self, people: &[PersonId], rights: Rights) -> Result<Vec<MemberRecord>> {
        if rights.is_empty() {
            return Err(ServiceError::invalid("members need at least one right"));
        }
        let mut members = Vec::with_capacity(people.len());
        for person in people {
            if self.inner.store.person(person).await?.is_none() {
                return Err(ServiceError::not_found("person", person));
            }
            if members.iter().any(|m: &MemberRecord| &m.person == person) {
                return Err(ServiceError::invalid(format!("{person} is listed twice")));
            }
            members.push(MemberRecord {
                person: person.clone(),
                rights,
            });
        }
        Ok(members)
    }
}
