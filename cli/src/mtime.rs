//! A file's modification time as signed nanoseconds since the Unix epoch, for the sync state,
//! upload resume records and `get`'s up-to-date check; nothing here touches the server, whose
//! upload API takes no modification time.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Nanoseconds from the epoch to `time`, negative before 1970 (a restored archive, a camera
/// with a flat clock battery), so such a file keeps its own time instead of reading as 0.
/// Saturates beyond the ±292 years an `i64` holds.
pub fn unix_nanos(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_nanos()).map_or(i64::MIN, |n| -n),
    }
}

/// The time `nanos` after (negative: before) the epoch; the inverse of [`unix_nanos`].
pub fn from_unix_nanos(nanos: i64) -> SystemTime {
    let distance = Duration::from_nanos(nanos.unsigned_abs());
    if nanos >= 0 { UNIX_EPOCH + distance } else { UNIX_EPOCH - distance }
}

/// The modification time of `meta` in nanoseconds (0 when the file system keeps none).
pub fn of_metadata(meta: &std::fs::Metadata) -> i64 {
    meta.modified().map_or(0, unix_nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_before_the_epoch_are_negative_and_round_trip() {
        let before = UNIX_EPOCH - Duration::new(86_400 * 365, 250_000_000);
        assert_eq!(unix_nanos(before), -(86_400 * 365 * 1_000_000_000 + 250_000_000));
        assert_eq!(from_unix_nanos(unix_nanos(before)), before);
        let after = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        assert_eq!(from_unix_nanos(unix_nanos(after)), after);
        assert_eq!(unix_nanos(UNIX_EPOCH), 0);
    }

    #[test]
    fn a_file_dated_before_the_epoch_reads_back_its_time() {
        let dir = std::env::temp_dir().join(format!("nubo-mtime-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.txt");
        std::fs::write(&path, b"1969").unwrap();
        let moon_landing = from_unix_nanos(-14_182_940 * 1_000_000_000);
        std::fs::File::options().write(true).open(&path).unwrap().set_modified(moon_landing).unwrap();
        assert_eq!(of_metadata(&std::fs::metadata(&path).unwrap()), -14_182_940 * 1_000_000_000);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
