//! The one typed configuration of a storage node: documented defaults, then the TOML file named
//! by `NUBO_CONFIG`, then `NUBO_*` environment variables, then command-line flags. Nothing else
//! in the node reads the environment.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use nubo_common::config::{Layered, LoadError, given};
use nubo_common::secret::Secret;
use nubo_protocol::key::{MIN_KEY_LEN, NodeKey};
use nubo_protocol::signing::valid_node_id;
use serde::{Deserialize, Serialize};

/// Every setting of a node. Field names are the TOML keys; the environment variable is the name
/// upper-cased with the `NUBO_` prefix (`data_dir` -> `NUBO_DATA_DIR`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address and port to listen on.
    pub listen: SocketAddr,
    /// Where the node keeps its state: blobs under `blobs/`, upload sessions under `sessions/`.
    pub data_dir: PathBuf,
    /// Base URL of the master, where the node reports finished uploads and fetches.
    pub master_url: Option<String>,
    /// This node's id as the master knows it; credentials and signatures name it.
    pub node_id: Option<String>,
    /// The key shared with the master; required.
    pub node_key: Option<Secret>,
    /// A file holding the node key (used when `node_key` is unset).
    pub node_key_file: Option<PathBuf>,
    /// How far a signed request's timestamp may be from this node's clock, in seconds.
    pub max_skew_seconds: u64,
    /// How long the request carrying an upload's last chunk waits for the master's answer
    /// before it answers 202 (the report then goes on in the background), in seconds.
    pub report_wait_seconds: u64,
    /// Longest wait between two attempts of a report the master has not acknowledged, in seconds.
    pub report_retry_max_seconds: u64,
    /// Lets external downloads reach private, loopback, link-local and other non-public
    /// addresses. Off by default (SSRF guard); turn on only for trusted users on a closed network.
    pub fetch_allow_private_addresses: bool,
    /// Longest an external download may take as a whole, in seconds (the master may ask for less).
    pub fetch_timeout_seconds: u64,
    /// A tracing filter, e.g. `info` or `info,nubo_slave=debug`.
    pub log_level: String,
    /// Seconds a client has to send a request's headers (also the keep-alive wait). 0: no limit.
    pub header_read_timeout_seconds: u64,
    /// Seconds a chunk or blob body may deliver no byte before the request answers 408. 0: no limit.
    pub body_timeout_seconds: u64,
    /// Seconds a connection may move nothing while no request is worked on. 0: no limit.
    pub idle_timeout_seconds: u64,
    /// Connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// The bearer token `GET /metrics` asks for. Unset or empty: no metrics are kept and the
    /// route answers 404.
    pub metrics_token: Option<Secret>,
    /// A file holding the metrics token (used when `metrics_token` is unset).
    pub metrics_token_file: Option<PathBuf>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 5213)),
            data_dir: PathBuf::from("./slave-data"),
            master_url: None,
            node_id: None,
            node_key: None,
            node_key_file: None,
            max_skew_seconds: 60,
            report_wait_seconds: 15,
            report_retry_max_seconds: 60,
            fetch_allow_private_addresses: false,
            fetch_timeout_seconds: 3600,
            log_level: "info".to_owned(),
            header_read_timeout_seconds: 30,
            body_timeout_seconds: 60,
            idle_timeout_seconds: 120,
            max_connections: 1024,
            metrics_token: None,
            metrics_token_file: None,
        }
    }
}

/// Settings given on the command line; `None` leaves the lower layers in charge.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CliOverrides {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<SocketAddr>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file or environment did not make a valid configuration, or a secret file is unreadable.
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(
        "NUBO_NODE_KEY is not set: the node needs the key it shares with the master, at least {MIN_KEY_LEN} bytes \
         (set NUBO_NODE_KEY, NUBO_NODE_KEY_FILE or `node_key` in the config file)."
    )]
    MissingKey,
    #[error("NUBO_NODE_KEY is too short ({0} bytes): use at least {MIN_KEY_LEN} bytes, the same as on the master.")]
    ShortKey(usize),
    #[error("NUBO_NODE_ID is not set: the node needs the id the master knows it by.")]
    MissingNodeId,
    #[error("NUBO_NODE_ID {0:?} is invalid: use 1 to 64 of A-Z a-z 0-9 . _ -")]
    InvalidNodeId(String),
}

impl Layered for Config {
    /// Every setting; other `NUBO_` variables (the config path itself) are not settings.
    const ENV_KEYS: &'static [&'static str] = &[
        "listen",
        "data_dir",
        "master_url",
        "node_id",
        "node_key",
        "node_key_file",
        "max_skew_seconds",
        "report_wait_seconds",
        "report_retry_max_seconds",
        "fetch_allow_private_addresses",
        "fetch_timeout_seconds",
        "log_level",
        "header_read_timeout_seconds",
        "body_timeout_seconds",
        "idle_timeout_seconds",
        "max_connections",
        "metrics_token",
        "metrics_token_file",
    ];

    fn secret_files(&mut self) -> Vec<(&mut Option<Secret>, Option<&Path>)> {
        vec![
            (&mut self.node_key, self.node_key_file.as_deref()),
            (&mut self.metrics_token, self.metrics_token_file.as_deref()),
        ]
    }
}

