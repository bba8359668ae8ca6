//! `liaison activity`: the activity figures of one channel, of one of the caller's sessions with
//! her own agents, or of all the caller's channels, per
//! week and in total since a date, from `GET /api/v1/activity`: a table by default (one line per
//! week, the totals last), the API's JSON with `--json`.

use clap::Args;
use serde_json::Value;

use super::admin::encode;
use super::member::{MemberArgs, request};
use super::table::{Column, cell, col, render};

#[derive(Debug, Args)]
pub struct ActivityArgs {
    /// One channel you can read (default: all of them, counted together).
    #[arg(long, conflicts_with = "session")]
    pub channel: Option<String>,
    /// One of your sessions with your own agents (ses_…): its commands only.
    #[arg(long)]
    pub session: Option<String>,
    /// Where the totals start: a date YYYY-MM-DD (00:00 UTC) or an RFC 3339 time, at most 366
    /// days back [default: the start of the first week shown].
    #[arg(long)]
    pub since: Option<String>,
    /// Weekly rows, 1-26, the current week last [default: the weeks since --since, else 8].
    #[arg(long)]
    pub weeks: Option<u32>,
    #[command(flatten)]
    pub member: MemberArgs,
}

/// The columns of the table: one per figure, each a field of a week (or of the totals).
const COLUMNS: [Column; 10] = [
    col!("WEEK OF", "week"),
    col!("OPENED", "opened"),
    col!("ANSWERED", "answered"),
    col!("CLOSED", "closed"),
    col!("REPLY P50", |r| seconds(&r["first_reply_p50_s"])),
    col!("REPLY P90", |r| seconds(&r["first_reply_p90_s"])),
    col!("ALLOWED", "allowed"),
    col!("REJECTED", "rejected"),
    col!("EXPIRED", "expired"),
    col!("REFUSED", "refused_requests"),
];

pub(super) async fn activity(a: ActivityArgs) -> anyhow::Result<()> {
    let mut query = Vec::new();
    if let Some(channel) = &a.channel {
        query.push(format!("channel={}", encode(channel)));
    }
    if let Some(session) = &a.session {
        query.push(format!("session={}", encode(session)));
    }
    if let Some(since) = &a.since {
        query.push(format!("since={}", encode(since)));
    }
    if let Some(weeks) = a.weeks {
        query.push(format!("weeks={weeks}"));
    }
    let path = format!("/api/v1/activity?{}", query.join("&"));
    let answer = request(&a.member, "GET", &path, None).await?;
    if a.member.json {
        println!("{}", serde_json::to_string_pretty(&answer)?);
    } else {
        println!("{}", text(&answer));
    }
    Ok(())
}

/// The answer as a terminal shows it: what was counted, the table, the tasks when there were any.
fn text(answer: &Value) -> String {
    let day = |v: &Value| cell(v).chars().take(10).collect::<String>();
    let scope = match (answer["channel"].as_str(), answer["session"].as_str()) {
        (_, Some(session)) => format!("session {session}"),
        (Some(channel), None) => format!("#{channel}"),
        (None, None) => format!(
            "all your channels ({})",
            answer["channels"]
                .as_array()
                .map(|c| c.iter().map(cell).collect::<Vec<_>>().join(", "))
                .filter(|c| !c.is_empty())
                .unwrap_or_else(|| "none".to_owned())
        ),
    };
    let mut rows: Vec<Value> = answer["weeks"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|w| with_label(w, day(&w["start"])))
        .collect();
    let totals = &answer["totals"];
    rows.push(with_label(
        totals,
        format!("since {}", day(&answer["since"])),
    ));
    let mut out = vec![
        format!("Activity of {scope}, per week (Monday-Sunday, UTC) and in total:"),
        render(&rows, &COLUMNS),
    ];
    let tasks = totals["tasks"].as_object().filter(|t| !t.is_empty());
    if let Some(tasks) = tasks {
        let ended: Vec<String> = tasks.iter().map(|(k, v)| format!("{k} {v}")).collect();
        out.push(format!(
            "External tasks ended in total: {}.",
            ended.join(", ")
        ));
    }
    out.join("\n")
}

/// `figures` with the row's label under `week`.
fn with_label(figures: &Value, label: String) -> Value {
    let mut row = figures.clone();
    row["week"] = Value::String(label);
    row
}

/// Seconds as "45s", "12m", "3.5h", "2.0d" (`-` when there is no figure).
fn seconds(v: &Value) -> String {
    match v.as_i64() {
        None => "-".to_owned(),
        Some(s) if s < 120 => format!("{s}s"),
        Some(s) if s < 7_200 => format!("{}m", s / 60),
        Some(s) if s < 172_800 => format!("{:.1}h", s as f64 / 3_600.0),
        Some(s) => format!("{:.1}d", s as f64 / 86_400.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_table_has_a_line_per_week_and_the_totals_last() {
        let week = |start: &str, opened: i64, p50: Value| {
            json!({"start": start, "opened": opened, "answered": 1, "closed": 0,
                   "first_reply_p50_s": p50, "first_reply_p90_s": null, "allowed": 0,
                   "rejected": 2, "expired": 0, "refused_requests": 1, "tasks": {}})
        };
        let answer = json!({
            "scope": "all_channels",
            "channels": ["demo", "ops"],
            "since": "2026-11-12T00:00:00.000Z",
            "weeks": [week("2026-11-09T00:00:00.000Z", 3, json!(45)),
                      week("2026-11-16T00:00:00.000Z", 12, json!(5400))],
            "totals": {"opened": 15, "answered": 2, "closed": 0, "first_reply_p50_s": 45,
                       "first_reply_p90_s": 5400, "allowed": 0, "rejected": 4, "expired": 0,
                       "refused_requests": 2, "tasks": {"completed": 1}},
        });
        let shown = text(&answer);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(
            lines[0],
            "Activity of all your channels (demo, ops), per week (Monday-Sunday, UTC) and in total:"
        );
        let words = |i: usize| lines[i].split_whitespace().collect::<Vec<_>>();
        assert_eq!(words(1)[..3], ["WEEK", "OF", "OPENED"], "{shown}");
        assert_eq!(
            words(2),
            ["2026-11-09", "3", "1", "0", "45s", "-", "0", "2", "0", "1"],
            "{shown}"
        );
        assert_eq!(
            words(3)[..5],
            ["2026-11-16", "12", "1", "0", "90m"],
            "{shown}"
        );
        assert_eq!(
            words(4),
            [
                "since",
                "2026-11-12",
                "15",
                "2",
                "0",
                "45s",
                "90m",
                "0",
                "4",
                "0",
                "2"
            ],
            "{shown}"
        );
        assert_eq!(lines[5], "External tasks ended in total: completed 1.");
        // Columns line up: each value starts under its header.
        let at = |line: &str, what: &str| line.find(what).unwrap();
        assert_eq!(at(lines[1], "REPLY P90"), at(lines[4], "90m"), "{shown}");
        let one = json!({"scope": "channel", "channel": "demo", "channels": ["demo"],
                         "since": "2026-11-12T00:00:00.000Z", "weeks": [], "totals": {}});
        assert!(text(&one).starts_with("Activity of #demo, per week"));
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(seconds(&json!(45)), "45s");
        assert_eq!(seconds(&json!(600)), "10m");
        assert_eq!(seconds(&json!(9_000)), "2.5h");
        assert_eq!(seconds(&json!(259_200)), "3.0d");
        assert_eq!(seconds(&Value::Null), "-");
    }
}
