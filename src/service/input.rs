//! A rule every request obeys, whatever the operation: no string anywhere in it may hold a
//! character the store cannot keep (U+0000, which PostgreSQL's `text` refuses and SQLite would
//! keep). It is checked here, before anything is read or written, so both backends answer the same
//! `invalid_input` naming the field, and nothing changes.
//!
//! The check reads the request's serde form, so a field added later is covered without being
//! listed: every request type passed here derives `Serialize`. It looks at the request as
//! serde_json writes it, where U+0000 in any string (key or value) can only be the escape
//! `\u0000`; only a request that holds one is walked as a tree, to name the string. (Walking
//! every request as a `serde_json::Value` tree was 4% of an intake's instructions.)

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use super::{Result, ServiceError};
use crate::domain::text;

/// Refuses `request` (named `what` in the error) if any string in it, keys included, holds a
/// character no backend can store.
pub(crate) fn storable(what: &str, request: &impl Serialize) -> Result<()> {
    storable_json(what, request).map(drop)
}

/// [`storable`], returning `request` as `serde_json::to_vec` writes it, for a caller that needs
/// those bytes too (a post hashes them).
pub(crate) fn storable_json(what: &str, request: &impl Serialize) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(request).map_err(|e| unreadable(what, e))?;
    if escapes_nul(&json) {
        walk_tree(what, request)?;
    }
    Ok(json)
}

/// The rule for a JSON request body as it arrived (every front that decodes JSON, before it
/// decodes): refused naming the string, whatever the request type will be.
pub fn storable_json_text(what: &str, json: &[u8]) -> Result<()> {
    if !escapes_nul(json) {
        return Ok(());
    }
    match serde_json::from_slice::<Value>(json) {
        Ok(value) => walk(&value, &mut what.to_owned()),
        // Not JSON: the decoder says why.
        Err(_) => Ok(()),
    }
}

/// The rule for a request's address: a path or query holding U+0000 (only written `%00`) is
/// refused before any id in it is looked up.
pub fn storable_address(path_and_query: &str) -> Result<()> {
    let bytes = path_and_query.as_bytes();
    let nul = bytes
        .windows(3)
        .any(|w| w[0] == b'%' && w[1] == b'0' && w[2] == b'0');
    if nul {
        return Err(ServiceError::invalid(
            "the address holds U+0000 (%00); no text in liaison may contain that character \
             (it cannot be stored): remove it",
        ));
    }
    Ok(())
}

/// Whether JSON text holds the escape `\u0000`, the only way serde_json writes U+0000. A
/// backslash starts an escape and the byte after it belongs to that escape, so an escaped
/// backslash followed by the text `u0000` is not one.
fn escapes_nul(json: &[u8]) -> bool {
    let mut rest = json;
    while let Some(at) = rest.iter().position(|&b| b == b'\\') {
        let escape = &rest[at + 1..];
        if escape.starts_with(b"u0000") {
            return true;
        }
        rest = escape.get(1..).unwrap_or_default();
    }
    false
}

/// The check on the request's `serde_json::Value` tree, naming the string that fails it.
fn walk_tree(what: &str, request: &impl Serialize) -> Result<()> {
    let value = serde_json::to_value(request).map_err(|e| unreadable(what, e))?;
    let mut path = what.to_owned();
    walk(&value, &mut path)
}

fn unreadable(what: &str, e: serde_json::Error) -> ServiceError {
    ServiceError::invalid(format!("{what} cannot be read: {e}"))
}

/// The same rule for one string field.
pub(crate) fn storable_str(what: &str, value: &str) -> Result<()> {
    match text::first_storable_violation(value) {
        None => Ok(()),
        Some((at, c)) => Err(refusal(what, at, c)),
    }
}

fn refusal(path: &str, at: usize, c: char) -> ServiceError {
    ServiceError::invalid(format!(
        "{path} holds U+{:04X} at character {at}; no text in liaison may contain that character \
         (it cannot be stored): remove it",
        c as u32
    ))
}

/// Checks every string under `value`; `path` names it, and is built further only as deep as the
/// walk goes (a refusal's name is written only when there is one).
fn walk(value: &Value, path: &mut String) -> Result<()> {
    match value {
        Value::String(s) => storable_str(path, s),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                let _ = write!(path, "[{i}]");
                walk(item, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Object(fields) => {
            for (key, item) in fields {
                if let Some((at, c)) = text::first_storable_violation(key) {
                    return Err(refusal(&format!("a key of {path}"), at, c));
                }
                let len = path.len();
                path.push('.');
                path.push_str(key);
                walk(item, path)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// Strings made of the characters that matter to the check and to JSON's escapes.
    fn tricky_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop::sample::select(vec![
                '\0', '\\', 'u', '0', '"', 'a', '\n', '\u{1}', 'é', '\u{2028}',
            ]),
            0..12,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            tricky_text().prop_map(Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::vec((tricky_text(), inner), 0..6)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// The check on the JSON text answers as the walk of the tree does, refusal message
        /// included, for any request: U+0000 anywhere, escaped backslashes and the text
        /// `u0000` beside it.
        #[test]
        fn the_text_check_answers_as_the_tree_walk(value in any_json()) {
            let fast = storable_json("req", &value).map(drop);
            let tree = walk_tree("req", &value);
            prop_assert_eq!(fast.map_err(|e| e.message), tree.map_err(|e| e.message));
        }
    }

    /// The text check knows one character; this holds it to the rule itself: every character
    /// the rule refuses must come out of serde_json as the escape it looks for.
    #[test]
    fn every_character_the_rule_refuses_is_the_escape_the_text_check_finds() {
        let refused: Vec<char> = (char::MIN..=char::MAX)
            .filter(|c| text::first_storable_violation(c.encode_utf8(&mut [0; 4])).is_some())
            .collect();
        assert!(!refused.is_empty());
        for c in refused {
            let json = serde_json::to_vec(&json!({ c.to_string(): c.to_string() })).unwrap();
            assert!(escapes_nul(&json), "U+{:04X}", c as u32);
        }
    }

    #[test]
    fn an_escaped_backslash_before_u0000_is_text() {
        assert!(!escapes_nul(br#"{"a":"\\u0000"}"#));
        assert!(escapes_nul(br#"{"a":"\\\u0000"}"#));
        assert!(escapes_nul(br#"{"\u0000":1}"#));
        assert!(!escapes_nul(br#"{"a":"\"}"#));
        assert!(!escapes_nul(b"\\"));
    }

    #[test]
    fn nul_anywhere_is_refused_with_its_path() {
        let ok = json!({"body": "é\u{1}\u{2028}", "data": {"k": ["x"]}});
        assert!(storable("post", &ok).is_ok());
        let e = storable(
            "post",
            &json!({"attachments": [{"name": "a"}, {"name": "b\0"}]}),
        )
        .unwrap_err();
        assert_eq!(e.code, crate::service::ErrorCode::InvalidInput);
        assert!(
            e.message
                .starts_with("post.attachments[1].name holds U+0000 at character 1"),
            "{}",
            e.message
        );
        let e = storable("post", &json!({"data": {"a\0": 1}})).unwrap_err();
        assert!(
            e.message.starts_with("a key of post.data holds U+0000"),
            "{}",
            e.message
        );
    }
}
