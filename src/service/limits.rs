//! Per-client limits, enforced here once for every front: the request rate of each token (by the
//! kind of token), the rate of failed authentications, and the A2A streams a party may hold open.
//!
//! Rates are GCRA buckets (`governor`): `per_s` requests per second sustained, `burst` at once.
//! A refused request gets `rate_limited` with `details.retry_after_s`, which each front turns into
//! its own shape (HTTP 429 + `Retry-After`, gRPC `RESOURCE_EXHAUSTED` + `RetryInfo`).
//!
//! **Failed authentications cost the failing credential, not the address.** A failure is charged
//! to what the request presented ([`Presented`]: a digest of its credentials, or "nothing, from
//! this address"), so a misconfigured client behind the same address (a NAT, an office) sending a
//! bad token runs its own bucket dry and is refused, while a valid token or console session from
//! the same address goes on working. A much larger bucket per client address (IPv6 by its /64)
//! is only a backstop against one address spraying many distinct bad credentials. Both are
//! checked before a front hashes a token, so nobody without a valid credential can keep the server
//! busy. The table of credentials is bounded ([`MAX_TRACKED`]). Nothing here knows about HTTP.

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
    /// Failed authentications (missing, unknown, expired or revoked credentials) per credential
    /// presented (none presented counts per client address).
    pub auth_failures: Rate,
    /// Failed authentications per client address, whatever was presented: the backstop against
    /// one address trying many distinct credentials.
    pub auth_failures_per_address: Rate,
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
            auth_failures_per_address: Rate::new(100, 1_000),
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

/// Most credentials whose failures are counted at once. When as many failed lately (within their
/// buckets' refill), a new one is counted only at its address, until the table has room again.
const MAX_TRACKED: usize = 65_536;

/// What a request presented to authenticate with, as the failed-authentication limit counts it:
/// a digest of its credentials (the same secrets make the same key from any address), or, when it
/// presented none, of its client address. Never the secret itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Presented([u8; 16]);

impl Presented {
    /// The key of `credentials` (each a credential-bearing value of the request, in a fixed
    /// order; empty ones are left out), or of `ip` when there are none.
    pub fn new<'a>(credentials: impl IntoIterator<Item = &'a [u8]>, ip: IpAddr) -> Presented {
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        let mut any = false;
        for value in credentials.into_iter().filter(|v| !v.is_empty()) {
            any = true;
            // Each value with its length, so that two lists never run together into one.
            digest.update(&(value.len() as u64).to_be_bytes());
            digest.update(value);
        }
        if !any {
            digest.update(b"nothing presented, from ");
            digest.update(address_key(ip).to_string().as_bytes());
        }
        let mut key = [0u8; 16];
        key.copy_from_slice(&digest.finish().as_ref()[..16]);
        Presented(key)
    }
}

/// The live limiters.
pub(super) struct Limits {
    settings: LimitSettings,
    /// Token buckets by token id, one limiter per class (absent when that class is unlimited).
    agent: Option<Keyed<String>>,
    human: Option<Keyed<String>>,
    admin: Option<Keyed<String>>,
    external: Option<Keyed<String>>,
    /// Failure buckets by credential presented, and by address (the backstop).
    auth_failures: Option<Keyed<Presented>>,
    auth_failures_per_address: Option<Keyed<IpAddr>>,
    /// Credentials refused until the instant given (their failure bucket ran dry).
    blocked: Mutex<HashMap<Presented, Instant>>,
    /// Addresses refused until the instant given (their backstop bucket ran dry).
    blocked_addresses: Mutex<HashMap<IpAddr, Instant>>,
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
            auth_failures_per_address: settings
                .auth_failures_per_address
                .quota()
                .map(Keyed::hashmap),
            blocked: Mutex::default(),
            blocked_addresses: Mutex::default(),
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

    /// The refusal of a request from `ip` presenting `presented`, while either failed to
    /// authenticate too often lately: its address (the backstop) or what it presented.
    /// `presented` is asked for only while some credential is refused: its digest is work every
    /// request would otherwise do.
    pub(super) fn refused(
        &self,
        ip: IpAddr,
        presented: impl FnOnce() -> Presented,
    ) -> Option<ServiceError> {
        let now = Instant::now();
        if let Some(wait) = still_blocked(&self.blocked_addresses, &address_key(ip), now) {
            crate::metrics::get().rate_limited("auth_failures_address");
            return Some(rate_limited(
                format!(
                    "too many failed authentications from this address, whatever was presented \
                     (more than {} per second); retry after {} s",
                    self.settings.auth_failures_per_address.per_s,
                    seconds(wait)
                ),
                wait,
            ));
        }
        let wait = {
            let mut blocked = self.blocked.lock().unwrap_or_else(|e| e.into_inner());
            if blocked.is_empty() {
                return None;
            }
            still_blocked_in(&mut blocked, &presented(), now)?
        };
        crate::metrics::get().rate_limited("auth_failures");
        Some(rate_limited(
            format!(
                "too many failed authentications with this credential (more than {} per second); \
                 retry after {} s",
                self.settings.auth_failures.per_s,
                seconds(wait)
            ),
            wait,
        ))
    }

