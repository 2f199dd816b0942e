//! Words and times for people: a card's note, countdowns and ages, relative or as clock times.

use super::Scene;
use crate::board::derive::Why;
use crate::kernel::{Priority, Ts};

/// A title may start with a priority (`P1 fix the build`).
pub fn split_priority(text: &str) -> (Priority, String) {
    if let Some((head, rest)) = text.split_once(' ')
        && head.len() == 2
        && head.starts_with(['P', 'p'])
        && let Ok(p) = head.parse::<Priority>()
        && !rest.trim().is_empty()
    {
        return (p, rest.trim().to_string());
    }
    (Priority::P2, text.to_string())
}

/// The note of a card for people, against the clock (relative times).
pub fn why_text(why: &Why, now: Ts) -> String {
    why_text_at(why, now, false)
}

/// The note of a card for people: relative times, or clock times (UTC) when `absolute`.
pub fn why_text_at(why: &Why, now: Ts, absolute: bool) -> String {
    match why {
        Why::None => String::new(),
        Why::Lease {
            holder,
            fence,
            expires_at,
        } => {
            let left = expires_at.since(now);
            match (left.0 <= 0, absolute) {
                (true, false) => format!("{holder} #{fence} EXPIRED {}", countdown(-left.0)),
                (true, true) => format!("{holder} #{fence} EXPIRED at {}", hhmm(*expires_at)),
                (false, false) => format!("{holder} #{fence} {}", countdown(left.0)),
                (false, true) => format!("{holder} #{fence} until {}", hhmm(*expires_at)),
            }
        }
        Why::Gate(g) => format!("on gate {g}"),
        Why::Dep(d, Some(s)) => format!("on {d} ({})", s.as_str()),
        Why::Dep(d, None) => format!("on {d} (missing)"),
        Why::Due(at) if absolute => format!("due at {}", hhmm(*at)),
        Why::Due(at) => format!("due in {}", countdown(at.since(now).0.max(0))),
        Why::Owner => "user todo: owner".into(),
        Why::Stopped(s, r) => match r {
            Some(r) => format!("{}: {r}", s.as_str()),
            None => s.as_str().to_string(),
        },
        Why::Finished(s, by, at, check) => {
            let when = match absolute {
                true => format!("at {}", hhmm(*at)),
                false => format!("{} ago", ago(now.since(*at).0)),
            };
            // A done's tier says first how it was proven: `✓ checked`, `self-reported`.
            let word = check.as_deref().unwrap_or(s.as_str());
            format!("{word} by {by} {when}")
        }
    }
}

/// `12:03` (minutes:seconds) or `2h05m` for a countdown in milliseconds.
pub fn countdown(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

/// `5s`, `3m`, `2h`, `4d` for a time in the past, in milliseconds.
pub fn ago(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// `HH:MM`, the UTC clock time of an instant.
pub fn hhmm(t: Ts) -> String {
    let s = t.to_string();
    s.get(11..16).unwrap_or("--:--").to_string()
}

impl Scene<'_> {
    /// How long ago `at` was (`3m`), or its clock time (`11:57`) with absolute times on.
    pub fn ago(&self, at: Ts) -> String {
        if self.absolute {
            hhmm(at)
        } else {
            ago(self.now.since(at).0)
        }
    }

    /// The time left until `at` (`12:34`), or its clock time (`@12:12`) with absolute times on.
    pub fn left(&self, at: Ts) -> String {
        if self.absolute {
            format!("@{}", hhmm(at))
        } else {
            countdown(at.since(self.now).0)
        }
    }

    /// The time since `at` as a countdown (`2:00`), or its clock time (`@11:58`).
    pub fn over(&self, at: Ts) -> String {
        if self.absolute {
            format!("@{}", hhmm(at))
        } else {
            countdown(self.now.since(at).0)
        }
    }

    /// The note of a card, with this view's times.
    pub fn why(&self, why: &Why) -> String {
        why_text_at(why, self.now, self.absolute)
    }
}
