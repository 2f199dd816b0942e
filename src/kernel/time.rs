//! Time: UTC timestamps with millisecond precision and durations like `1h30m`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A UTC instant, in milliseconds since the Unix epoch; written as RFC 3339.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Ts(pub i64);

/// A length of time in milliseconds; written `90s`, `30m`, `2h`, `1d` or combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(pub i64);

impl Ts {
    /// The current time from the system clock.
    pub fn now() -> Ts {
        Ts(jiff::Timestamp::now().as_millisecond())
    }

    /// This instant plus a duration (saturating).
    #[allow(clippy::should_implement_trait)]
    pub fn add(self, d: Dur) -> Ts {
        Ts(self.0.saturating_add(d.0))
    }

    /// This instant minus a duration (saturating).
    #[allow(clippy::should_implement_trait)]
    pub fn sub(self, d: Dur) -> Ts {
        Ts(self.0.saturating_sub(d.0))
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
        Ok(Ts(t.as_millisecond()))
    }
}

impl Serialize for Ts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
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

    /// Length in whole seconds, rounded up.
    pub fn secs_ceil(self) -> i64 {
        (self.0 + 999).div_euclid(1000)
    }

    /// True for a zero or negative length.
    pub fn is_zero(self) -> bool {
        self.0 <= 0
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 < 0 {
            return write!(f, "-{}", Dur(-self.0));
        }
        let mut s = self.0 / 1000;
        if s == 0 {
            return f.write_str("0s");
        }
        let mut out = String::new();
        // Days only from two days on: a window reads better as 24h than 1d.
        for (unit, len) in [("d", 86_400), ("h", 3600), ("m", 60), ("s", 1)] {
            if s >= len && (unit != "d" || s >= 2 * 86_400) {
                out.push_str(&format!("{}{unit}", s / len));
                s %= len;
            }
        }
        f.write_str(&out)
    }
}

impl FromStr for Dur {
    type Err = String;
    fn from_str(input: &str) -> Result<Dur, String> {
        let bad =
            || format!("`{input}` is not a duration; write it like 90s, 30m, 2h, 1d or 1h30m");
        let s = input.trim();
        if s.is_empty() {
            return Err(bad());
        }
        if s.starts_with(['P', 'p']) {
            let span: jiff::SignedDuration = s.parse().map_err(|_| bad())?;
            return Ok(Dur(span.as_millis() as i64));
        }
        let mut total: i64 = 0;
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
                _ => return Err(bad()),
            };
            if num.is_empty() || (last_rank != usize::MAX && rank <= last_rank) {
                return Err(bad());
            }
            last_rank = rank;
            let n: i64 = num.parse().map_err(|_| bad())?;
            total = n
                .checked_mul(len)
                .and_then(|v| total.checked_add(v))
                .ok_or_else(bad)?;
            num.clear();
        }
        if !num.is_empty() {
            return Err(bad());
        }
        Ok(Dur(total))
    }
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
}
