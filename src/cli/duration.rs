//! Durations on the command line: a number of seconds (`90`) or a number with one unit (`30s`,
//! `10m`, `24h`, `7d`). Whole seconds only: the server counts in seconds.

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
}