    /// Charges a failed authentication to what was presented and to the address; a credential (or
    /// an address) whose bucket runs dry is refused until its bucket has room again.
    pub(super) fn auth_failed(&self, ip: IpAddr, presented: &Presented) {
        self.sweep_now_and_then();
        if let Some(limiter) = &self.auth_failures {
            // A full table counts a new credential at its address only (see `MAX_TRACKED`).
            if limiter.len() >= MAX_TRACKED {
                limiter.retain_recent();
            }
            if limiter.len() < MAX_TRACKED
                && let Err(not_until) = limiter.check_key(presented)
            {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                if block(&self.blocked, *presented, wait) {
                    tracing::info!(
                        retry_after_s = seconds(wait),
                        "A credential refused for a while: it failed to authenticate too often."
                    );
                }
            }
        }
        if let Some(limiter) = &self.auth_failures_per_address {
            let key = address_key(ip);
            if let Err(not_until) = limiter.check_key(&key) {
                let wait = not_until.wait_time_from(DefaultClock::default().now());
                if block(&self.blocked_addresses, key, wait) {
                    tracing::warn!(
                        client = %key,
                        retry_after_s = seconds(wait),
                        "Client refused for a while: too many failed authentications, of many credentials."
                    );
                }
            }
        }
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
        if let Some(limiter) = &self.auth_failures_per_address {
            limiter.retain_recent();
        }
        let now = Instant::now();
        self.blocked
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, until| *until > now);
        self.blocked_addresses
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

/// How long `key` is still refused, if it is (an expired entry is forgotten).
fn still_blocked<K: std::hash::Hash + Eq>(
    blocked: &Mutex<HashMap<K, Instant>>,
    key: &K,
    now: Instant,
) -> Option<Duration> {
    still_blocked_in(
        &mut blocked.lock().unwrap_or_else(|e| e.into_inner()),
        key,
        now,
    )
}

/// [`still_blocked`] in a map already locked.
fn still_blocked_in<K: std::hash::Hash + Eq>(
    blocked: &mut HashMap<K, Instant>,
    key: &K,
    now: Instant,
) -> Option<Duration> {
    let until = *blocked.get(key)?;
    if until <= now {
        blocked.remove(key);
        return None;
    }
    Some(until - now)
}

/// Refuses `key` for `wait` from now; says whether it was not refused already. The map holds at
/// most [`MAX_TRACKED`] entries: when full, expired ones go first, and a new key that still does
/// not fit is not refused (its bucket keeps counting; the address backstop still applies).
fn block<K: std::hash::Hash + Eq>(
    blocked: &Mutex<HashMap<K, Instant>>,
    key: K,
    wait: Duration,
) -> bool {
    let now = Instant::now();
    let mut blocked = blocked.lock().unwrap_or_else(|e| e.into_inner());
    if blocked.len() >= MAX_TRACKED && !blocked.contains_key(&key) {
        blocked.retain(|_, until| *until > now);
        if blocked.len() >= MAX_TRACKED {
            return false;
        }
    }
    blocked.insert(key, now + wait).is_none()
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
    fn failed_authentications_block_the_failing_credential_not_its_address() {
        let limits = Limits::new(LimitSettings {
            auth_failures: Rate::new(1, 3),
            auth_failures_per_address: Rate::new(1, 6),
            ..LimitSettings::default()
        });
        let ip: IpAddr = "192.0.2.7".parse().unwrap();
        let other: IpAddr = "192.0.2.8".parse().unwrap();
        let bad = Presented::new([b"Bearer lsn_wrong".as_slice()], ip);
        let good = Presented::new([b"Bearer lsn_right".as_slice()], ip);
        let nothing = Presented::new([], ip);
        assert_eq!(bad, Presented::new([b"Bearer lsn_wrong".as_slice()], other));
        assert_ne!(nothing, Presented::new([], other));
        for _ in 0..3 {
            limits.auth_failed(ip, &bad);
            assert!(limits.refused(ip, || bad).is_none());
        }
        limits.auth_failed(ip, &bad);
        let e = limits
            .refused(ip, || bad)
            .expect("the bad credential is refused");
        assert_eq!(e.code, ErrorCode::RateLimited);
        assert!(e.retry_after_s().is_some(), "{e:?}");
        assert!(e.message.contains("with this credential"), "{e:?}");
        // From any address; and nothing else from this address is refused.
        assert!(limits.refused(other, || bad).is_some());
        assert!(limits.refused(ip, || good).is_none());
        assert!(limits.refused(ip, || nothing).is_none());
        // Many distinct bad credentials from one address: the backstop refuses the address.
        for n in 0..3 {
            let sprayed = Presented::new([format!("Bearer lsn_{n}").as_bytes()], ip);
            limits.auth_failed(ip, &sprayed);
        }
        let e = limits.refused(ip, || good).expect("the address is refused");
        assert!(e.message.contains("from this address"), "{e:?}");
        assert!(limits.refused(other, || good).is_none());
    }
}
