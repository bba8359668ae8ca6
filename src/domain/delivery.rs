//! The delivery retry policy: what an outbound attempt got back ([`SendResult`], [`SendFailure`]),
//! which answers may succeed later, and the verdict on an attempt (delivered, retry when, or dead).
//!
//! Pure: no I/O and no clock of its own (the caller passes `now` and the jitter's random draw), so
//! the outbound client, the store, the service and the workers all speak these types without
//! depending on each other.

use std::time::Duration;

use super::Timestamp;
use super::address::AddressPolicy;

/// Tunables of outbound delivery.
#[derive(Debug, Clone)]
pub struct OutboxSettings {
    /// Delay before each retry: the first attempt is immediate, the second waits `schedule[0]`,
    /// and so on; after the last, the delivery is dead.
    pub schedule: Vec<Duration>,
    /// Each delay is scaled by a random factor in `1 ± jitter`.
    pub jitter: f64,
    /// Consecutive dead deliveries after which an endpoint is disabled.
    pub disable_after: u32,
    /// How long a claimed delivery belongs to its worker (longer than `timeout`).
    pub lease: Duration,
    pub connect_timeout: Duration,
    /// The whole request, response included.
    pub timeout: Duration,
    /// Non-global addresses that may still be sent to.
    pub allow: AddressPolicy,
    /// Deliveries in flight at once per process.
    pub concurrency: usize,
}

impl Default for OutboxSettings {
    fn default() -> Self {
        let minutes = |m: u64| Duration::from_secs(60 * m);
        Self {
            // 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h, 8 h: about 24 h in 11 attempts.
            schedule: vec![
                Duration::from_secs(5),
                Duration::from_secs(30),
                minutes(2),
                minutes(10),
                minutes(30),
                minutes(60),
                minutes(120),
                minutes(240),
                minutes(480),
                minutes(480),
            ],
            jitter: 0.2,
            disable_after: 5,
            lease: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(15),
            allow: AddressPolicy::default(),
            concurrency: 64,
        }
    }
}

/// What one attempt got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendResult {
    /// The receiver answered (the body is not kept).
    Status {
        code: u16,
        /// `Retry-After`, when the receiver sent one.
        retry_after: Option<Duration>,
    },
    Failed(SendFailure),
}

/// Why an attempt got no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendFailure {
    Timeout(String),
    Connect(String),
    /// The SSRF guard refused the address (literal or resolved).
    RefusedAddress(String),
    InvalidUrl(String),
    /// The delivery cannot be built any more (e.g. its push config was deleted).
    Gone(String),
    /// The receiver refused it for good (an A2A error, an answer that cannot be read or is too
    /// large): trying again would get the same answer.
    Refused(String),
    Request(String),
}

impl SendFailure {
    pub fn class(&self) -> &'static str {
        match self {
            SendFailure::Timeout(_) => "timeout",
            SendFailure::Connect(_) => "connect",
            SendFailure::RefusedAddress(_) => "refused_address",
            SendFailure::InvalidUrl(_) => "invalid_url",
            SendFailure::Gone(_) => "gone",
            SendFailure::Refused(_) => "refused",
            SendFailure::Request(_) => "request",
        }
    }

    pub fn message(&self) -> &str {
        match self {
            SendFailure::Timeout(m)
            | SendFailure::Connect(m)
            | SendFailure::RefusedAddress(m)
            | SendFailure::InvalidUrl(m)
            | SendFailure::Gone(m)
            | SendFailure::Refused(m)
            | SendFailure::Request(m) => m,
        }
    }

    /// Worth trying again later: the network or the receiver may recover; a refused address, a
    /// bad URL or a vanished config will not.
    pub fn retryable(&self) -> bool {
        matches!(
            self,
            SendFailure::Timeout(_) | SendFailure::Connect(_) | SendFailure::Request(_)
        )
    }
}

/// What to do with a delivery after an attempt (decided by [`verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttemptVerdict {
    Delivered,
    RetryAt(Timestamp),
    Dead,
}

/// Whether a status may succeed later: 408, 425, 429 and 5xx do; other 4xx (and redirects, which
/// are never followed) are permanent.
pub fn status_retryable(code: u16) -> bool {
    matches!(code, 408 | 425 | 429) || !(200..500).contains(&code)
}

