//! Presence transitions and advisory lease modes.

use super::named_enum;

named_enum! {
    /// What an agent reports about itself.
    pub enum Transition ("transition") {
        Started = "started",
        Working = "working",
        Blocked = "blocked",
        Done = "done",
        Idle = "idle",
    }
}

named_enum! {
    /// Exclusive leases admit one holder; shared leases admit any number of shared holders.
    pub enum LeaseMode ("lease mode") {
        Exclusive = "exclusive",
        Shared = "shared",
    }
}

impl LeaseMode {
    /// Whether a holder in `self` mode can coexist with another holder in `other` mode.
    pub fn compatible_with(self, other: LeaseMode) -> bool {
        self == LeaseMode::Shared && other == LeaseMode::Shared
    }
}
