//! Time as the database keeps it (milliseconds since the Unix epoch) and as the API shows it
//! (RFC 3339 UTC).

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Milliseconds since the Unix epoch, the unit of every time column.
pub type Millis = i64;

pub fn now_ms() -> Millis {
    let now = OffsetDateTime::now_utc();
    (now.unix_timestamp_nanos() / 1_000_000) as Millis
}

/// Formats a stored time for the API, e.g. `2026-11-22T04:35:00.123Z`.
pub fn to_rfc3339(ms: Millis) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_default()
}

/// A time the API was given in RFC 3339 (any offset), as stored; `None` when it does not parse.
pub fn from_rfc3339(text: &str) -> Option<Millis> {
    let parsed = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    Millis::try_from(parsed.unix_timestamp_nanos() / 1_000_000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_it_formats_and_other_offsets() {
        assert_eq!(from_rfc3339("2026-11-18T11:06:40.123Z"), Some(1_795_000_000_123));
        assert_eq!(from_rfc3339("2026-11-18T12:06:40.123+01:00"), Some(1_795_000_000_123));
        assert_eq!(from_rfc3339("tomorrow"), None);
    }

    #[test]
    fn formats_epoch_millis_as_rfc3339_utc() {
        assert_eq!(to_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(to_rfc3339(1_795_000_000_123), "2026-11-18T11:06:40.123Z");
    }

    #[test]
    fn now_is_after_2025() {
        assert!(now_ms() > 1_735_689_600_000);
    }
}
