//! Secrets' two small primitives: random bytes from the system source, and an equality whose time
//! does not depend on where two strings first differ.
//!
//! The one place liaison draws randomness (token secrets, link secrets, webhook secrets, nonces,
//! retry jitter) and compares a secret it was handed with the one it expects. It reads the system
//! random source and nothing else.

use ring::rand::SecureRandom as _;

/// `N` random bytes, or `None` when the system random source fails (it does not on Linux once
/// booted; callers that can report an error do so).
pub fn try_random<const N: usize>() -> Option<[u8; N]> {
    let mut bytes = [0u8; N];
    ring::rand::SystemRandom::new().fill(&mut bytes).ok()?;
    Some(bytes)
}

/// `N` random bytes.
pub fn random<const N: usize>() -> [u8; N] {
    try_random().expect("the system random source works")
}

/// A random number in `[0, 1)` (53 random bits), for jitter; 0.5 if the source fails.
pub fn random_unit() -> f64 {
    match try_random::<8>() {
        Some(bytes) => (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64,
        None => 0.5,
    }
}

/// Equality that takes as long whatever the first difference (the length is not secret).
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_are_the_same_and_any_difference_is_not() {
        assert!(same("", ""));
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("xbc", "abc"));
    }

    #[test]
    fn random_draws_differ_and_the_unit_stays_below_one() {
        assert_ne!(random::<32>(), random::<32>());
        for _ in 0..1000 {
            let u = random_unit();
            assert!((0.0..1.0).contains(&u), "{u}");
        }
    }
}
