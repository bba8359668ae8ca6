//! A channel's activity (SPEC §11, the console's "Activity"): per week, the threads opened and, of
//! those, how many were answered and closed; the time to the first reply (p50, p90, nearest rank);
//! the approvals allowed, rejected and expired, and the requests a human refused; the external
//! tasks by final state.
//!
//! Weeks start on Monday 00:00 UTC. Threads are counted by the week they were opened in (a
//! cohort: "answered" and "closed" say what has become of that week's threads since), approvals by
//! the week they were settled in, tasks by the week they ended. Any member who can read the
//! channel sees its activity; the figures name nobody.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Caller, Result, Service, ServiceError};
use crate::domain::{ChannelName, Timestamp};
use crate::store::WEEK_MS;

/// Most weeks one view spans.
pub const MAX_ACTIVITY_WEEKS: u32 = 26;

/// One week of a channel's activity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WeekActivity {
    /// Monday 00:00 UTC.
    pub start: Timestamp,
    pub opened: i64,
    /// Of the threads opened this week: answered by someone other than their opener.
    pub answered: i64,
    /// Of the threads opened this week: closed.
    pub closed: i64,
    /// Time to the first reply of this week's threads, in seconds (none: no thread answered).
    pub first_reply_p50_s: Option<i64>,
    pub first_reply_p90_s: Option<i64>,
    /// Approvals settled this week: allowed (approved, then perhaps consumed), rejected, expired.
    pub allowed: i64,
    pub rejected: i64,
    pub expired: i64,
    /// Requests (not messages to a remote agent) a human rejected this week.
    pub refused_requests: i64,
    /// External tasks that ended this week, by final state.
    pub tasks: BTreeMap<String, i64>,
}

/// A channel's activity, oldest week first (the last is the current week, so far).
#[derive(Debug, Clone, Serialize)]
pub struct Activity {
    pub channel: ChannelName,
    pub weeks: Vec<WeekActivity>,
}

/// Monday 00:00 UTC of the week holding `t` (1970-01-01 was a Thursday).
pub fn week_start(t: Timestamp) -> Timestamp {
    const DAY: i64 = 86_400_000;
    let day = t.0.div_euclid(DAY);
    let weekday = (day + 3).rem_euclid(7);
    Timestamp((day - weekday) * DAY)
}

/// The nearest-rank percentile `q` (0–1) of sorted `values`.
fn percentile(sorted: &[i64], q: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

impl Service {
    /// The last `weeks` weeks (1–26, default 8) of a channel the caller can read.
    pub async fn activity(
        &self,
        caller: &Caller,
        channel: &ChannelName,
        weeks: Option<u32>,
    ) -> Result<Activity> {
        caller.require_participant()?;
        let weeks = weeks.unwrap_or(8);
        if !(1..=MAX_ACTIVITY_WEEKS).contains(&weeks) {
            return Err(ServiceError::invalid(format!(
                "weeks must be 1-{MAX_ACTIVITY_WEEKS}"
            )));
        }
        self.visible_channel(caller, channel).await?;
        let now = self.now();
        let to = Timestamp(week_start(now).0 + WEEK_MS);
        let from = Timestamp(to.0 - i64::from(weeks) * WEEK_MS);
        let mut out: Vec<WeekActivity> = (0..i64::from(weeks))
            .map(|w| WeekActivity {
                start: Timestamp(from.0 + w * WEEK_MS),
                opened: 0,
                answered: 0,
                closed: 0,
                first_reply_p50_s: None,
                first_reply_p90_s: None,
                allowed: 0,
                rejected: 0,
                expired: 0,
                refused_requests: 0,
                tasks: BTreeMap::new(),
            })
            .collect();
        let week_of = |t: Timestamp| ((t.0 - from.0) / WEEK_MS) as usize;

        let store = &self.inner.store;
        let mut replies: Vec<Vec<i64>> = vec![Vec::new(); out.len()];
        for t in store.opened_threads(channel, from, to).await? {
            let w = &mut out[week_of(t.opened_at)];
            w.opened += 1;
            w.closed += i64::from(t.closed);
            if let Some(r) = t.first_reply_at {
                w.answered += 1;
                replies[week_of(t.opened_at)].push((r.0 - t.opened_at.0) / 1000);
            }
        }
        for (w, mut r) in out.iter_mut().zip(replies) {
            r.sort_unstable();
            w.first_reply_p50_s = percentile(&r, 0.5);
            w.first_reply_p90_s = percentile(&r, 0.9);
        }
        for c in store.settled_approvals(channel, from, to).await? {
            let Some(w) = usize::try_from(c.week).ok().and_then(|i| out.get_mut(i)) else {
                continue;
            };
            let (state, kind) = c.key.split_once(':').unwrap_or((c.key.as_str(), ""));
            match state {
                "approved" | "consumed" => w.allowed += c.n,
                "rejected" => {
                    w.rejected += c.n;
                    if kind == "request" {
                        w.refused_requests += c.n;
                    }
                }
                "expired" => w.expired += c.n,
                _ => {}
            }
        }
        for c in store.ended_tasks(channel, from, to).await? {
            if let Some(w) = usize::try_from(c.week).ok().and_then(|i| out.get_mut(i)) {
                *w.tasks.entry(c.key).or_default() += c.n;
            }
        }
        Ok(Activity {
            channel: channel.clone(),
            weeks: out,
        })
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
}