impl Config {
    /// Layers defaults, the TOML file (if any), `NUBO_*` variables and CLI flags, then resolves
    /// `node_key_file`. Does not demand the key: see [`Config::node_key`].
    pub fn load(file: Option<&Path>, cli: &CliOverrides) -> Result<Self, ConfigError> {
        Ok(nubo_common::config::load(file, cli)?)
    }

    /// The token `GET /metrics` asks for; `None` when metrics are off.
    pub fn metrics_token(&self) -> Option<&Secret> {
        given(&self.metrics_token)
    }

    /// The node key, refused when missing or shorter than [`MIN_KEY_LEN`].
    pub fn node_key(&self) -> Result<NodeKey, ConfigError> {
        let secret = given(&self.node_key).ok_or(ConfigError::MissingKey)?;
        NodeKey::new(secret).map_err(|weak| ConfigError::ShortKey(weak.0))
    }

    /// The node id, refused when missing or not a valid id.
    pub fn node_id(&self) -> Result<&str, ConfigError> {
        match self.node_id.as_deref() {
            None | Some("") => Err(ConfigError::MissingNodeId),
            Some(id) if !valid_node_id(id) => Err(ConfigError::InvalidNodeId(id.to_owned())),
            Some(id) => Ok(id),
        }
    }

    pub fn blobs_dir(&self) -> PathBuf {
        self.data_dir.join("blobs")
    }

    pub fn sessions_dir(&self) -> PathBuf {
        self.data_dir.join("sessions")
    }
}

#[cfg(test)]
// figment's `Jail` closures return its own large error type.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;
    use figment::Jail;

    #[test]
    fn defaults_listen_on_5213_and_keep_data_in_slave_data() {
        Jail::expect_with(|_jail| {
            let config = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(config.listen.to_string(), "127.0.0.1:5213");
            assert_eq!(config.blobs_dir(), PathBuf::from("./slave-data/blobs"));
            assert_eq!(config.max_skew_seconds, 60);
            assert!(matches!(config.node_key(), Err(ConfigError::MissingKey)));
            Ok(())
        });
    }

    #[test]
    fn file_then_env_then_cli_take_precedence_in_that_order() {
        Jail::expect_with(|jail| {
            jail.create_file("slave.toml", "listen = \"127.0.0.1:7000\"\ndata_dir = \"/file\"\nnode_id = \"file\"")?;
            jail.set_env("NUBO_DATA_DIR", "/env");
            jail.set_env("NUBO_NODE_ID", "env");
            let cli = CliOverrides { data_dir: Some("/cli".into()), ..CliOverrides::default() };
            let config = Config::load(Some(Path::new("slave.toml")), &cli).unwrap();
            assert_eq!(config.listen.port(), 7000, "file beats default");
            assert_eq!(config.node_id().unwrap(), "env", "env beats file");
            assert_eq!(config.data_dir, PathBuf::from("/cli"), "cli beats env");
            Ok(())
        });
    }

    #[test]
    fn key_file_is_read_and_short_keys_are_refused() {
        Jail::expect_with(|jail| {
            jail.create_file("key.txt", &format!("{}\n", "k".repeat(40)))?;
            jail.set_env("NUBO_NODE_KEY_FILE", "key.txt");
            assert!(Config::load(None, &CliOverrides::default()).unwrap().node_key().is_ok());
            jail.set_env("NUBO_NODE_KEY", "short");
            let config = Config::load(None, &CliOverrides::default()).unwrap();
            assert!(matches!(config.node_key(), Err(ConfigError::ShortKey(5))));
            Ok(())
        });
    }

    #[test]
    fn metrics_are_off_unless_a_token_is_set() {
        Jail::expect_with(|jail| {
            assert!(Config::load(None, &CliOverrides::default()).unwrap().metrics_token().is_none());
            jail.create_file("metrics-token", "node-scrape-token\n")?;
            jail.set_env("NUBO_METRICS_TOKEN_FILE", "metrics-token");
            let config = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(config.metrics_token().map(|t| t.expose()), Some("node-scrape-token"));
            Ok(())
        });
    }

    #[test]
    fn invalid_node_ids_are_refused() {
        let config = Config { node_id: Some("no spaces".into()), ..Config::default() };
        assert!(matches!(config.node_id(), Err(ConfigError::InvalidNodeId(_))));
    }
}
