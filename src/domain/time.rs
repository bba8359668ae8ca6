//! Timestamps: milliseconds since the Unix epoch, shown as RFC 3339 UTC.

use std::fmt;

use serde::Serialize;

/// A point in time, in milliseconds since 1970-01-01T00:00:00Z.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn millis(self) -> i64 {
        self.0
    }

    pub fn plus_secs(self, secs: u64) -> Timestamp {
        Timestamp(
            self.0
                .saturating_add(i64::try_from(secs).unwrap_or(i64::MAX).saturating_mul(1000)),
        )
    }

    /// RFC 3339 in UTC with millisecond precision, e.g. `2026-11-29T21:00:00.000Z`.
    pub fn to_rfc3339(self) -> String {
        match chrono::DateTime::from_timestamp_millis(self.0) {
            Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            None => format!("@{}ms", self.0),
        }
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
    }
}
