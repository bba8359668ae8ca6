//! The idempotency keys of a party's messages (A2A `messageId`): the first use of a messageId is
//! `a2a:<messageId>`; a later use of the same message, once the task it opened ended, gets a key of
//! its own that counts the uses, so a retry finds its task and a new use opens a new one.

use super::{ErrorCode, Result, ServiceError};

/// A party's message keeps the client's `messageId` as its idempotency key, behind this prefix:
/// a retry is recognised by it, and A2A shows the party's messages under the client's ids.
pub const A2A_KEY_PREFIX: &str = "a2a:";
/// The prefix of the keys of a messageId's later uses ([`ReuseKeys`]).
const A2A_REUSE_PREFIX: &str = "a2a~";
/// Most times one message (the same messageId and content) may open a new task for a party, once
/// each earlier one ended after the party posted in it: the width of the decimal use count in its
/// idempotency key ([`ReuseKeys`]). Different contents under one messageId each have their own count.
pub const MAX_MESSAGE_ID_USES: u32 = 999_999;
/// Digits of the use count in a reused messageId's key: fixed, so keys order by count.
const USE_DIGITS: usize = 6;

/// The idempotency keys of a messageId's later uses with one content (its first use, whatever the
/// content, is `a2a:<messageId>`): `a2a~<16 hex>.<use>:<messageId>`, the hex digesting the
/// message's content (messageId included), the use counted from 1 in [`USE_DIGITS`] digits. A retry
/// of the newest use finds it with one read of the greatest key in the range (the keys of one
/// content differ only in the digits), and different contents never share keys. A2A shows the
/// messageId after the `:`.
pub(super) struct ReuseKeys {
    prefix: String,
    message_id: String,
}

impl ReuseKeys {
    /// The keys of message `message_id` whose whole content (the message as the party sent it,
    /// its messageId included) is `content`.
    pub(super) fn of(message_id: &str, content: &impl serde::Serialize) -> Self {
        let content = serde_json::to_vec(content).unwrap_or_default();
        let digest = crate::domain::sha256_hex(&content);
        Self {
            prefix: format!("{A2A_REUSE_PREFIX}{}.", &digest[..16]),
            message_id: message_id.to_owned(),
        }
    }

    /// The key of use `n` (1..=[`MAX_MESSAGE_ID_USES`]).
    pub(super) fn key(&self, n: u32) -> String {
        format!("{}{n:0USE_DIGITS$}:{}", self.prefix, self.message_id)
    }

    /// The use a key of this content stands for; `None` for any other key.
    pub(super) fn use_of(&self, key: &str) -> Option<u32> {
        let rest = key.strip_prefix(&self.prefix)?;
        let (digits, id) = rest.split_at_checked(USE_DIGITS)?;
        if id.strip_prefix(':') != Some(self.message_id.as_str())
            || !digits.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        digits.parse().ok().filter(|n| *n >= 1)
    }
}

/// `next` as the number of a new use of one message under its messageId, or the refusal past
/// [`MAX_MESSAGE_ID_USES`].
pub(super) fn within_bound(message_id: &str, next: u32) -> Result<u32> {
    if next > MAX_MESSAGE_ID_USES {
        return Err(ServiceError::new(
            ErrorCode::IdempotencyConflict,
            format!(
                "messageId {message_id:?} already opened {MAX_MESSAGE_ID_USES} tasks with this \
                 content; give each message a new messageId"
            ),
        ));
    }
    Ok(next)
}

/// The client's messageId behind an idempotency key of a party's message, if it is one.
pub fn client_message_id(key: &str) -> Option<&str> {
    if let Some(id) = key.strip_prefix(A2A_KEY_PREFIX) {
        return Some(id);
    }
    let rest = key.strip_prefix(A2A_REUSE_PREFIX)?;
    // `<16 hex>.<use>:` now; `<16 hex>:` in keys written before the use count.
    let hex = rest.get(..16)?;
    if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let rest = &rest[16..];
    if let Some(id) = rest.strip_prefix(':') {
        return Some(id);
    }
    let digits = rest.strip_prefix('.')?.get(..USE_DIGITS)?;
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    rest[1 + USE_DIGITS..].strip_prefix(':')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_of(id: &str, body: &str) -> ReuseKeys {
        ReuseKeys::of(id, &serde_json::json!({ "message_id": id, "body": body }))
    }

    #[test]
    fn every_use_up_to_the_bound_has_a_key_that_names_its_use_and_the_messageid() {
        let keys = keys_of("m:1", "hello");
        for n in [1, 2, 999, MAX_MESSAGE_ID_USES] {
            let key = keys.key(n);
            assert_eq!(keys.use_of(&key), Some(n), "{key}");
            assert_eq!(client_message_id(&key), Some("m:1"), "{key}");
        }
        // The keys of one content sort by their use, so the greatest key is the newest use.
        assert!(keys.key(9) < keys.key(10) && keys.key(10) < keys.key(MAX_MESSAGE_ID_USES));
        // Another content or messageId is another range.
        let other = keys_of("m:1", "bye");
        assert_eq!(other.use_of(&keys.key(1)), None);
        assert_eq!(keys_of("m:2", "hello").use_of(&keys.key(1)), None);
        // Keys written before the use count still show their messageId.
        assert_eq!(client_message_id("a2a~0123456789abcdef:m:1"), Some("m:1"));
        assert_eq!(client_message_id("a2a~0123456789abcdeg:m:1"), None);
        assert_eq!(client_message_id("other"), None);
    }

    #[test]
    fn the_last_use_is_allowed_and_the_next_refused_with_what_to_do() {
        assert_eq!(
            within_bound("m1", MAX_MESSAGE_ID_USES).unwrap(),
            MAX_MESSAGE_ID_USES
        );
        let refused = within_bound("m1", MAX_MESSAGE_ID_USES + 1).unwrap_err();
        assert_eq!(refused.code, ErrorCode::IdempotencyConflict);
        assert!(
            refused.message.contains("new messageId"),
            "{}",
            refused.message
        );
    }
}
