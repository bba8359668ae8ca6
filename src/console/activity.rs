//! The channel's activity as a member sees it (SPEC §11): per week, threads opened, answered and
//! closed, the time to the first reply (p50, p90), approvals allowed, rejected and expired with the
//! requests a human refused, and external tasks by final state — each a small SVG bar chart drawn
//! on the server, with its numbers in a table beside it (readable without the chart) and the
//! totals since a date in the table's last line. One channel, or all of hers together ("All my
//! channels", `?scope=all`). The figures are the service's (`Service::activity`).

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use minijinja::value::Serde;
use serde::{Deserialize, Serialize};

use super::session::{channel_names, frame, signed_in};
use super::{Console, Page};
use crate::domain::ChannelName;
use crate::service::{ActivityFigures, ActivityRequest, ActivityScope, ServiceError, WeekActivity};

/// Width of one week's group of bars, and the plot's height, in SVG units; room on the left for
/// the value axis's labels and below for the weeks'.
const GROUP: f64 = 36.0;
const HEIGHT: f64 = 80.0;
const LEFT: f64 = 40.0;
const BOTTOM: f64 = 16.0;
const TOP: f64 = 6.0;

#[derive(Deserialize, Default)]
pub(super) struct ActivityQuery {
    channel: Option<String>,
    /// `all`: every channel she can read, counted together.
    scope: Option<String>,
    weeks: Option<u32>,
    since: Option<String>,
}

#[derive(Serialize)]
struct Bar {
    x: f64,
    y: f64,
    width: f64,
    height: f64,
    class: &'static str,
    title: String,
}

/// A line across the plot at a value, labelled on the value axis.
#[derive(Serialize)]
struct Tick {
    y: f64,
    label: String,
}

/// A week's label under its group of bars.
#[derive(Serialize)]
struct WeekLabel {
    x: f64,
    label: String,
}

#[derive(Serialize)]
struct Chart {
    id: &'static str,
    title: &'static str,
    /// (name, css class) of each series, in the legend's order.
    series: Vec<(&'static str, &'static str)>,
    bars: Vec<Bar>,
    ticks: Vec<Tick>,
    week_labels: Vec<WeekLabel>,
    /// The plot's left edge and baseline (the axes).
    left: f64,
    base: f64,
    width: f64,
    height: f64,
    /// Nothing to draw in these weeks: the chart says so instead of an empty frame.
    empty: bool,
    /// The table: one row per week, a cell per series.
    rows: Vec<(String, Vec<String>)>,
    /// The table's last line: the totals since a date.
    total: (String, Vec<String>),
}

/// One series of a chart: its name, its CSS class, its value in a week, and that value as text.
type Series = (
    &'static str,
    &'static str,
    fn(&ActivityFigures) -> Option<i64>,
    fn(i64) -> String,
);

/// The values the value axis marks: 0, the top, and the middle when it is a whole step apart.
fn ticks(max: i64) -> Vec<i64> {
    match max {
        m if m >= 2 && m % 2 == 0 => vec![0, m / 2, m],
        m if m >= 3 => vec![0, m / 2, m],
        m => vec![0, m],
    }
}

/// A chart of `series` over `weeks`, with `totals` (since `since`) under its table.
fn chart(
    id: &'static str,
    title: &'static str,
    weeks: &[WeekActivity],
    (since, totals): (&str, &ActivityFigures),
    series: &[Series],
) -> Chart {
    let top = weeks
        .iter()
        .flat_map(|w| series.iter().filter_map(|s| (s.2)(&w.figures)))
        .max()
        .unwrap_or(0);
    let max = top.max(1) as f64;
    let base = TOP + HEIGHT;
    let width = GROUP / (series.len() as f64 + 1.0);
    // Every week labelled when they fit, else every second one (then every fourth…).
    let every = (weeks.len() / 12).max(1);
    let mut bars = Vec::new();
    let mut rows = Vec::new();
    let mut week_labels = Vec::new();
    for (i, w) in weeks.iter().enumerate() {
        let day = w.start.to_string();
        let week = day.get(..10).unwrap_or(&day).to_owned();
        if i % every == 0 {
            week_labels.push(WeekLabel {
                x: LEFT + i as f64 * GROUP + GROUP / 2.0,
                label: week.get(5..).unwrap_or(&week).to_owned(),
            });
        }
        let mut cells = Vec::new();
        for (k, (name, class, value, text)) in series.iter().enumerate() {
            let v = value(&w.figures);
            cells.push(v.map_or_else(|| "–".to_owned(), *text));
            if let Some(v) = v.filter(|v| *v > 0) {
                let h = (v as f64 / max * HEIGHT).max(1.0);
                bars.push(Bar {
                    x: LEFT + i as f64 * GROUP + width * (k as f64 + 0.5),
                    y: base - h,
                    width,
                    height: h,
                    class,
                    title: format!("week of {week}: {name} {}", text(v)),
                });
            }
        }
        rows.push((week, cells));
    }
    let label = series.first().map_or(count as fn(i64) -> String, |s| s.3);
    Chart {
        id,
        title,
        series: series.iter().map(|s| (s.0, s.1)).collect(),
        empty: bars.is_empty(),
        bars,
        ticks: ticks(top.max(1))
            .into_iter()
            .map(|v| Tick {
                y: base - v as f64 / max * HEIGHT,
                label: label(v),
            })
            .collect(),
        week_labels,
        left: LEFT,
        base,
        width: LEFT + weeks.len() as f64 * GROUP,
        height: base + BOTTOM,
        rows,
        total: (
            format!("since {since}"),
            series
                .iter()
                .map(|(_, _, value, text)| value(totals).map_or_else(|| "–".to_owned(), *text))
                .collect(),
        ),
    }
}

