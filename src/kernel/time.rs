//! Time: UTC timestamps with millisecond precision and durations like `1h30m`, both bounded.
//!
//! Every `Ts` loopx reads, writes or computes lies in `Ts::MIN..=Ts::MAX` (1970-01-01 to
//! 9000-01-01), and every duration it parses in `0..=Dur::MAX` (36500 days), so no sum of a time
//! and a duration can overflow or leave what RFC 3339 can print.

use std::fmt;
use std::str::FromStr;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A UTC instant, in milliseconds since the Unix epoch; written as RFC 3339.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ts(pub i64);

/// A length of time in milliseconds; written `90s`, `30m`, `2h`, `1d` or combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(pub i64);

/// The range of times, as people read it (for messages).
pub const TS_RANGE_TEXT: &str = "1970-01-01T00:00:00Z to 9000-01-01T00:00:00Z";

impl Ts {
    /// The earliest time loopx keeps: 1970-01-01T00:00:00.000Z.
    pub const MIN: Ts = Ts(0);
    /// The latest time loopx keeps: 9000-01-01T00:00:00.000Z.
    pub const MAX: Ts = Ts(221_845_392_000_000);

    /// The current time from the system clock, clamped to `MIN..=MAX` (see `checked_now`).
    pub fn now() -> Ts {
        let now = SystemTime::now();
        let edge = if now < UNIX_EPOCH { Ts::MIN } else { Ts::MAX };
        Ts::from_system(now).unwrap_or(edge)
    }

    /// The current time from the system clock; an error when the clock is outside `MIN..=MAX`.
    pub fn checked_now() -> Result<Ts, String> {
        Ts::from_system(SystemTime::now())
    }

    /// A system time as a `Ts`; an error when it is outside `MIN..=MAX`.
    pub fn from_system(t: SystemTime) -> Result<Ts, String> {
        let bad = || {
            format!(
                "the system clock is outside the times loopx keeps ({TS_RANGE_TEXT}); set the clock right"
            )
        };
        let ms = t.duration_since(UNIX_EPOCH).map_err(|_| bad())?.as_millis();
        i64::try_from(ms)
            .ok()
            .map(Ts)
            .filter(|t| t.in_range())
            .ok_or_else(bad)
    }

    /// True when the time lies in `MIN..=MAX`.
    pub fn in_range(self) -> bool {
        (Ts::MIN..=Ts::MAX).contains(&self)
    }

    /// This instant plus a duration, clamped to `MIN..=MAX`.
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, d: Dur) -> Ts {
        Ts(self.0.saturating_add(d.0).clamp(Ts::MIN.0, Ts::MAX.0))
    }

    /// This instant minus a duration, clamped to `MIN..=MAX`.
    #[allow(clippy::should_implement_trait)]
    pub fn sub(self, d: Dur) -> Ts {
        Ts(self.0.saturating_sub(d.0).clamp(Ts::MIN.0, Ts::MAX.0))
    }

    /// This instant plus a duration; `None` when the sum is outside `MIN..=MAX`.
    pub fn checked_add(self, d: Dur) -> Option<Ts> {
        self.0.checked_add(d.0).map(Ts).filter(|t| t.in_range())
    }

    /// The time from `earlier` to this instant (negative if `earlier` is later).
    pub fn since(self, earlier: Ts) -> Dur {
        Dur(self.0.saturating_sub(earlier.0))
    }
}

impl fmt::Display for Ts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match jiff::Timestamp::from_millisecond(self.0) {
            Ok(t) => write!(f, "{}", t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ")),
            Err(_) => write!(f, "invalid-time({})", self.0),
        }
    }
}

impl FromStr for Ts {
    type Err = String;
    fn from_str(s: &str) -> Result<Ts, String> {
        let t: jiff::Timestamp = s
            .parse()
            .map_err(|e| format!("`{s}` is not an RFC 3339 time ({e})"))?;
        let t = Ts(t.as_millisecond());
        if !t.in_range() {
            return Err(format!(
                "`{s}` is outside the times loopx keeps ({TS_RANGE_TEXT})"
            ));
        }
        Ok(t)
    }
}