/// The verdict on attempt number `attempt` (1-based). `random` in `[0, 1)` draws the jitter.
pub fn verdict(
    settings: &OutboxSettings,
    attempt: i64,
    result: &SendResult,
    now: Timestamp,
    random: f64,
) -> AttemptVerdict {
    let retry_after = match result {
        SendResult::Status { code, .. } if (200..300).contains(code) => {
            return AttemptVerdict::Delivered;
        }
        SendResult::Status { code, retry_after } if status_retryable(*code) => *retry_after,
        SendResult::Failed(f) if f.retryable() => None,
        _ => return AttemptVerdict::Dead,
    };
    let Some(step) = usize::try_from(attempt - 1)
        .ok()
        .and_then(|i| settings.schedule.get(i))
    else {
        return AttemptVerdict::Dead;
    };
    let factor = 1.0 + settings.jitter.clamp(0.0, 1.0) * (2.0 * random.clamp(0.0, 1.0) - 1.0);
    let scheduled = step.as_secs_f64() * factor;
    // Retry-After is honoured (never earlier than asked), up to a day.
    let asked = retry_after.map_or(0.0, |d| d.as_secs_f64().min(86_400.0));
    let delay_ms = (scheduled.max(asked) * 1000.0).round() as i64;
    AttemptVerdict::RetryAt(Timestamp(now.0 + delay_ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp(s * 1000)
    }

    fn status(code: u16) -> SendResult {
        SendResult::Status {
            code,
            retry_after: None,
        }
    }

    #[test]
    fn success_delivers_and_permanent_failures_die_at_once() {
        let s = OutboxSettings::default();
        assert_eq!(
            verdict(&s, 1, &status(204), at(0), 0.5),
            AttemptVerdict::Delivered
        );
        for code in [400, 401, 403, 404, 410, 422, 301, 302] {
            assert_eq!(
                verdict(&s, 1, &status(code), at(0), 0.5),
                AttemptVerdict::Dead,
                "{code}"
            );
        }
        let refused = SendResult::Failed(SendFailure::RefusedAddress("10.0.0.1".into()));
        assert_eq!(verdict(&s, 1, &refused, at(0), 0.5), AttemptVerdict::Dead);
    }

    #[test]
    fn retryable_failures_follow_the_schedule_with_jitter_then_die() {
        let s = OutboxSettings::default();
        for result in [
            status(500),
            status(503),
            status(408),
            status(429),
            SendResult::Failed(SendFailure::Timeout("t".into())),
            SendResult::Failed(SendFailure::Connect("c".into())),
        ] {
            assert_eq!(
                verdict(&s, 1, &result, at(0), 0.5),
                AttemptVerdict::RetryAt(at(5))
            );
            assert_eq!(
                verdict(&s, 2, &result, at(100), 0.5),
                AttemptVerdict::RetryAt(at(130))
            );
            assert_eq!(verdict(&s, 11, &result, at(0), 0.5), AttemptVerdict::Dead);
        }
        // Jitter: ±20 % of the step at the extremes.
        assert_eq!(
            verdict(&s, 2, &status(500), at(0), 0.0),
            AttemptVerdict::RetryAt(at(24))
        );
        let AttemptVerdict::RetryAt(late) = verdict(&s, 2, &status(500), at(0), 0.999_999) else {
            panic!()
        };
        assert!(late.0 <= 36_000 && late.0 > 35_900);
        let total: Duration = s.schedule.iter().sum();
        assert!(total > Duration::from_secs(20 * 3600) && total < Duration::from_secs(28 * 3600));
    }

    #[test]
    fn retry_after_is_honoured_but_never_shortens_the_schedule() {
        let s = OutboxSettings::default();
        let slow = SendResult::Status {
            code: 429,
            retry_after: Some(Duration::from_secs(120)),
        };
        assert_eq!(
            verdict(&s, 1, &slow, at(0), 0.5),
            AttemptVerdict::RetryAt(at(120))
        );
        let quick = SendResult::Status {
            code: 503,
            retry_after: Some(Duration::from_secs(1)),
        };
        assert_eq!(
            verdict(&s, 2, &quick, at(0), 0.5),
            AttemptVerdict::RetryAt(at(30))
        );
    }
}
