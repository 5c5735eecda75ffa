//! Storage nodes as values: the health a node was last seen in.

/// What the last health check of a node found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeStatus {
    /// Not checked since it was registered.
    Unknown,
    /// Answered the last check.
    Online,
    /// Did not answer, or refused, the last check.
    Offline,
}

impl NodeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Unknown => "unknown",
            NodeStatus::Online => "online",
            NodeStatus::Offline => "offline",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "unknown" => Some(NodeStatus::Unknown),
            "online" => Some(NodeStatus::Online),
            "offline" => Some(NodeStatus::Offline),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trips_through_text() {
        for status in [NodeStatus::Unknown, NodeStatus::Online, NodeStatus::Offline] {
            assert_eq!(NodeStatus::parse(status.as_str()), Some(status));
        }
        assert_eq!(NodeStatus::parse("Online"), None);
    }
}
