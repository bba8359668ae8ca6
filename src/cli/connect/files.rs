//! The edits `liaison connect` makes to a client's settings files, pure: each takes a file's
//! text (none when the file is absent) and answers the new text, or none when nothing would
//! change; what the file held besides liaison's own entries is kept. A file that cannot be read
//! as what it should be (JSON object, TOML) is refused with the reason, and nothing is written.
//!
//! JSON files are read and written whole, so their keys come back in alphabetical order (the
//! content is kept, the order is not). `config.toml` is edited as text: only the keys of its
//! `[mcp_servers.liaison]` table that liaison sets are replaced or added, so comments, order and
//! every other table stay as they were.

use std::fmt;

use serde_json::{Map, Value};

/// Why a file was not edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A JSON settings file, parsed: an object (an absent or empty file is an empty object).
pub(super) fn json_object(name: &str, text: Option<&str>) -> Result<Map<String, Value>, Refused> {
    let Some(text) = text.filter(|t| !t.trim().is_empty()) else {
        return Ok(Map::new());
    };
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Refused(format!(
            "{name} is not a JSON object; fix it or move it away, then run this again (nothing was changed)"
        ))),
        Err(e) => Err(Refused(format!(
            "{name} is not valid JSON ({e}); fix it or move it away, then run this again (nothing was changed)"
        ))),
    }
}

/// The object under `key`, created when absent; refused when it is something else.
fn object_at<'a>(
    name: &str,
    map: &'a mut Map<String, Value>,
    key: &str,
) -> Result<&'a mut Map<String, Value>, Refused> {
    let entry = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Object(Map::new()));
    entry.as_object_mut().ok_or_else(|| {
        Refused(format!(
            "{name}: \"{key}\" is not a JSON object; fix it by hand (nothing was changed)"
        ))
    })
}

/// Sets `map[section][key] = value` for each pair.
pub(super) fn set_in(
    name: &str,
    map: &mut Map<String, Value>,
    section: &str,
    pairs: &Map<String, Value>,
) -> Result<(), Refused> {
    let inner = object_at(name, map, section)?;
    for (k, v) in pairs {
        inner.insert(k.clone(), v.clone());
    }
    Ok(())
}

/// Adds `item` to the array `map[key]` unless it is there (created when absent).
pub(super) fn add_to_array(
    name: &str,
    map: &mut Map<String, Value>,
    key: &str,
    item: &str,
) -> Result<(), Refused> {
    let entry = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Array(Vec::new()));
    let list = entry.as_array_mut().ok_or_else(|| {
        Refused(format!(
            "{name}: \"{key}\" is not a JSON array; fix it by hand (nothing was changed)"
        ))
    })?;
    if !list.iter().any(|v| v == item) {
        list.push(Value::String(item.to_owned()));
    }
    Ok(())
}

