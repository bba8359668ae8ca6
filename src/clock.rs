//! Time as the service sees it. Every expiry (claims, presence, leases) is compared with
//! `Clock::now`, so tests move time by hand instead of sleeping.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use crate::domain::Timestamp;

pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp(chrono::Utc::now().timestamp_millis())
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    pub fn starting_at(t: Timestamp) -> Self {
        Self(Arc::new(AtomicI64::new(t.0)))
    }

    pub fn advance_secs(&self, secs: i64) {
        self.0.fetch_add(secs * 1000, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        Timestamp(self.0.load(Ordering::SeqCst))
    }
}
