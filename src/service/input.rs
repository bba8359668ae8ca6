//! A rule every request obeys, whatever the operation: no string anywhere in it may hold a
//! character the store cannot keep (U+0000, which PostgreSQL's `text` refuses and SQLite would
//! keep). It is checked here, before anything is read or written, so both backends answer the same
//! `invalid_input` naming the field, and nothing changes.
//!
//! The check walks the request's serde form, so a field added later is covered without being
//! listed: every request type passed here derives `Serialize`.

use std::fmt::Write as _;

use serde::Serialize;
use serde_json::Value;

use super::{Result, ServiceError};
use crate::domain::text;

/// Refuses `request` (named `what` in the error) if any string in it, keys included, holds a
/// character no backend can store.
pub(crate) fn storable(what: &str, request: &impl Serialize) -> Result<()> {
    let value = serde_json::to_value(request)
        .map_err(|e| ServiceError::invalid(format!("{what} cannot be read: {e}")))?;
    let mut path = what.to_owned();
    walk(&value, &mut path)
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
    use serde_json::json;

    use super::*;

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