/// A hook group liaison wrote: every command in it is `liaison hook …`.
fn ours(group: &Value) -> bool {
    let commands: Vec<&str> = group["hooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|h| h["command"].as_str())
        .collect();
    !commands.is_empty() && commands.iter().all(|c| c.starts_with("liaison hook "))
}

/// Merges liaison's hooks (`hooks`: event → groups) into `map["hooks"]`: per event, liaison's
/// earlier groups are replaced where the first of them stood (added at the end when there was
/// none); every other group, and every other event, is kept.
pub(super) fn merge_hooks(
    name: &str,
    map: &mut Map<String, Value>,
    hooks: &Value,
) -> Result<(), Refused> {
    let target = object_at(name, map, "hooks")?;
    for (event, groups) in hooks.as_object().into_iter().flatten() {
        let wanted = groups.as_array().cloned().unwrap_or_default();
        let existing = match target.get(event) {
            None => Vec::new(),
            Some(Value::Array(list)) => list.clone(),
            Some(_) => {
                return Err(Refused(format!(
                    "{name}: hooks.{event} is not a JSON array; fix it by hand (nothing was changed)"
                )));
            }
        };
        let mut merged = Vec::with_capacity(existing.len() + wanted.len());
        let mut placed = false;
        for group in existing {
            if ours(&group) {
                if !placed {
                    merged.extend(wanted.iter().cloned());
                    placed = true;
                }
            } else {
                merged.push(group);
            }
        }
        if !placed {
            merged.extend(wanted);
        }
        target.insert(event.clone(), Value::Array(merged));
    }
    Ok(())
}

/// The text a JSON object is written as: two-space indented, with a final line break.
pub(super) fn json_text(map: &Map<String, Value>) -> String {
    let mut text = serde_json::to_string_pretty(map).unwrap_or_default();
    text.push('\n');
    text
}

/// Codex's `config.toml` with `[mcp_servers.<server>]` holding `values` (url,
/// bearer_token_env_var, tool_timeout_sec); none when it holds them already.
pub(super) fn codex_config(
    name: &str,
    text: Option<&str>,
    server: &str,
    values: &[(&str, toml::Value)],
) -> Result<Option<String>, Refused> {
    let text = text.unwrap_or_default();
    let parsed: toml::Table = toml::from_str(text).map_err(|e| {
        Refused(format!(
            "{name} is not valid TOML ({}); fix it or move it away, then run this again (nothing was changed)",
            e.message()
        ))
    })?;
    let current = parsed
        .get("mcp_servers")
        .and_then(|s| s.get(server))
        .and_then(toml::Value::as_table);
    if let Some(table) = current
        && values.iter().all(|(k, v)| table.get(*k) == Some(v))
    {
        return Ok(None);
    }
    let header = format!("[mcp_servers.{server}]");
    let lines: Vec<&str> = text.lines().collect();
    let at = lines.iter().position(|l| strip_comment(l) == header);
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    match at {
        None if parsed
            .get("mcp_servers")
            .and_then(|s| s.get(server))
            .is_some() =>
        {
            return Err(Refused(format!(
                "{name} defines mcp_servers.{server} in a form this command does not edit (an inline \
                 table or dotted keys); make it a {header} table by hand (nothing was changed)"
            )));
        }
        None => {
            if out.last().is_some_and(|l| !l.trim().is_empty()) {
                out.push(String::new());
            }
            out.push(header.clone());
            out.extend(values.iter().map(|(k, v)| format!("{k} = {v}")));
        }
        Some(at) => {
            let end = (at + 1..out.len())
                .find(|&i| out[i].trim_start().starts_with('['))
                .unwrap_or(out.len());
            let mut insert_at = at + 1;
            for (key, value) in values {
                let line = format!("{key} = {value}");
                let found = (at + 1..end).find(|&i| {
                    let l = out[i].trim_start();
                    l.strip_prefix(key)
                        .is_some_and(|rest| rest.trim_start().starts_with('='))
                });
                match found {
                    Some(i) => out[i] = line,
                    None => {
                        out.insert(insert_at, line);
                        insert_at += 1;
                    }
                }
            }
        }
    }
    let mut new_text = out.join("\n");
    new_text.push('\n');
    // What was written must read back as asked: a value spread over lines, or a key written
    // in a way this edit did not see, is refused rather than left half-changed.
    let check: toml::Table = toml::from_str(&new_text).map_err(|e| {
        Refused(format!(
            "{name}: could not add {header} without breaking the file ({}); add it by hand (nothing was changed)",
            e.message()
        ))
    })?;
    let table = check
        .get("mcp_servers")
        .and_then(|s| s.get(server))
        .and_then(toml::Value::as_table);
    if !table.is_some_and(|t| values.iter().all(|(k, v)| t.get(*k) == Some(v))) {
        return Err(Refused(format!(
            "{name}: could not set {header} by a plain edit; set it by hand (nothing was changed)"
        )));
    }
    Ok(Some(new_text))
}

/// A TOML line without its trailing comment and surrounding spaces (enough for a header line).
fn strip_comment(line: &str) -> &str {
    line.split('#').next().unwrap_or_default().trim()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn values() -> Vec<(&'static str, toml::Value)> {
        vec![
            ("url", toml::Value::String("http://h:1/mcp".into())),
            (
                "bearer_token_env_var",
                toml::Value::String("LIAISON_TOKEN".into()),
            ),
            ("tool_timeout_sec", toml::Value::Integer(120)),
        ]
    }

    #[test]
    fn hooks_are_merged_beside_the_users_own_and_a_second_merge_changes_nothing() {
        let mut settings = json_object(
            "s",
            Some(
                r#"{"model": "opus", "hooks": {"Stop": [{"hooks": [{"type": "command", "command": "my-linter"}]},
                {"hooks": [{"type": "command", "command": "liaison hook stop --consumer old"}]}]}}"#,
            ),
        )
        .unwrap();
        let ours = json!({"Stop": [{"hooks": [{"type": "command", "command": "liaison hook stop --consumer claude-code"}]}],
            "SessionStart": [{"hooks": [{"type": "command", "command": "liaison hook session-start --consumer claude-code"}]}]});
        merge_hooks("s", &mut settings, &ours).unwrap();
        let stop = settings["hooks"]["Stop"].as_array().unwrap();
        assert_eq!(stop.len(), 2);
        assert_eq!(stop[0]["hooks"][0]["command"], "my-linter");
        assert_eq!(
            stop[1]["hooks"][0]["command"],
            "liaison hook stop --consumer claude-code"
        );
        assert_eq!(settings["model"], "opus");
        let once = settings.clone();
        merge_hooks("s", &mut settings, &ours).unwrap();
        assert_eq!(settings, once);
    }

    #[test]
    fn unreadable_files_and_wrong_shapes_are_refused() {
        assert!(json_object("x", Some("{not json")).is_err());
        assert!(json_object("x", Some("[1]")).is_err());
        assert!(json_object("x", None).unwrap().is_empty());
        let mut m = json_object("x", Some(r#"{"hooks": []}"#)).unwrap();
        assert!(merge_hooks("x", &mut m, &json!({"Stop": []})).is_err());
        let mut m = json_object("x", Some(r#"{"hooks": {"Stop": {}}}"#)).unwrap();
        assert!(merge_hooks("x", &mut m, &json!({"Stop": []})).is_err());
        assert!(codex_config("c", Some("[broken"), "liaison", &values()).is_err());
        let inline = "mcp_servers = { liaison = { url = \"x\" } }\n";
        assert!(codex_config("c", Some(inline), "liaison", &values()).is_err());
    }

    #[test]
    fn the_codex_table_is_added_or_corrected_and_the_rest_of_the_file_kept() {
        let text = "# my settings\nmodel = \"o3\"\n\n[mcp_servers.github]\ncommand = \"gh-mcp\"\n";
        let new = codex_config("c", Some(text), "liaison", &values())
            .unwrap()
            .unwrap();
        assert!(
            new.starts_with(text),
            "the user's lines come first, untouched: {new}"
        );
        assert!(new.contains("[mcp_servers.liaison]\nurl = \"http://h:1/mcp\"\n"));
        assert_eq!(
            codex_config("c", Some(&new), "liaison", &values()).unwrap(),
            None
        );
        let stale = "[mcp_servers.liaison] # ours\nurl = \"http://old/mcp\" # old\nenabled = true\n\n[other]\nx = 1\n";
        let fixed = codex_config("c", Some(stale), "liaison", &values())
            .unwrap()
            .unwrap();
        assert!(fixed.contains("url = \"http://h:1/mcp\"\n"), "{fixed}");
        assert!(fixed.contains("enabled = true") && fixed.contains("[other]\nx = 1"));
        let t: toml::Table = toml::from_str(&fixed).unwrap();
        assert_eq!(
            t["mcp_servers"]["liaison"]["tool_timeout_sec"].as_integer(),
            Some(120)
        );
        assert!(
            codex_config("c", None, "liaison", &values())
                .unwrap()
                .is_some()
        );
    }
}