fn count(n: i64) -> String {
    n.to_string()
}

/// Seconds as "45 s", "12 min", "3.5 h", "2.0 d".
fn duration(s: i64) -> String {
    match s {
        s if s < 120 => format!("{s} s"),
        s if s < 7_200 => format!("{} min", s / 60),
        s if s < 172_800 => format!("{:.1} h", s as f64 / 3_600.0),
        s => format!("{:.1} d", s as f64 / 86_400.0),
    }
}

fn task(w: &ActivityFigures, state: &str) -> Option<i64> {
    Some(w.tasks.get(state).copied().unwrap_or(0))
}

/// `GET /console/activity?channel=…&weeks=…&since=…`, or `?scope=all&…` for all her channels.
pub(super) async fn page(
    State(c): State<Console>,
    headers: HeaderMap,
    q: Result<Query<ActivityQuery>, QueryRejection>,
) -> Result<Response, Response> {
    let s = signed_in(&c, &headers).await?;
    let fail = |e: ServiceError| Page::from(e).with(&c, true).into_response();
    let q = q.map(|q| q.0).unwrap_or_default();
    let channels = channel_names(&c, &s).await?;
    let all = match q.scope.as_deref() {
        None => false,
        Some("all") => true,
        Some(other) => {
            let shown = crate::domain::text::quote(other);
            let e = ServiceError::invalid(format!("scope {shown} is not one: use scope=all"));
            return Err(fail(e));
        }
    };
    let chosen = if all {
        None
    } else {
        q.channel.or_else(|| channels.first().cloned())
    };
    let scope = match &chosen {
        _ if all => Some(ActivityScope::AllChannels),
        Some(name) => Some(ActivityScope::Channel {
            channel: ChannelName::parse(name.as_str())
                .map_err(|_| fail(ServiceError::not_found("channel", name)))?,
        }),
        None => None,
    };
    let mut charts = Vec::new();
    if let Some(scope) = scope {
        let request = ActivityRequest {
            scope,
            weeks: q.weeks,
            since: q.since,
        };
        let activity = c.service.activity(&s.caller, request).await.map_err(fail)?;
        let w = &activity.weeks;
        let day = activity.since.to_string();
        let totals = (day.get(..10).unwrap_or(&day), &activity.totals);
        charts.push(chart(
            "threads",
            "Threads opened, and of those answered and closed",
            w,
            totals,
            &[
                ("opened", "s1", |w| Some(w.opened), count),
                ("answered", "s2", |w| Some(w.answered), count),
                ("closed", "s3", |w| Some(w.closed), count),
            ],
        ));
        charts.push(chart(
            "first-reply",
            "Time to the first reply",
            w,
            totals,
            &[
                ("p50", "s1", |w| w.first_reply_p50_s, duration),
                ("p90", "s2", |w| w.first_reply_p90_s, duration),
            ],
        ));
        charts.push(chart(
            "approvals",
            "Approvals settled, and requests a human refused",
            w,
            totals,
            &[
                ("allowed", "s2", |w| Some(w.allowed), count),
                ("rejected", "s4", |w| Some(w.rejected), count),
                ("expired", "s3", |w| Some(w.expired), count),
                (
                    "requests refused",
                    "s5",
                    |w| Some(w.refused_requests),
                    count,
                ),
            ],
        ));
        charts.push(chart(
            "tasks",
            "External tasks ended, by final state",
            w,
            totals,
            &[
                ("completed", "s2", |w| task(w, "completed"), count),
                ("failed", "s4", |w| task(w, "failed"), count),
                ("canceled", "s3", |w| task(w, "canceled"), count),
                ("rejected", "s5", |w| task(w, "rejected"), count),
            ],
        ));
    }
    c.render(
        "activity.html",
        minijinja::context! { channels => channels, channel => chosen, all => all,
        charts => Serde(charts), ..Serde(frame(&s, "activity")) },
    )
    .map(IntoResponse::into_response)
    .map_err(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_value_axis_marks_zero_the_top_and_a_whole_middle() {
        assert_eq!(ticks(1), vec![0, 1]);
        assert_eq!(ticks(2), vec![0, 1, 2]);
        assert_eq!(ticks(7), vec![0, 3, 7]);
        assert_eq!(ticks(40), vec![0, 20, 40]);
    }

    #[test]
    fn durations_read_as_people_say_them() {
        assert_eq!(duration(45), "45 s");
        assert_eq!(duration(600), "10 min");
        assert_eq!(duration(5_400), "90 min");
        assert_eq!(duration(9_000), "2.5 h");
        assert_eq!(duration(259_200), "3.0 d");
    }
}
