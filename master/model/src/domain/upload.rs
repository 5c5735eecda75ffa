//! Upload sessions as values: the state a session is in.

use std::fmt;

/// Where an upload session stands: receiving chunks, or claimed by one request that is
/// finishing it into a file or aborting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UploadStatus {
    Uploading,
    Finishing,
    Aborting,
}

impl UploadStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            UploadStatus::Uploading => "uploading",
            UploadStatus::Finishing => "finishing",
            UploadStatus::Aborting => "aborting",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "uploading" => Some(UploadStatus::Uploading),
            "finishing" => Some(UploadStatus::Finishing),
            "aborting" => Some(UploadStatus::Aborting),
            _ => None,
        }
    }
}

impl fmt::Display for UploadStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_through_text() {
        for status in [UploadStatus::Uploading, UploadStatus::Finishing, UploadStatus::Aborting] {
            assert_eq!(UploadStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(UploadStatus::parse("done"), None);
    }
}
