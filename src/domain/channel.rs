//! A channel's approval policy: per impact, whether a request needs a human's approval.

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
/// `production` need approval. Stored and returned now; enforced by the approval capability.
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
        }
    }
}

impl ApprovalPolicy {
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
