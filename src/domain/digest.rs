//! Lower-case hexadecimal, and the SHA-256 digests liaison stores and compares in that form (token
//! hashes, request hashes, approval fingerprints, push body digests).

/// `bytes` as lower-case hexadecimal, two digits each.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for &b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

/// The SHA-256 digest of `bytes`, in lower-case hexadecimal.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn hex_is_two_lower_case_digits_a_byte(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let expected: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            prop_assert_eq!(hex(&bytes), expected);
        }
    }

    #[test]
    fn sha256_of_the_empty_string() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
