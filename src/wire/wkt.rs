//! `google.protobuf.Timestamp` for the A2A wire types, replacing pbjson-types' one because A2A
//! wants UTC with a `Z` (pbjson-types writes `+00:00`) and millisecond precision. Protobuf-wise it
//! is the same message (seconds = 1, nanos = 2).

use chrono::{DateTime, SecondsFormat, Utc};
use serde::de::Error as _;

/// Seconds and nanoseconds since the Unix epoch, UTC.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Message)]
pub struct Timestamp {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Timestamp {
    pub fn from_datetime(at: DateTime<Utc>) -> Timestamp {
        Timestamp {
            seconds: at.timestamp(),
            nanos: at.timestamp_subsec_nanos() as i32,
        }
    }

    /// `None` when out of chrono's range or `nanos` is not in `0..1e9`.
    pub fn to_datetime(self) -> Option<DateTime<Utc>> {
        let nanos = u32::try_from(self.nanos).ok()?;
        DateTime::from_timestamp(self.seconds, nanos)
    }
}

impl serde::Serialize for Timestamp {
    /// RFC 3339, UTC, `Z`, exactly three fractional digits (`2026-05-28T20:26:40.123Z`).
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let at = self
            .to_datetime()
            .ok_or_else(|| serde::ser::Error::custom("timestamp out of range"))?;
        serializer.serialize_str(&at.to_rfc3339_opts(SecondsFormat::Millis, true))
    }
}

impl<'de> serde::Deserialize<'de> for Timestamp {
    /// Any RFC 3339 date-time; an offset other than `Z` is converted to UTC.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        let at = DateTime::parse_from_rfc3339(&text).map_err(|error| {
            D::Error::custom(format!("invalid RFC 3339 timestamp {text:?}: {error}"))
        })?;
        Ok(Timestamp::from_datetime(at.with_timezone(&Utc)))
    }
}

#[cfg(test)]
mod tests {
    use prost::Message as _;

    use super::*;

    #[test]
    fn renders_utc_with_z_and_milliseconds() {
        let at = Timestamp {
            seconds: 1_780_000_000,
            nanos: 123_456_789,
        };
        assert_eq!(
            serde_json::to_value(at).unwrap(),
            "2026-05-28T20:26:40.123Z"
        );
        let whole = Timestamp {
            seconds: 0,
            nanos: 0,
        };
        assert_eq!(
            serde_json::to_value(whole).unwrap(),
            "1970-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn reads_any_rfc3339_offset_as_utc() {
        let read: Timestamp = serde_json::from_value("2026-05-28T22:26:40.5+02:00".into()).unwrap();
        assert_eq!(
            read,
            Timestamp {
                seconds: 1_780_000_000,
                nanos: 500_000_000
            }
        );
        assert!(serde_json::from_value::<Timestamp>("yesterday".into()).is_err());
    }

    #[test]
    fn protobuf_encoding_is_google_protobuf_timestamp() {
        // seconds = 1 (varint 150), nanos = 2 (varint 1): 08 96 01 10 01
        let bytes = Timestamp {
            seconds: 150,
            nanos: 1,
        }
        .encode_to_vec();
        assert_eq!(bytes, [0x08, 0x96, 0x01, 0x10, 0x01]);
    }
}
