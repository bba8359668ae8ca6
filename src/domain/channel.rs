//! A channel's approval policy: per impact, whether a request needs a human's approval, and how long
//! an approval waits for a decision (default 24 h).

use serde::{Deserialize, Serialize};

use super::{Impact, named_enum};

named_enum! {
    /// What happens to a request of some impact in a channel.
    pub enum PolicyDecision ("policy decision") {
        /// No approval needed.
        Auto = "auto",
        /// A human with the `approve` right must allow it once.
        Approve = "approve",
        /// Refused at posting.
        Deny = "deny",
    }
}

/// The per-impact policy of a channel. Defaults: `none` is `auto`; `code`, `database` and
/// `production` need approval; approvals expire after 24 hours. Enforced by `service::approvals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalPolicy {
    #[serde(default = "auto")]
    pub none: PolicyDecision,
    #[serde(default = "approve")]
    pub code: PolicyDecision,
    #[serde(default = "approve")]
    pub database: PolicyDecision,
    #[serde(default = "approve")]
    pub production: PolicyDecision,
    /// How long an approval waits for a decision before it expires and the thread is closed.
    #[serde(default = "day")]
    pub approval_ttl_s: u64,
    /// Messages to a remote agent (SPEC §8b): data leaving the team. `approve` (default): a human
    /// of the sending member allows each exact message first; `auto`: sent at once; `deny`:
    /// refused at posting.
    #[serde(default = "approve")]
    pub outbound: PolicyDecision,
    /// Whether an approver's own MCP client may ask its human through MCP elicitation (never for
    /// requests from external parties). Off by default.
    #[serde(default)]
    pub approval_via_elicitation: bool,
}

/// Shortest and longest approval deadline: one minute, thirty days.
pub const APPROVAL_TTL_RANGE: std::ops::RangeInclusive<u64> = 60..=30 * 86_400;

fn day() -> u64 {
    86_400
}

fn auto() -> PolicyDecision {
    PolicyDecision::Auto
}

fn approve() -> PolicyDecision {
    PolicyDecision::Approve
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        Self {
            none: auto(),
            code: approve(),
            database: approve(),
            production: approve(),
            outbound: approve(),
            approval_ttl_s: day(),
            approval_via_elicitation: false,
        }
    }
}

/// A change to some fields of a policy (`channel policy --code auto`): what is named changes, the
/// rest stays as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyChange {
    pub none: Option<PolicyDecision>,
    pub code: Option<PolicyDecision>,
    pub database: Option<PolicyDecision>,
    pub production: Option<PolicyDecision>,
    pub outbound: Option<PolicyDecision>,
    pub approval_ttl_s: Option<u64>,
    pub approval_via_elicitation: Option<bool>,
}

impl PolicyChange {
    /// Whether it names nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// `policy` with the named fields changed.
    pub fn apply(&self, mut policy: ApprovalPolicy) -> ApprovalPolicy {
        for (impact, decision) in [
            (Impact::None, self.none),
            (Impact::Code, self.code),
            (Impact::Database, self.database),
            (Impact::Production, self.production),
        ] {
            if let Some(d) = decision {
                policy.set(impact, d);
            }
        }
        if let Some(d) = self.outbound {
            policy.outbound = d;
        }
        if let Some(ttl) = self.approval_ttl_s {
            policy.approval_ttl_s = ttl;
        }
        if let Some(e) = self.approval_via_elicitation {
            policy.approval_via_elicitation = e;
        }
        policy
    }
}

impl ApprovalPolicy {
    /// The impacts whose requests wait for an approver (`approve`). Outbound messages are
    /// approved by their sender's human, not by the channel's approvers, so they are not here.
    pub fn needing_approval(&self) -> Vec<&'static str> {
        [
            (Impact::None, "none"),
            (Impact::Code, "code"),
            (Impact::Database, "database"),
            (Impact::Production, "production"),
        ]
        .into_iter()
        .filter(|(i, _)| self.decision(*i) == PolicyDecision::Approve)
        .map(|(_, name)| name)
        .collect()
    }

    pub fn decision(&self, impact: Impact) -> PolicyDecision {
        match impact {
            Impact::None => self.none,
            Impact::Code => self.code,
            Impact::Database => self.database,
            Impact::Production => self.production,
        }
    }

    pub fn set(&mut self, impact: Impact, decision: PolicyDecision) {
        match impact {
            Impact::None => self.none = decision,
            Impact::Code => self.code = decision,
            Impact::Database => self.database = decision,
            Impact::Production => self.production = decision,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_change_touches_only_what_it_names() {
        let before = ApprovalPolicy {
            production: PolicyDecision::Deny,
            approval_ttl_s: 3_600,
            ..ApprovalPolicy::default()
        };
        let change: PolicyChange = serde_json::from_str(r#"{"code": "auto"}"#).unwrap();
        let after = change.apply(before);
        assert_eq!(after.code, PolicyDecision::Auto);
        assert_eq!(
            ApprovalPolicy {
                code: before.code,
                ..after
            },
            before
        );
        assert!(PolicyChange::default().is_empty() && !change.is_empty());
        assert!(serde_json::from_str::<PolicyChange>(r#"{"cde": "auto"}"#).is_err());
    }
}
