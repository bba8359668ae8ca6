//! Durations as people write them: a number of seconds (`90`) or a number with one unit (`30s`,
//! `10m`, `24h`, `7d`). Whole seconds only: the server counts in seconds. The command line's
//! duration flags and the configuration's `*_s` fields both read this form (and plain seconds, as
//! they always have).

use std::fmt;

/// A duration in whole seconds, parsed by [`parse`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seconds(pub u64);

/// Parses `90`, `30s`, `10m`, `24h` or `7d`.
pub fn parse(s: &str) -> Result<Seconds, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let bad = || format!("{s:?} is not a duration: use seconds (90) or 30s, 10m, 24h, 7d");
    let n: u64 = digits.parse().map_err(|_| bad())?;
    let factor = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(factor).map(Seconds).ok_or_else(bad)
}

/// The shortest way to write `s` in [`parse`]'s form: `7d`, `24h`, `90s`.
pub fn format(s: Seconds) -> String {
    match s.0 {
        0 => "0s".to_owned(),
        n if n % 86_400 == 0 => format!("{}d", n / 86_400),
        n if n % 3_600 == 0 => format!("{}h", n / 3_600),
        n if n % 60 == 0 => format!("{}m", n / 60),
        n => format!("{n}s"),
    }
}

/// A configuration value in seconds: a TOML integer (or an environment variable read as one), or
/// a string in [`parse`]'s form.
pub fn deserialize_seconds<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    d.deserialize_any(SecondsVisitor)
}

/// A list of [`deserialize_seconds`] values (the outbox's retry schedule).
pub fn deserialize_seconds_list<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<u64>, D::Error> {
    #[derive(serde::Deserialize)]
    struct One(#[serde(deserialize_with = "deserialize_seconds")] u64);
    let list: Vec<One> = serde::Deserialize::deserialize(d)?;
    Ok(list.into_iter().map(|One(s)| s).collect())
}

struct SecondsVisitor;

impl serde::de::Visitor<'_> for SecondsVisitor {
    type Value = u64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a duration: seconds (90) or a string such as \"30s\", \"10m\", \"24h\", \"7d\"",
        )
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<u64, E> {
        Ok(v)
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<u64, E> {
        u64::try_from(v).map_err(|_| E::custom(format!("{v} is not a duration: it is negative")))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<u64, E> {
        parse(v).map(|s| s.0).map_err(E::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_plain_seconds_or_one_unit() {
        assert_eq!(parse("90"), Ok(Seconds(90)));
        assert_eq!(parse("30s"), Ok(Seconds(30)));
        assert_eq!(parse("10m"), Ok(Seconds(600)));
        assert_eq!(parse("24h"), Ok(Seconds(86_400)));
        assert_eq!(parse("7d"), Ok(Seconds(604_800)));
    }

    #[test]
    fn formatting_uses_the_largest_whole_unit_and_parses_back() {
        for (secs, text) in [
            (0, "0s"),
            (90, "90s"),
            (600, "10m"),
            (86_400, "1d"),
            (5_400, "90m"),
        ] {
            assert_eq!(format(Seconds(secs)), text);
            assert_eq!(parse(text), Ok(Seconds(secs)));
        }
    }

    #[test]
    fn anything_else_is_refused_with_the_accepted_forms() {
        for bad in [
            "",
            "s",
            "-5",
            "1.5h",
            "10 m",
            "10min",
            "1h30m",
            "99999999999999999999d",
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.contains("30s, 10m, 24h"), "{bad}: {e}");
        }
    }

    #[test]
    fn configuration_values_are_integers_or_duration_strings() {
        #[derive(serde::Deserialize)]
        struct T {
            #[serde(deserialize_with = "deserialize_seconds")]
            a: u64,
            #[serde(deserialize_with = "deserialize_seconds")]
            b: u64,
            #[serde(deserialize_with = "deserialize_seconds_list")]
            c: Vec<u64>,
        }
        let t: T = toml::from_str("a = 90\nb = \"10m\"\nc = [5, \"1h\"]").unwrap();
        assert_eq!((t.a, t.b, t.c), (90, 600, vec![5, 3_600]));
        assert!(toml::from_str::<T>("a = -1\nb = 1\nc = []").is_err());
        let e = toml::from_str::<T>("a = \"1.5h\"\nb = 1\nc = []")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("30s, 10m, 24h"), "{e}");
    }
}