impl Serialize for Ts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if !self.in_range() {
            return Err(serde::ser::Error::custom(format!(
                "time {} ms is outside the times loopx keeps ({TS_RANGE_TEXT})",
                self.0
            )));
        }
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Ts {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Ts, D::Error> {
        // TOML datetimes arrive as their own type; strings as strings. Accept both.
        let v = toml::Value::deserialize(d)?;
        let s = match v {
            toml::Value::String(s) => s,
            toml::Value::Datetime(dt) => dt.to_string(),
            other => {
                return Err(serde::de::Error::custom(format!(
                    "expected an RFC 3339 time string, found {}",
                    other.type_str()
                )));
            }
        };
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Dur {
    /// The longest duration loopx parses: 36500 days (about 100 years).
    pub const MAX: Dur = Dur(36_500 * 86_400_000);

    /// Whole seconds.
    pub fn from_secs(s: i64) -> Dur {
        Dur(s.saturating_mul(1000))
    }

    /// Whole minutes.
    pub fn from_mins(m: i64) -> Dur {
        Dur::from_secs(m.saturating_mul(60))
    }

    /// Whole hours.
    pub fn from_hours(h: i64) -> Dur {
        Dur::from_secs(h.saturating_mul(3600))
    }

    /// Whole days.
    pub fn from_days(d: i64) -> Dur {
        Dur::from_hours(d.saturating_mul(24))
    }

    /// Length in whole seconds, rounded up.
    pub fn secs_ceil(self) -> i64 {
        self.0.div_euclid(1000) + i64::from(self.0.rem_euclid(1000) != 0)
    }

    /// True for a zero or negative length.
    pub fn is_zero(self) -> bool {
        self.0 <= 0
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 0 {
            f.write_str("-")?;
        }
        let mut s = self.0.unsigned_abs() / 1000;
        if s == 0 {
            return f.write_str("0s");
        }
        // Days only from two days on: a window reads better as 24h than 1d.
        for (unit, len) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
            if s >= len && (unit != "d" || s >= 2 * 86_400) {
                write!(f, "{}{unit}", s / len)?;
                s %= len;
            }
        }
        Ok(())
    }
}

impl FromStr for Dur {
    type Err = String;
    fn from_str(input: &str) -> Result<Dur, String> {
        let shown: String = input.chars().take(40).collect();
        let bad =
            || format!("`{shown}` is not a duration; write it like 90s, 30m, 2h, 1d or 1h30m");
        let s = input.trim();
        if s.is_empty() || s.len() > 64 {
            return Err(bad());
        }
        let ms: i128 = if s.trim_start_matches(['+', '-']).starts_with(['P', 'p']) {
            let span: jiff::SignedDuration = s.parse().map_err(|_| bad())?;
            span.as_millis()
        } else {
            parse_units(s).ok_or_else(bad)?
        };
        if !(0..=i128::from(Dur::MAX.0)).contains(&ms) {
            return Err(format!(
                "`{shown}` is out of range: a duration is 0s to {}",
                Dur::MAX
            ));
        }
        Ok(Dur(ms as i64))
    }
}

/// `1d2h3m4s` (each unit at most once, largest first) in milliseconds; `None` when malformed.
fn parse_units(s: &str) -> Option<i128> {
    let mut total: i128 = 0;
    let mut num = String::new();
    let mut last_rank = usize::MAX;
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let (rank, len) = match c {
            'd' => (0, 86_400_000),
            'h' => (1, 3_600_000),
            'm' => (2, 60_000),
            's' => (3, 1000),
            _ => return None,
        };
        if num.is_empty() || (last_rank != usize::MAX && rank <= last_rank) {
            return None;
        }
        last_rank = rank;
        // A number of more than 30 digits is out of range anyway: count it as 10^30.
        let n: i128 = if num.len() > 30 {
            10i128.pow(30)
        } else {
            num.parse().ok()?
        };
        total = total.saturating_add(n.saturating_mul(len));
        num.clear();
    }
    num.is_empty().then_some(total)
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print() {
        assert_eq!("90s".parse::<Dur>().unwrap(), Dur::from_secs(90));
        assert_eq!("1h30m".parse::<Dur>().unwrap(), Dur::from_mins(90));
        assert_eq!("1d".parse::<Dur>().unwrap(), Dur::from_hours(24));
        assert_eq!("PT2H".parse::<Dur>().unwrap(), Dur::from_hours(2));
        assert!("30".parse::<Dur>().is_err());
        assert!("m".parse::<Dur>().is_err());
        assert!("30m1h".parse::<Dur>().is_err());
        assert!("1x".parse::<Dur>().is_err());
        assert_eq!(Dur::from_mins(90).to_string(), "1h30m");
        assert_eq!(Dur::from_secs(0).to_string(), "0s");
        assert_eq!(Dur::from_hours(24).to_string(), "24h");
        assert_eq!(Dur::from_hours(50).to_string(), "2d2h");
    }

    #[test]
    fn times_round_trip_with_millis() {
        let t: Ts = "2026-11-30T10:00:00.123Z".parse().unwrap();
        assert_eq!(t.to_string(), "2026-11-30T10:00:00.123Z");
        let u: Ts = "2026-11-30T10:00:00Z".parse().unwrap();
        assert_eq!(u.to_string(), "2026-11-30T10:00:00.000Z");
        assert!("yesterday".parse::<Ts>().is_err());
    }

    #[test]
    fn durations_out_of_range_are_errors_not_wraps() {
        for bad in [
            "PT9223372036854775.808S",
            "PT9223372036854776S",
            "3000000d",
            "36501d",
            "99999999999999999999d",
            "999999999999999999999999999999999999999999d",
            "-PT1S",
            "P99999D",
        ] {
            let e = bad.parse::<Dur>().unwrap_err();
            assert!(
                e.contains("out of range") || e.contains("not a duration"),
                "{bad}: {e}"
            );
        }
        assert_eq!("36500d".parse::<Dur>().unwrap(), Dur::MAX);
        assert_eq!("0s".parse::<Dur>().unwrap(), Dur(0));
        assert!(&"1".repeat(100).parse::<Dur>().is_err());
    }

    #[test]
    fn edge_durations_print_without_recursion() {
        assert_eq!(Dur(i64::MIN).to_string(), "-106751991167d7h12m55s");
        assert_eq!(Dur(i64::MAX).to_string(), "106751991167d7h12m55s");
        assert_eq!(Dur(-1500).to_string(), "-1s");
        assert_eq!(Dur::MAX.to_string(), "36500d");
        assert_eq!(Dur(i64::MAX).secs_ceil(), i64::MAX / 1000 + 1);
        assert_eq!(Dur(i64::MIN).secs_ceil(), i64::MIN / 1000);
        assert_eq!(Dur(1001).secs_ceil(), 2);
        assert_eq!(Dur(-1).secs_ceil(), 0);
    }

    #[test]
    fn times_stay_in_range() {
        assert_eq!(Ts::MAX.to_string(), "9000-01-01T00:00:00.000Z");
        assert_eq!(Ts::MIN.to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(Ts::MAX.add(Dur(i64::MAX)), Ts::MAX);
        assert_eq!(Ts(i64::MAX).add(Dur(1)), Ts::MAX);
        assert_eq!(Ts::MIN.sub(Dur(i64::MAX)), Ts::MIN);
        assert_eq!(Ts(i64::MIN).sub(Dur(i64::MAX)), Ts::MIN);
        assert_eq!(Ts::MAX.checked_add(Dur(1)), None);
        assert_eq!(Ts(5).checked_add(Dur(i64::MAX)), None);
        assert_eq!(Ts(5).checked_add(Dur(5)), Some(Ts(10)));
        assert_eq!(Ts(i64::MIN).since(Ts(i64::MAX)), Dur(i64::MIN));
        for bad in [
            "9000-01-01T00:00:00.001Z",
            "1969-12-31T23:59:59Z",
            "9999-12-31T23:59:59Z",
        ] {
            assert!(bad.parse::<Ts>().is_err(), "{bad}");
        }
        assert_eq!("9000-01-01T00:00:00Z".parse::<Ts>().unwrap(), Ts::MAX);
        assert!(serde_json::to_string(&Ts(i64::MAX)).is_err());
        assert!(serde_json::to_string(&Ts(-1)).is_err());
        assert_eq!(
            serde_json::to_string(&Ts::MAX).unwrap(),
            "\"9000-01-01T00:00:00.000Z\""
        );
    }

    #[test]
    fn a_clock_outside_the_range_is_an_error() {
        use std::time::Duration;
        let far = UNIX_EPOCH + Duration::from_secs(253_402_300_799); // 9999-12-31T23:59:59Z
        assert!(Ts::from_system(far).unwrap_err().contains("system clock"));
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert!(Ts::from_system(before).is_err());
        assert_eq!(Ts::from_system(UNIX_EPOCH).unwrap(), Ts::MIN);
        assert!(Ts::checked_now().is_ok());
    }
}
