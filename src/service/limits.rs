//! Per-client limits, enforced here once for every front: the request rate of each token (by the
//! kind of token), the rate of failed authentications per client address, and the A2A streams a
//! party may hold open.
//!
//! Rates are GCRA buckets (`governor`): `per_s` requests per second sustained, `burst` at once.
//! A refused request gets `rate_limited` with `details.retry_after_s`, which each front turns into
//! its own shape (HTTP 429 + `Retry-After`, gRPC `RESOURCE_EXHAUSTED` + `RetryInfo`). The
//! failed-authentication limit is keyed by client address (IPv6 by its /64) and checked before a
//! front hashes a token, so nobody without a valid token can keep the server busy. Nothing here
//! knows about HTTP.

use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota};
use serde::Deserialize;

use super::{Caller, ErrorCode, Result, ServiceError};
use crate::domain::{PersonId, PersonKind, Scope};

/// A sustained rate and a burst. `per_s = 0` turns the limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    pub per_s: u32,
    pub burst: u32,
}

impl Rate {
    pub const fn new(per_s: u32, burst: u32) -> Self {
        Rate { per_s, burst }
    }

    fn quota(self) -> Option<Quota> {
        let per_s = NonZeroU32::new(self.per_s)?;
        let burst = NonZeroU32::new(self.burst.max(1)).expect("at least 1");
        Some(Quota::per_second(per_s).allow_burst(burst))
    }
}

/// The limits, resolved from `[limits]` in the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitSettings {
    /// Requests per token with scope `agent` (members' agents).
    pub agent: Rate,
    /// Requests per token with scope `human`.
    pub human: Rate,
    /// Requests per token with scope `admin`.
    pub admin: Rate,
    /// Requests per external party (token or JWT subject).
    pub external: Rate,
    /// Failed authentications (missing, unknown, expired or revoked credentials) per client address.
    pub auth_failures: Rate,
    /// A2A streams (SendStreamingMessage, SubscribeToTask) one party may hold open at once.
    pub streams_per_party: usize,
}

impl Default for LimitSettings {
    fn default() -> Self {
        Self {
            agent: Rate::new(200, 400),
            human: Rate::new(50, 100),
            admin: Rate::new(100, 200),
            external: Rate::new(2_000, 4_000),
            auth_failures: Rate::new(10, 50),
            streams_per_party: 32,
        }
    }
}

/// Which bucket a caller's requests come out of.
#[derive(Debug, Clone, Copy)]
enum Class {
    Agent,
    Human,
    Admin,
    External,
}

impl Class {
    /// Its `reason` on `liaison_rate_limited_total`.
    fn label(self) -> &'static str {
        match self {
            Class::Agent => "agent",
            Class::Human => "human",
            Class::Admin => "admin",
            Class::External => "external",
        }
    }
}

type Keyed<K> = DefaultKeyedRateLimiter<K>;

/// Checks between two sweeps of the keyed buckets (full buckets are forgotten).
const SWEEP_EVERY: u64 = 4_096;

/// The live limiters.
pub(super) struct Limits {
    settings: LimitSettings,
    /// Token buckets by token id, one limiter per class (absent when that class is unlimited).
    agent: Option<Keyed<String>>,
    human: Option<Keyed<String>>,
    admin: Option<Keyed<String>>,
    external: Option<Keyed<String>>,
    auth_failures: Option<Keyed<IpAddr>>,
    /// Addresses refused until the instant given (their failure bucket ran dry).
    blocked: Mutex<HashMap<IpAddr, Instant>>,
    /// Open A2A streams by party; an entry goes when its count returns to zero.
    streams: Arc<Mutex<HashMap<PersonId, usize>>>,
    checks: AtomicU64,
}

impl Limits {
    pub(super) fn new(settings: LimitSettings) -> Self {
        let keyed = |r: Rate| r.quota().map(Keyed::hashmap);
        Self {
            agent: keyed(settings.agent),
            human: keyed(settings.human),
            admin: keyed(settings.admin),
            external: keyed(settings.external),
            auth_failures: settings.auth_failures.quota().map(Keyed::hashmap),
            blocked: Mutex::default(),
            streams: Arc::default(),
            checks: AtomicU64::new(0),
            settings,
        }
    }

    /// Charges one request to the caller's token; refuses when its bucket is empty.
    pub(super) fn admit(&self, caller: &Caller) -> Result<()> {
        self.sweep_now_and_then();
        let class = if caller.person.kind == PersonKind::External {
            Class::External
        } else if caller.scopes.contains(Scope::Admin) {
            Class::Admin
        } else if caller.scopes.contains(Scope::Human) {
            Class::Human
        } else {
            Class::Agent
        };
        let (limiter, rate) = match class {
            Class::Agent => (&self.agent, self.settings.agent),
            Class::Human => (&self.human, self.settings.human),
            Class::Admin => (&self.admin, self.settings.admin),
            Class::External => (&self.external, self.settings.external),
        };
        let Some(limiter) = limiter else {
            return Ok(());
        };
        limiter.check_key(&caller.token_id).map_err(|not_until| {
            crate::metrics::get().rate_limited(class.label());
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            rate_limited(
                format!(
                    "this token made more than {} requests per second (burst {}); retry after {} s",
                    rate.per_s,
                    rate.burst,
                    seconds(wait)
                ),
                wait,
            )
        })
    }

