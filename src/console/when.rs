//! Times as people read them. Every time a console page prints goes through the `when` filter:
//! the server writes `<time datetime="…" title="…">2026-12-04 22:14 UTC</time>`, readable without
//! JavaScript; `console.js` then says it relative to now ("3 min ago", "in 2 h") with the local,
//! exact time on hover, and keeps it current. A value that is not a time (empty, `none`, a word) is
//! printed as it is, escaped.

use chrono::{DateTime, SecondsFormat, Utc};
use minijinja::Value;

/// The `when` filter: an RFC 3339 time as a `<time>` element; anything else escaped as text.
pub(super) fn when(value: Value) -> Value {
    if value.is_none() || value.is_undefined() {
        return Value::from("");
    }
    let text = value.to_string();
    match DateTime::parse_from_rfc3339(&text) {
        Ok(at) => {
            let at = at.with_timezone(&Utc);
            let exact = at.to_rfc3339_opts(SecondsFormat::Millis, true);
            Value::from_safe_string(format!(
                "<time datetime=\"{exact}\" title=\"{exact}\">{}</time>",
                at.format("%Y-%m-%d %H:%M UTC")
            ))
        }
        Err(_) => Value::from(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(source: &str, value: Value) -> String {
        let mut env = minijinja::Environment::new();
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
        env.add_filter("when", when);
        env.add_template("t.html", source).unwrap();
        env.get_template("t.html")
            .unwrap()
            .render(minijinja::context! { v => value })
            .unwrap()
    }

    #[test]
    fn a_time_becomes_a_time_element_readable_without_script() {
        assert_eq!(
            render("{{ v|when }}", Value::from("2026-12-04T22:14:14.023Z")),
            "<time datetime=\"2026-12-04T22:14:14.023Z\" title=\"2026-12-04T22:14:14.023Z\">\
             2026-12-04 22:14 UTC</time>"
        );
        // An offset is said in UTC, the console's one zone before the browser localises it.
        assert!(
            render("{{ v|when }}", Value::from("2026-12-04T23:14:14+01:00"))
                .contains(">2026-12-04 22:14 UTC<")
        );
    }

    #[test]
    fn anything_else_is_text_escaped_and_nothing_is_empty() {
        assert_eq!(
            render("{{ v|when }}", Value::from("<b>soon</b>")),
            "&lt;b&gt;soon&lt;&#x2f;b&gt;"
        );
        assert_eq!(render("{{ v|when }}", Value::from(())), "");
        assert_eq!(render("[{{ missing|when }}]", Value::from(())), "[]");
    }
}
