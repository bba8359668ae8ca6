//! Her own tool rules (SPEC §5b): besides the built-in rules and `[tool_checks] rules`, each
//! person may add rules of her own in her settings (the console's Connect page, or
//! `PUT /api/v1/tool-rules`), read with the others for every call of **her** connections and no
//! one else's. A rule gives a tool call an impact; her connections' rights then decide what that
//! impact needs (allowed, confirm, off).
//!
//! Choices where the spec is silent, written down here and in the members' guide:
//!
//! - **Only stricter.** Her rules join the others and the strictest impact found wins, so she
//!   cannot make a call the configured rules call `production` count as less. A tool no rule
//!   names counts as `code`; her rule naming it decides its level (it is her own agent, as her
//!   rights are hers to set).
//! - **In person.** Only she changes them, with a human credential that is not a connection's:
//!   an agent cannot loosen the checks on its own calls. Reading them is open to her agents too
//!   (the rules are not secret to the agent they bind).
//! - **Bounded.** At most [`MAX_PERSON_RULES`] rules, each checked as the configured ones are
//!   (a tool name or a prefix followed by `*`; words made of storable characters). A refused
//!   list changes nothing. Each change is audited (`tool_rules.changed`, before and after).

use super::{Caller, Result, Service, ServiceError};
use crate::domain::tool_check::ToolRule;
use crate::domain::{PersonKind, Scope};

/// Most rules one person keeps.
pub const MAX_PERSON_RULES: usize = 50;

impl Service {
    /// The rules every call is checked by before hers: the built-in ones, then
    /// `[tool_checks] rules` (shown to members so they know what already applies).
    pub fn configured_tool_rules(&self) -> &[ToolRule] {
        &self.inner.settings.tool_checks.rules
    }

    /// The caller's person's own tool rules, in her order.
    pub async fn tool_rules(&self, caller: &Caller) -> Result<Vec<ToolRule>> {
        caller.require_participant()?;
        Ok(self.inner.store.person_tool_rules(caller.id()).await?)
    }

    /// Replaces her own tool rules with `rules` (an empty list removes them all).
    pub async fn set_tool_rules(
        &self,
        caller: &Caller,
        rules: Vec<ToolRule>,
    ) -> Result<Vec<ToolRule>> {
        caller.require(Scope::Human)?;
        if caller.connection.is_some() || caller.person.kind != PersonKind::Member {
            return Err(ServiceError::forbidden(
                "only the person herself changes her tool rules, with a human credential",
            ));
        }
        if rules.len() > MAX_PERSON_RULES {
            return Err(ServiceError::invalid(format!(
                "{} rules is more than the {MAX_PERSON_RULES} a person may keep; nothing changed",
                rules.len()
            )));
        }
        for (i, rule) in rules.iter().enumerate() {
            let what = format!("rule {}", i + 1);
            for words in [
                Some(&rule.tool),
                rule.command.as_ref(),
                rule.contains.as_ref(),
            ]
            .into_iter()
            .flatten()
            {
                super::input::storable_str(&what, words)?;
            }
            if rule.command.is_some() && rule.contains.is_some() {
                return Err(ServiceError::invalid(format!(
                    "rule {}: give command or contains, not both; nothing changed",
                    i + 1
                )));
            }
            rule.check().map_err(|e| {
                ServiceError::invalid(format!("rule {}: {e}; nothing changed", i + 1))
            })?;
        }
        let before = self.inner.store.person_tool_rules(caller.id()).await?;
        let audit = self.change(
            caller,
            "tool_rules.changed",
            caller.id(),
            Some(serde_json::json!({ "rules": before })),
            Some(serde_json::json!({ "rules": rules })),
        );
        self.inner
            .store
            .set_person_tool_rules(caller.id().clone(), rules.clone(), audit)
            .await?;
        Ok(rules)
    }
}
