//! Activity (SPEC §11; the console's "Activity", `GET /api/v1/activity`, `liaison activity`): over
//! a scope — one channel, or every channel the caller can read — per week and in total since a
//! date: the threads opened and, of those, how many were answered and closed; the time to the
//! first reply (p50, p90, nearest rank); the approvals allowed, rejected and expired, and the
//! requests a human refused; the external tasks by final state.
//!
//! Weeks start on Monday 00:00 UTC. Threads are counted by the time they were opened (a cohort:
//! "answered" and "closed" say what has become of them since), approvals by the time they were
//! settled, tasks by the time they ended. The weekly rows and the totals are the same figures
//! ([`ActivityFigures`]) computed by one function over two windows: whole weeks, and one bucket
//! from `since` to the end of the current week. Any member who can read a channel sees its
//! activity; the figures name nobody, and a channel she cannot read answers like one that does
//! not exist.
//!
//! A scope is resolved into the store's [`ActivityFilter`] (a channel list, and optionally a
//! thread list), so a scope over some threads only — those of one of her personal rooms with her
//! agents — is one more [`ActivityScope`] variant resolving to a thread list.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Caller, ErrorCode, Result, Service, ServiceError};
use crate::domain::{ChannelName, Timestamp};
use crate::store::{ActivityFilter, WEEK_MS, Window};

/// Most weeks one view spans.
pub const MAX_ACTIVITY_WEEKS: u32 = 26;

/// Weeks shown when neither `weeks` nor `since` says.
pub const DEFAULT_ACTIVITY_WEEKS: u32 = 8;

/// How far back `since` may reach, in days: a year, leap day included.
pub const MAX_SINCE_DAYS: i64 = 366;

const DAY_MS: i64 = 86_400_000;

/// Whose activity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "scope", rename_all = "snake_case")]
pub enum ActivityScope {
    /// One channel the caller can read.
    Channel { channel: ChannelName },
    /// Every channel the caller can read, counted together.
    AllChannels,
    /// The commands of one of her sessions with her own agents (SPEC §4b).
    Session {
        session: crate::domain::personal::SessionId,
    },
}

/// What to compute: a scope, how many weekly rows, and since when the totals count.
#[derive(Debug, Clone)]
pub struct ActivityRequest {
    pub scope: ActivityScope,
    /// 1–26 weekly rows, the current week last. Default: the weeks from `since`'s through the
    /// current one (at most 26), else 8.
    pub weeks: Option<u32>,
    /// Where the totals start: a date `YYYY-MM-DD` (00:00 UTC) or an RFC 3339 time, at most
    /// [`MAX_SINCE_DAYS`] back and not in the future. Default: the start of the first row.
    pub since: Option<String>,
}

/// The figures of a stretch of time.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ActivityFigures {
    pub opened: i64,
    /// Of the threads opened: answered by someone other than their opener.
    pub answered: i64,
    /// Of the threads opened: closed.
    pub closed: i64,
    /// Time to the first reply of the threads opened, in seconds (none: no thread answered).
    pub first_reply_p50_s: Option<i64>,
    pub first_reply_p90_s: Option<i64>,
    /// Approvals settled: allowed (approved, then perhaps consumed), rejected, expired.
    pub allowed: i64,
    pub rejected: i64,
    pub expired: i64,
    /// Requests (not messages to a remote agent) a human rejected.
    pub refused_requests: i64,
    /// External tasks that ended, by final state.
    pub tasks: BTreeMap<String, i64>,
}

/// One week of activity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WeekActivity {
    /// Monday 00:00 UTC.
    pub start: Timestamp,
    #[serde(flatten)]
    pub figures: ActivityFigures,
}

/// The activity of a scope: the channels counted, the weekly rows (oldest first; the last is the
/// current week, so far) and the totals from `since` until now.
#[derive(Debug, Clone, Serialize)]
pub struct Activity {
    #[serde(flatten)]
    pub scope: ActivityScope,
    pub channels: Vec<ChannelName>,
    pub since: Timestamp,
    pub until: Timestamp,
    pub totals: ActivityFigures,
    pub weeks: Vec<WeekActivity>,
}

/// Monday 00:00 UTC of the week holding `t` (1970-01-01 was a Thursday).
pub fn week_start(t: Timestamp) -> Timestamp {
    let day = t.0.div_euclid(DAY_MS);
    let weekday = (day + 3).rem_euclid(7);
    Timestamp((day - weekday) * DAY_MS)
}

