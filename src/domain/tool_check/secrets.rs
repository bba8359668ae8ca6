//! Secrets masked out of what the server reads of a call: names that say "secret" and values that
//! look like one (known token prefixes, long random words), in `NAME=value`, `--flag value` and
//! header shapes.

/// Names that say their value is a secret.
const SECRET_NAMES: &[&str] = &[
    "token",
    "secret",
    "passw",
    "pwd",
    "apikey",
    "api_key",
    "api-key",
    "auth",
    "credential",
    "private",
    "access_key",
    "access-key",
    "session",
    "cookie",
];

/// Prefixes of well-known credentials.
const SECRET_PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "pk_live",
    "rk_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "akia",
    "asia",
    "lsn_",
    "eyj",
    "npm_",
    "hf_",
];

const MASK: &str = "***";

fn secret_name(name: &str) -> bool {
    let n = name
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_ascii_lowercase();
    !n.is_empty() && SECRET_NAMES.iter().any(|s| n.contains(s))
}

/// A value that looks like a credential: a well-known prefix, or a long run of letters and digits
/// mixing upper case, lower case and digits (a git commit id, all lower-case hex, is not one).
fn secret_value(value: &str) -> bool {
    let v = value.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | ';' | ')' | '(' | '}'));
    let lower = v.to_ascii_lowercase();
    if v.len() >= 8 && SECRET_PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return true;
    }
    let token_chars = v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-' | '.'));
    token_chars
        && v.len() >= 24
        && v.chars().any(|c| c.is_ascii_uppercase())
        && v.chars().any(|c| c.is_ascii_lowercase())
        && v.chars().any(|c| c.is_ascii_digit())
}

/// `text` with everything that looks like a secret replaced by `***`: values of names that say
/// "token", "secret", "password"… (`NAME=…`, `--name …`, `"name": "…"`), a URL's password,
/// the word after `Bearer` / `Basic`, well-known credential prefixes (`sk-`, `ghp_`, `AKIA`,
/// `lsn_`, JWTs…) and long mixed-case runs of letters and digits. Line breaks become spaces: a
/// summary is one line.
pub fn mask_secrets(text: &str) -> String {
    let one_line: String = text
        .chars()
        .map(|c| {
            if crate::domain::text::is_line_break(c) || c.is_control() {
                ' '
            } else {
                c
            }
        })
        .collect();
    let mut out: Vec<String> = Vec::new();
    let mut mask_next = false;
    // Words end at spaces and at commas (compact JSON has no spaces: `{"api_key":"…","q":1}`).
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, c) in one_line.char_indices() {
        if c == ' ' || c == ',' {
            pieces.push(&one_line[start..i]);
            pieces.push(&one_line[i..i + 1]);
            start = i + 1;
        }
    }
    pieces.push(&one_line[start..]);
    for word in pieces {
        if word == " " || word == "," {
            out.push(word.to_owned());
            continue;
        }
        if mask_next && !word.is_empty() {
            let lower = word
                .trim_matches(|c| c == '"' || c == '\'')
                .to_ascii_lowercase();
            if matches!(lower.as_str(), "bearer" | "basic" | "token") {
                // `Authorization: Bearer …`: the secret is the word after the scheme.
                out.push(word.to_owned());
                continue;
            }
            let closing: String = word
                .chars()
                .rev()
                .take_while(|c| matches!(c, '"' | '\'' | ',' | '}' | ')'))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            out.push(format!("{MASK}{closing}"));
            mask_next = false;
            continue;
        }
        out.push(mask_word(word, &mut mask_next));
    }
    out.concat()
}

fn mask_word(word: &str, mask_next: &mut bool) -> String {
    if word.is_empty() {
        return String::new();
    }
    let bare = word.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | '{' | '}'));
    let lower = bare.to_ascii_lowercase();
    if matches!(lower.as_str(), "bearer" | "basic" | "token") {
        *mask_next = true;
        return word.to_owned();
    }
    // `--password secret`, `-H 'Authorization: …'` (its value follows)
    if (bare.starts_with("--") || lower.ends_with(':')) && !bare.contains('=') && secret_name(bare)
    {
        *mask_next = true;
        return word.to_owned();
    }
    // A URL's password: scheme://user:password@host
    if let Some(scheme) = word.find("://") {
        let rest = &word[scheme + 3..];
        if let Some(at) = rest.find('@') {
            let userinfo = &rest[..at];
            if let Some(colon) = userinfo.find(':') {
                return format!(
                    "{}{}:{MASK}{}",
                    &word[..scheme + 3],
                    &userinfo[..colon],
                    &rest[at..]
                );
            }
        }
        return word.to_owned();
    }
    // NAME=value, --name=value, "name":"value", name: value
    if let Some(at) = word.find(['=', ':']) {
        let (name, value) = (&word[..at], &word[at + 1..]);
        if secret_name(name) && !value.is_empty() {
            let closing: String = value
                .chars()
                .rev()
                .take_while(|c| matches!(c, '"' | '\'' | ',' | '}'))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let opening: String = value
                .chars()
                .take_while(|c| matches!(c, '"' | '\''))
                .collect();
            return format!("{name}{}{opening}{MASK}{closing}", &word[at..at + 1]);
        }
        if secret_name(name) && value.is_empty() {
            *mask_next = true;
            return word.to_owned();
        }
        if secret_value(value) {
            return format!("{name}{}{MASK}", &word[at..at + 1]);
        }
    }
    if secret_value(bare) {
        return word.replace(bare, MASK);
    }
    word.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_masked_in_every_shape() {
        let cases = [
            (
                "GITHUB_TOKEN=ghp_abcdef123456 git push",
                "GITHUB_TOKEN=*** git push",
            ),
            (
                "mysql --password hunter2 -u root",
                "mysql --password *** -u root",
            ),
            ("mysql --password=hunter2", "mysql --password=***"),
            (
                "curl -H 'Authorization: Bearer abc.def' https://x",
                "curl -H 'Authorization: Bearer ***' https://x",
            ),
            (
                "psql postgres://app:s3cret@db/prod",
                "psql postgres://app:***@db/prod",
            ),
            (
                r#"{"api_key":"AbCdEf1234567890XyZ12345","q":"x"}"#,
                r#"{"api_key":"***","q":"x"}"#,
            ),
            ("export K=AKIAABCDEFGHIJKLMNOP", "export K=***"),
            ("echo wJalrXUtnFEMIK7MDENGbPxRfiCYEXAMPLEKEY1", "echo ***"),
            (
                "git checkout 3f2a9c1d4e5b6a7f8091a2b3c4d5e6f708192a3b",
                "git checkout 3f2a9c1d4e5b6a7f8091a2b3c4d5e6f708192a3b",
            ),
            ("line one\nTOKEN=abc", "line one TOKEN=***"),
        ];
        for (input, want) in cases {
            assert_eq!(mask_secrets(input), want, "{input}");
        }
    }
}