    /// How long `ip` is still refused for failing to authenticate too often, if it is.
    pub(super) fn blocked(&self, ip: IpAddr) -> Option<Duration> {
        let key = address_key(ip);
        let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
        let until = *blocked.get(&key)?;
        let now = Instant::now();
        if until <= now {
            blocked.remove(&key);
            return None;
        }
        Some(until - now)
    }

    /// Charges a failed authentication to `ip`; when its bucket runs dry, the address is refused
    /// until the bucket has room again.
    pub(super) fn auth_failed(&self, ip: IpAddr) {
        self.sweep_now_and_then();
        let Some(limiter) = &self.auth_failures else {
            return;
        };
        let key = address_key(ip);
        if let Err(not_until) = limiter.check_key(&key) {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            let first = {
                let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
                blocked.insert(key, Instant::now() + wait).is_none()
            };
            if first {
                tracing::warn!(
                    client = %key,
                    retry_after_s = seconds(wait),
                    "Client refused for a while: too many failed authentications."
                );
            }
        }
    }

    /// The refusal for an address that [`Limits::blocked`] reports.
    pub(super) fn blocked_error(&self, wait: Duration) -> ServiceError {
        crate::metrics::get().rate_limited("auth_failures");
        rate_limited(
            format!(
                "too many failed authentications from this address (more than {} per second); retry after {} s",
                self.settings.auth_failures.per_s,
                seconds(wait)
            ),
            wait,
        )
    }

    /// Counts one open stream of `party`; the permit gives it back when dropped.
    pub(super) fn open_stream(&self, party: &PersonId) -> Result<StreamPermit> {
        let max = self.settings.streams_per_party;
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        let n = streams.entry(party.clone()).or_insert(0);
        if *n >= max {
            return Err(ServiceError::new(
                ErrorCode::TooManyStreams,
                format!(
                    "{n} streams are already open for this party (at most {max}); close one first"
                ),
            ));
        }
        *n += 1;
        Ok(StreamPermit {
            streams: self.streams.clone(),
            party: party.clone(),
        })
    }

    /// A2A streams open now, all parties together (for `/metrics`).
    pub(super) fn open_streams(&self) -> usize {
        let streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        streams.values().sum()
    }

    /// Forgets full buckets and expired blocks from time to time, so that the maps hold only the
    /// clients seen lately.
    fn sweep_now_and_then(&self) {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY != SWEEP_EVERY - 1 {
            return;
        }
        for limiter in [&self.agent, &self.human, &self.admin, &self.external]
            .into_iter()
            .flatten()
        {
            limiter.retain_recent();
        }
        if let Some(limiter) = &self.auth_failures {
            limiter.retain_recent();
        }
        let now = Instant::now();
        self.blocked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, until| *until > now);
    }
}

/// One open A2A stream of a party, counted while alive.
pub struct StreamPermit {
    streams: Arc<Mutex<HashMap<PersonId, usize>>>,
    party: PersonId,
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = streams.get_mut(&self.party) {
            *n -= 1;
            if *n == 0 {
                streams.remove(&self.party);
            }
        }
    }
}

fn rate_limited(message: String, wait: Duration) -> ServiceError {
    ServiceError::new(ErrorCode::RateLimited, message)
        .with_details(serde_json::json!({ "retry_after_s": seconds(wait) }))
}

/// Whole seconds to wait, at least 1 (what `Retry-After` can say).
fn seconds(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// The key of a client address: IPv4 as is, IPv6 by its /64 (one host often has a whole /64).
fn address_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_round_up_to_whole_seconds() {
        assert_eq!(seconds(Duration::ZERO), 1);
        assert_eq!(seconds(Duration::from_millis(10)), 1);
        assert_eq!(seconds(Duration::from_secs(2)), 2);
        assert_eq!(seconds(Duration::from_millis(2_001)), 3);
    }

    #[test]
    fn ipv6_clients_are_keyed_by_their_64_prefix() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::9".parse().unwrap();
        let c: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(address_key(a), address_key(b));
        assert_ne!(address_key(a), address_key(c));
        let mapped: IpAddr = "::ffff:10.0.0.1".parse().unwrap();
        assert_eq!(address_key(mapped), "10.0.0.1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn failed_authentications_block_an_address_once_its_bucket_is_dry() {
        let limits = Limits::new(LimitSettings {
            auth_failures: Rate::new(1, 3),
            ..LimitSettings::default()
        });
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        for _ in 0..3 {
            limits.auth_failed(ip);
            assert!(limits.blocked(ip).is_none());
        }
        limits.auth_failed(ip);
        assert!(limits.blocked(ip).is_some());
        assert!(limits.blocked(other).is_none());
    }
}