/// The nearest-rank percentile `q` (0–1) of sorted `values`.
fn percentile(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// `since` as a time: a date (its 00:00 UTC) or an RFC 3339 time, within [`MAX_SINCE_DAYS`]
/// before `now` and not after it.
fn parse_since(text: &str, now: Timestamp) -> Result<Timestamp> {
    let text = text.trim();
    let quoted = crate::domain::text::quote(text);
    let at = if let Ok(day) = chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        day.and_time(chrono::NaiveTime::MIN)
            .and_utc()
            .timestamp_millis()
    } else if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        t.timestamp_millis()
    } else {
        return Err(ServiceError::invalid(format!(
            "since {quoted} is neither a date (YYYY-MM-DD, UTC) nor an RFC 3339 time (e.g. \
             2026-11-12 or 2026-11-12T09:00:00Z)"
        )));
    };
    if at > now.0 {
        return Err(ServiceError::invalid(format!(
            "since {quoted} is in the future (it is {now} now)"
        )));
    }
    if at < now.0 - MAX_SINCE_DAYS * DAY_MS {
        return Err(ServiceError::invalid(format!(
            "since {quoted} is more than {MAX_SINCE_DAYS} days ago: the totals reach back at \
             most {MAX_SINCE_DAYS} days"
        )));
    }
    Ok(Timestamp(at))
}

impl Service {
    /// The activity of `req.scope` as the caller may see it: weekly rows and totals since a date.
    pub async fn activity(&self, caller: &Caller, req: ActivityRequest) -> Result<Activity> {
        caller.require_participant()?;
        let now = self.now();
        let since = req
            .since
            .as_deref()
            .map(|t| parse_since(t, now))
            .transpose()?;
        let this_week = week_start(now);
        let weeks = match (req.weeks, since) {
            (Some(w), _) if !(1..=MAX_ACTIVITY_WEEKS).contains(&w) => {
                return Err(ServiceError::invalid(format!(
                    "weeks {w} is out of range: use 1-{MAX_ACTIVITY_WEEKS}"
                )));
            }
            (Some(w), _) => w,
            (None, Some(since)) => {
                let back = (this_week.0 - week_start(since).0) / WEEK_MS + 1;
                u32::try_from(back).map_or(MAX_ACTIVITY_WEEKS, |b| b.min(MAX_ACTIVITY_WEEKS))
            }
            (None, None) => DEFAULT_ACTIVITY_WEEKS,
        };
        let channels = self.scope_channels(caller, &req.scope).await?;
        let threads = match &req.scope {
            ActivityScope::Session { session } => {
                Some(self.session_threads(caller, session).await?)
            }
            _ => None,
        };
        let filter = ActivityFilter {
            channels: &channels,
            threads: threads.as_deref(),
        };
        let to = Timestamp(this_week.0 + WEEK_MS);
        let from = Timestamp(to.0 - i64::from(weeks) * WEEK_MS);
        let weekly = Window {
            from,
            to,
            step: WEEK_MS,
        };
        let since = since.unwrap_or(from);
        let total = Window {
            from: since,
            to,
            step: to.0 - since.0,
        };
        let weeks = self
            .figures(filter, weekly)
            .await?
            .into_iter()
            .enumerate()
            .map(|(i, figures)| WeekActivity {
                start: Timestamp(from.0 + i as i64 * WEEK_MS),
                figures,
            })
            .collect();
        let totals = self.figures(filter, total).await?.pop().unwrap_or_default();
        Ok(Activity {
            scope: req.scope,
            channels,
            since,
            until: now,
            totals,
            weeks,
        })
    }

    /// The channels a scope counts, those the caller can read; a channel she cannot read is
    /// unknown.
    async fn scope_channels(
        &self,
        caller: &Caller,
        scope: &ActivityScope,
    ) -> Result<Vec<ChannelName>> {
        match scope {
            ActivityScope::Channel { channel } => {
                self.visible_channel(caller, channel).await?;
                Ok(vec![channel.clone()])
            }
            ActivityScope::Session { .. } => Ok(vec![ChannelName::personal(caller.id())]),
            ActivityScope::AllChannels => {
                let mut readable = Vec::new();
                // Membership alone is not enough: the read right is `visible_channel`'s rule.
                for c in self.channels(caller).await? {
                    match self.visible_channel(caller, &c.name).await {
                        Ok(_) => readable.push(c.name),
                        Err(e) if e.code == ErrorCode::NotFound => {}
                        Err(e) => return Err(e),
                    }
                }
                Ok(readable)
            }
        }
    }

    /// The figures of each bucket of `window` over the threads `filter` selects: the one set of
    /// rules the weekly rows and the totals share.
    async fn figures(
        &self,
        filter: ActivityFilter<'_>,
        window: Window,
    ) -> Result<Vec<ActivityFigures>> {
        let span = window.to.0 - window.from.0;
        let n = usize::try_from((span + window.step - 1) / window.step).unwrap_or(0);
        let mut out = vec![ActivityFigures::default(); n];
        let bucket = |b: i64| usize::try_from(b).ok().filter(|i| *i < n);
        let of = |t: Timestamp| bucket((t.0 - window.from.0) / window.step);

        let store = &self.inner.store;
        let mut replies: Vec<Vec<i64>> = vec![Vec::new(); n];
        for t in store.opened_threads(filter, window).await? {
            let Some(i) = of(t.opened_at) else { continue };
            let f = &mut out[i];
            f.opened += 1;
            f.closed += i64::from(t.closed);
            if let Some(r) = t.first_reply_at {
                f.answered += 1;
                replies[i].push((r.0 - t.opened_at.0) / 1000);
            }
        }
        for (f, mut r) in out.iter_mut().zip(replies) {
            r.sort_unstable();
            f.first_reply_p50_s = percentile(&r, 0.5);
            f.first_reply_p90_s = percentile(&r, 0.9);
        }
        for c in store.settled_approvals(filter, window).await? {
            let Some(f) = bucket(c.week).and_then(|i| out.get_mut(i)) else {
                continue;
            };
            let (state, kind) = c.key.split_once(':').unwrap_or((c.key.as_str(), ""));
            match state {
                "approved" | "consumed" => f.allowed += c.n,
                "rejected" => {
                    f.rejected += c.n;
                    if kind == "request" {
                        f.refused_requests += c.n;
                    }
                }
                "expired" => f.expired += c.n,
                _ => {}
            }
        }
        for c in store.ended_tasks(filter, window).await? {
            if let Some(f) = bucket(c.week).and_then(|i| out.get_mut(i)) {
                *f.tasks.entry(c.key).or_default() += c.n;
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weeks_start_on_monday_utc() {
        // 2026-12-02 (a Wednesday) 13:00 UTC → Monday 2026-11-30 00:00 UTC.
        assert_eq!(
            week_start(Timestamp(1_796_216_400_000)),
            Timestamp(1_795_996_800_000)
        );
        // The Monday itself, at midnight and a millisecond before it.
        assert_eq!(
            week_start(Timestamp(1_795_996_800_000)),
            Timestamp(1_795_996_800_000)
        );
        assert_eq!(
            week_start(Timestamp(1_795_996_799_999)),
            Timestamp(1_795_996_800_000 - WEEK_MS)
        );
        // Before 1970 too.
        assert_eq!(week_start(Timestamp(-1)), Timestamp(-3 * 86_400_000));
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        assert_eq!(percentile(&[], 0.5), None);
        assert_eq!(percentile(&[7], 0.9), Some(7));
        let v = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10];
        assert_eq!(percentile(&v, 0.5), Some(5));
        assert_eq!(percentile(&v, 0.9), Some(9));
        assert_eq!(percentile(&[60, 600], 0.5), Some(60));
        assert_eq!(percentile(&[60, 600], 0.9), Some(600));
    }

    #[test]
    fn since_is_a_utc_date_or_an_rfc3339_time_within_a_year_back() {
        // 2026-12-02T13:00:00Z.
        let now = Timestamp(1_796_216_400_000);
        let midnight = Timestamp(1_796_169_600_000);
        assert_eq!(parse_since("2026-12-02", now).unwrap(), midnight);
        assert_eq!(parse_since(" 2026-12-02 ", now).unwrap(), midnight);
        assert_eq!(
            parse_since("2026-12-02T10:00:00+01:00", now).unwrap(),
            Timestamp(midnight.0 + 9 * 3_600_000)
        );
        assert_eq!(parse_since("2026-12-02T13:00:00Z", now).unwrap(), now);
        // Exactly 366 days back is the edge, one millisecond more is refused.
        let edge = Timestamp(now.0 - MAX_SINCE_DAYS * DAY_MS);
        assert_eq!(parse_since(&edge.to_rfc3339(), now).unwrap(), edge);
        for bad in [
            "",
            "yesterday",
            "2026-13-01",
            "2026-02-30",
            "12/11/2026",
            "2026-11-12 09:00",
            "2026-12-02T13:00:00.001Z",
            "2025-12-01",
            &Timestamp(edge.0 - 1).to_rfc3339(),
        ] {
            let e = parse_since(bad, now).unwrap_err();
            assert_eq!(e.code, ErrorCode::InvalidInput, "{bad}");
            assert!(e.message.contains("since"), "{bad}: {}", e.message);
        }
    }
}
