//! The one typed configuration of the master: documented defaults, then the TOML file named by
//! `NUBO_CONFIG`, then `NUBO_*` environment variables, then command-line flags. Nothing else in
//! the master reads the environment.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use nubo_common::config::{Layered, LoadError, given, load_layered, read_secret_files};
use nubo_common::secret::Secret;
use serde::{Deserialize, Serialize};

/// Shortest signing secret accepted, in bytes: HS256 wants a key at least as long as its output.
pub const MIN_SECRET_LEN: usize = 32;

/// How to write log lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    Text,
    Json,
}

/// Every setting of the master. Field names are the TOML keys; the environment variable is the
/// name upper-cased with the `NUBO_` prefix (`database_url` -> `NUBO_DATABASE_URL`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Address and port to listen on.
    pub listen: SocketAddr,
    /// Where the SQLite file and local-disk blobs live by default.
    pub data_dir: PathBuf,
    /// `sqlite://PATH` or `postgres://...`; unset means `sqlite://<data_dir>/nubo.db`.
    pub database_url: Option<String>,
    /// Largest database pool (PostgreSQL; SQLite readers).
    pub database_max_connections: u32,
    /// `redis://...`; unset means the in-memory stores of a single master.
    pub redis_url: Option<String>,
    /// Prefix of every Redis key, so deployments (or test runs) can share one Redis.
    pub redis_prefix: String,
    /// The JWT signing secret; required by `serve`.
    pub secret: Option<Secret>,
    /// A file holding the signing secret (used when `secret` is unset).
    pub secret_file: Option<PathBuf>,
    /// `text` or `json`.
    pub log_format: LogFormat,
    /// A tracing filter, e.g. `info` or `info,nubo_model=debug`.
    pub log_level: String,
    /// Largest JSON request body in bytes.
    pub max_json_body: usize,
    /// Seconds in-flight requests get to finish after SIGINT/SIGTERM.
    pub shutdown_grace_seconds: u64,
    /// Seconds a client has to send a request's headers (also how long an idle keep-alive
    /// connection waits for its next request); the connection is closed after. 0: no limit.
    pub header_read_timeout_seconds: u64,
    /// Seconds a request body may deliver no byte while the server waits for it; the request
    /// then answers 408 `request.timeout`. A slow but steady body is never cut. 0: no limit.
    pub body_timeout_seconds: u64,
    /// Seconds a connection may move no byte either way while no request is being worked on
    /// (e.g. a client that stopped reading a download); it is closed after. 0: no limit.
    pub idle_timeout_seconds: u64,
    /// Connections served at once; more clients wait in the listen backlog until one closes.
    pub max_connections: usize,
    /// Connections one client address may hold at once; a further one is closed on arrival.
    /// Behind `trusted_proxies` (whose connections carry many clients) it is instead the
    /// requests in flight per forwarded address, beyond which a request answers 429
    /// `request.too_many_connections`. 0: no limit.
    pub max_connections_per_address: usize,
    /// Connections kept for short requests: long ones (event streams, uploads and downloads of
    /// file bytes, WebDAV) get at most `max_connections` minus this many at once, and a further
    /// one answers 503 `request.server_busy`, so the site still answers while transfers run.
    pub reserved_connections: usize,
    /// Seconds the whole body of a JSON route may take to arrive (on top of the gap limit of
    /// `body_timeout_seconds`); the request then answers 408 `request.timeout`. Streamed bodies
    /// (uploads, WebDAV) have no such deadline. 0: no limit.
    pub json_body_deadline_seconds: u64,
    /// `GET /events` streams one user may hold open at once, on all masters together (counted
    /// in the shared store); a further one answers 429 `events.too_many_streams`. 0: no limit.
    pub max_event_streams_per_user: u32,
    /// Lifetime of refresh tokens, in days.
    pub refresh_token_days: u32,
    /// E-mail of the administrator created on first start (empty database).
    pub admin_email: String,
    /// Password of that administrator; unset means a random one, printed once to the log.
    pub admin_password: Option<Secret>,
    /// A file holding that password (used when `admin_password` is unset).
    pub admin_password_file: Option<PathBuf>,
    /// Failed sign-ins allowed per identifier (e-mail) within `login_rate_window_seconds`.
    pub login_failures_per_identifier: u64,
    /// Sign-in and registration attempts allowed per client address within the window.
    pub login_attempts_per_address: u64,
    /// Length of the sign-in rate-limit window, in seconds.
    pub login_rate_window_seconds: u64,
    /// Wrong redeem codes allowed per user within `login_rate_window_seconds`.
    pub redeem_failures_per_user: u64,
    /// Wrong redeem codes allowed per client address within the window.
    pub redeem_failures_per_address: u64,
    /// Background task workers of this master.
    pub task_workers: u32,
    /// Seconds a task claim lasts without a heartbeat; a dead master's task is taken over after it.
    pub task_lease_seconds: u64,
    /// Milliseconds between polls of an empty task queue.
    pub task_poll_millis: u64,
    /// Seconds a claim on an upload session (finishing or cancelling it) lasts without being
    /// renewed; a dead master's claim is taken over after it.
    pub upload_claim_lease_seconds: u64,
    /// Seconds between two health checks of the storage nodes (a signed ping to each enabled
    /// node, recording it online or offline).
    pub node_check_seconds: u64,
    /// Reverse proxies whose `X-Forwarded-For` is believed (CIDR ranges or addresses; in the
    /// environment, comma-separated). Empty: the TCP peer is the client, whatever it forwards.
    pub trusted_proxies: TrustedProxies,
    /// The bearer token `GET /metrics` asks for. Unset or empty: no metrics are kept and the
    /// route answers 404.
    pub metrics_token: Option<Secret>,
    /// A file holding the metrics token (used when `metrics_token` is unset).
    pub metrics_token_file: Option<PathBuf>,
}

/// The `trusted_proxies` ranges. Read from a TOML list or a comma-separated string (the form an
/// environment variable takes); a bare address is a range of one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TrustedProxies(pub Vec<ipnet::IpNet>);

impl TrustedProxies {
    /// Whether `address` is one of the proxies (IPv4-mapped IPv6 peers count as IPv4).
    pub fn contains(&self, address: std::net::IpAddr) -> bool {
        let address = address.to_canonical();
        self.0.iter().any(|range| range.contains(&address))
    }
}

impl Serialize for TrustedProxies {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.0.iter().map(ToString::to_string))
    }
}

impl<'de> Deserialize<'de> for TrustedProxies {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            List(Vec<String>),
            Text(String),
        }
        let items = match Form::deserialize(deserializer)? {
            Form::List(items) => items,
            Form::Text(text) => text.split(',').map(str::to_owned).collect(),
        };
        let parse = |item: &str| {
            item.parse::<ipnet::IpNet>().or_else(|_| item.parse::<std::net::IpAddr>().map(ipnet::IpNet::from)).map_err(
                |_| serde::de::Error::custom(format!("trusted_proxies: `{item}` is not an address or CIDR range")),
            )
        };
        items
            .iter()
            .map(|item| item.trim())
            .filter(|item| !item.is_empty())
            .map(parse)
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 5212)),
            data_dir: PathBuf::from("./data"),
            database_url: None,
            database_max_connections: 16,
            redis_url: None,
            secret: None,
            secret_file: None,
            log_format: LogFormat::Text,
            log_level: "info".to_owned(),
            max_json_body: 1024 * 1024,
            shutdown_grace_seconds: 30,
            header_read_timeout_seconds: 30,
            body_timeout_seconds: 60,
            idle_timeout_seconds: 120,
            max_connections: 1024,
            max_connections_per_address: 256,
            reserved_connections: 64,
            json_body_deadline_seconds: 30,
            max_event_streams_per_user: 8,
            redis_prefix: "nubo:".to_owned(),
            refresh_token_days: 30,
            admin_email: "admin@nubo.local".to_owned(),
            admin_password: None,
            admin_password_file: None,
            login_failures_per_identifier: 10,
            login_attempts_per_address: 100,
            login_rate_window_seconds: 900,
            redeem_failures_per_user: 10,
            redeem_failures_per_address: 30,
            task_workers: 2,
            task_lease_seconds: 30,
            task_poll_millis: 1000,
            upload_claim_lease_seconds: 60,
            node_check_seconds: 60,
            trusted_proxies: TrustedProxies::default(),
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub database_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_format: Option<LogFormat>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file or environment did not make a valid configuration, or a secret file is unreadable.
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error(
        "NUBO_SECRET is not set: the master needs a JWT signing secret of at least {MIN_SECRET_LEN} bytes. \
         Generate one with `head -c 48 /dev/urandom | base64` and set NUBO_SECRET, NUBO_SECRET_FILE or `secret` in the config file."
    )]
    MissingSecret,
    #[error(
        "NUBO_SECRET is too short ({0} bytes): use at least {MIN_SECRET_LEN} bytes, e.g. `head -c 48 /dev/urandom | base64`."
    )]
    ShortSecret(usize),
    #[error("cannot create the signing secret {path}: {source}")]
    CreateSecret {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// What [`Config::load_creating_secret`] found or did about the signing secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretFile {
    /// The secret is given directly (`secret`, `NUBO_SECRET`): no file is involved.
    Given,
    /// The file exists and is kept as it is.
    Kept(PathBuf),
    /// The file was created with a new random secret, readable by its owner only.
    Created(PathBuf),
}

impl Layered for Config {
    /// Every setting; anything else with the `NUBO_` prefix (test switches, the config path
    /// itself) is not configuration.
    const ENV_KEYS: &'static [&'static str] = &[
        "listen",
        "data_dir",
        "database_url",
        "database_max_connections",
        "redis_url",
        "secret",
        "secret_file",
        "log_format",
        "log_level",
        "max_json_body",
        "shutdown_grace_seconds",
        "header_read_timeout_seconds",
        "body_timeout_seconds",
        "idle_timeout_seconds",
        "max_connections",
        "max_connections_per_address",
        "reserved_connections",
        "json_body_deadline_seconds",
        "max_event_streams_per_user",
        "redis_prefix",
        "refresh_token_days",
        "admin_email",
        "admin_password",
        "admin_password_file",
        "login_failures_per_identifier",
        "login_attempts_per_address",
        "login_rate_window_seconds",
        "redeem_failures_per_user",
        "redeem_failures_per_address",
        "task_workers",
        "task_lease_seconds",
        "task_poll_millis",
        "upload_claim_lease_seconds",
        "node_check_seconds",
        "trusted_proxies",
        "metrics_token",
        "metrics_token_file",
    ];

    fn secret_files(&mut self) -> Vec<(&mut Option<Secret>, Option<&Path>)> {
        vec![
            (&mut self.secret, self.secret_file.as_deref()),
            (&mut self.admin_password, self.admin_password_file.as_deref()),
            (&mut self.metrics_token, self.metrics_token_file.as_deref()),
        ]
    }
}

impl Config {
    /// Layers defaults, the TOML file (if any), `NUBO_*` variables and CLI flags, then resolves
    /// `secret_file`. Does not demand the secret: only `serve` needs it (see [`Config::signing_secret`]).
    pub fn load(file: Option<&Path>, cli: &CliOverrides) -> Result<Self, ConfigError> {
        Ok(nubo_common::config::load(file, cli)?)
    }

    /// Like [`Config::load`], but first creates the data directory and, when no secret is given
    /// directly, a random one in `secret_file` (`<data_dir>/secret` when unset): mode 0600, and
    /// never overwritten, so a restart keeps every token valid. For `nubo-master init` and
    /// `serve --init-secret`; a plain `serve` keeps refusing to start without a secret.
    pub fn load_creating_secret(file: Option<&Path>, cli: &CliOverrides) -> Result<(Self, SecretFile), ConfigError> {
        let mut config: Config = load_layered(file, cli)?;
        let outcome = config.create_secret_file()?;
        read_secret_files(&mut config)?;
        Ok((config, outcome))
    }

    fn create_secret_file(&mut self) -> Result<SecretFile, ConfigError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;

        use base64::Engine;

        let failed = |path: &Path| {
            let path = path.display().to_string();
            move |source| ConfigError::CreateSecret { path, source }
        };
        std::fs::create_dir_all(&self.data_dir).map_err(failed(&self.data_dir))?;
        if self.secret.is_some() {
            return Ok(SecretFile::Given);
        }
        let path = self.secret_file.get_or_insert_with(|| self.data_dir.join("secret")).clone();
        // `create_new`: an existing file, however it was made, is the operator's and stays.
        let created = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path);
        let mut file = match created {
            Ok(file) => file,
            Err(err) if err.kind() == std::io::ErrorKind::AlreadyExists => return Ok(SecretFile::Kept(path)),
            Err(err) => return Err(failed(&path)(err)),
        };
        let secret = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 48]>());
        if let Err(err) = file.write_all(format!("{secret}\n").as_bytes()).and_then(|()| file.sync_all()) {
            // Not left half written: the next run would keep it and `serve` refuse it.
            let _ = std::fs::remove_file(&path);
            return Err(failed(&path)(err));
        }
        Ok(SecretFile::Created(path))
    }

    /// The token `GET /metrics` asks for; `None` when metrics are off.
    pub fn metrics_token(&self) -> Option<&Secret> {
        given(&self.metrics_token)
    }

    /// The signing secret, refused when missing or shorter than [`MIN_SECRET_LEN`].
    pub fn signing_secret(&self) -> Result<&Secret, ConfigError> {
        match given(&self.secret) {
            None => Err(ConfigError::MissingSecret),
            Some(secret) if secret.len() < MIN_SECRET_LEN => Err(ConfigError::ShortSecret(secret.len())),
            Some(secret) => Ok(secret),
        }
    }

    /// The connection limits of the listener.
    pub fn edge_limits(&self) -> nubo_common::serve::EdgeLimits {
        use nubo_common::serve::seconds;
        nubo_common::serve::EdgeLimits {
            header_read_timeout: seconds(self.header_read_timeout_seconds),
            idle_timeout: seconds(self.idle_timeout_seconds),
            max_connections: self.max_connections,
            max_connections_per_address: self.max_connections_per_address,
            // A proxy's connections carry many clients: those are capped per forwarded address
            // on their requests instead (`http::edge::cap_forwarded_clients`).
            uncapped_peers: match self.trusted_proxies.0.is_empty() {
                true => nubo_common::serve::PeerFilter::default(),
                false => {
                    let proxies = self.trusted_proxies.clone();
                    nubo_common::serve::PeerFilter::new(move |peer| proxies.contains(peer))
                }
            },
        }
    }

    /// How many long requests (event streams, file transfers, WebDAV) may run at once: every
    /// connection but the `reserved_connections` kept for short ones, and at least one.
    pub fn long_request_slots(&self) -> usize {
        self.max_connections.saturating_sub(self.reserved_connections).max(1)
    }

    /// The database URL in force: the configured one, else a SQLite file in the data directory.
    pub fn effective_database_url(&self) -> String {
        match &self.database_url {
            Some(url) => url.clone(),
            None => format!("sqlite://{}?mode=rwc", self.data_dir.join("nubo.db").display()),
        }
    }
}

#[cfg(test)]
// figment's `Jail` closures return its own large error type.
#[allow(clippy::result_large_err)]
mod tests {
    use super::*;
    use figment::providers::{Format, Serialized, Toml};
    use figment::{Figment, Jail};

    #[test]
    fn defaults_give_the_embedded_setup() {
        Jail::expect_with(|_jail| {
            let config = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(config.listen.to_string(), "127.0.0.1:5212");
            assert_eq!(config.data_dir, PathBuf::from("./data"));
            assert_eq!(config.effective_database_url(), "sqlite://./data/nubo.db?mode=rwc");
            assert!(config.redis_url.is_none());
            assert!(config.secret.is_none());
            Ok(())
        });
    }

    #[test]
    fn file_then_env_then_cli_take_precedence_in_that_order() {
        Jail::expect_with(|jail| {
            jail.create_file(
                "nubo.toml",
                r#"
                listen = "127.0.0.1:7000"
                data_dir = "/from-file"
                log_level = "debug"
                redis_url = "redis://file"
                "#,
            )?;
            jail.set_env("NUBO_DATA_DIR", "/from-env");
            jail.set_env("NUBO_REDIS_URL", "redis://env");
            let cli = CliOverrides { redis_url: Some("redis://cli".into()), ..CliOverrides::default() };
            let config = Config::load(Some(Path::new("nubo.toml")), &cli).unwrap();
            assert_eq!(config.listen.port(), 7000, "file beats default");
            assert_eq!(config.log_level, "debug", "file beats default");
            assert_eq!(config.data_dir, PathBuf::from("/from-env"), "env beats file");
            assert_eq!(config.redis_url.as_deref(), Some("redis://cli"), "cli beats env");
            Ok(())
        });
    }

    #[test]
    fn secret_file_is_read_when_secret_is_unset() {
        Jail::expect_with(|jail| {
            jail.create_file("secret.txt", &"s".repeat(40))?;
            jail.set_env("NUBO_SECRET_FILE", "secret.txt");
            let config = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(config.signing_secret().unwrap().len(), 40);
            Ok(())
        });
    }

    #[test]
    fn creating_the_secret_writes_an_owner_only_file_once() {
        use std::os::unix::fs::PermissionsExt;
        Jail::expect_with(|_jail| {
            let (config, outcome) = Config::load_creating_secret(None, &CliOverrides::default()).unwrap();
            let path = PathBuf::from("./data/secret");
            assert_eq!(outcome, SecretFile::Created(path.clone()));
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "readable by its owner only, got {mode:o}");
            let secret = config.signing_secret().unwrap().expose().to_owned();
            assert!(secret.len() >= MIN_SECRET_LEN, "{} bytes", secret.len());

            let (again, outcome) = Config::load_creating_secret(None, &CliOverrides::default()).unwrap();
            assert_eq!(outcome, SecretFile::Kept(path));
            assert_eq!(again.signing_secret().unwrap().expose(), secret, "kept, not overwritten");

            let plain = Config::load(None, &CliOverrides::default()).unwrap();
            assert!(matches!(plain.signing_secret(), Err(ConfigError::MissingSecret)), "a plain load creates nothing");
            Ok(())
        });
    }

    #[test]
    fn creating_the_secret_uses_the_named_file_and_leaves_a_given_secret_alone() {
        Jail::expect_with(|jail| {
            jail.set_env("NUBO_SECRET_FILE", "keys/nubo-secret");
            std::fs::create_dir("keys").unwrap();
            let (config, outcome) = Config::load_creating_secret(None, &CliOverrides::default()).unwrap();
            assert_eq!(outcome, SecretFile::Created(PathBuf::from("keys/nubo-secret")));
            assert!(config.signing_secret().is_ok());
            assert!(!Path::new("data/secret").exists(), "only the named file is written");

            jail.set_env("NUBO_SECRET", "s".repeat(40));
            jail.set_env("NUBO_DATA_DIR", "elsewhere");
            let (_, outcome) = Config::load_creating_secret(None, &CliOverrides::default()).unwrap();
            assert_eq!(outcome, SecretFile::Given);
            assert!(Path::new("elsewhere").is_dir() && !Path::new("elsewhere/secret").exists());
            Ok(())
        });
    }

    #[test]
    fn missing_and_short_secrets_are_refused() {
        Jail::expect_with(|jail| {
            let config = Config::load(None, &CliOverrides::default()).unwrap();
            assert!(matches!(config.signing_secret(), Err(ConfigError::MissingSecret)));
            jail.set_env("NUBO_SECRET", "too-short");
            let config = Config::load(None, &CliOverrides::default()).unwrap();
            assert!(matches!(config.signing_secret(), Err(ConfigError::ShortSecret(9))));
            Ok(())
        });
    }

    #[test]
    fn unknown_keys_in_the_file_are_refused() {
        Jail::expect_with(|jail| {
            jail.create_file("nubo.toml", "listne = \"127.0.0.1:1\"")?;
            let err = Config::load(Some(Path::new("nubo.toml")), &CliOverrides::default());
            assert!(err.unwrap_err().to_string().contains("listne"));
            Ok(())
        });
    }

    #[test]
    fn the_example_config_in_deploy_is_valid() {
        Jail::expect_with(|_jail| {
            let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/nubo.example.toml");
            let mut figment = Figment::from(Serialized::defaults(Config::default()));
            figment = figment.merge(Toml::file_exact(&example));
            let config: Config = figment.extract().map_err(|e| e.to_string())?;
            assert_eq!(config.secret_file.as_deref(), Some(Path::new("/etc/nubo/secret")));
            assert_eq!(config.listen, Config::default().listen);
            Ok(())
        });
    }

    #[test]
    fn trusted_proxies_come_from_a_list_or_a_comma_separated_variable() {
        Jail::expect_with(|jail| {
            jail.create_file("nubo.toml", r#"trusted_proxies = ["10.0.0.0/8", "::1"]"#)?;
            let config = Config::load(Some(Path::new("nubo.toml")), &CliOverrides::default()).unwrap();
            assert!(config.trusted_proxies.contains("10.1.2.3".parse().unwrap()));
            assert!(config.trusted_proxies.contains("::1".parse().unwrap()));
            assert!(!config.trusted_proxies.contains("11.0.0.1".parse().unwrap()));
            jail.set_env("NUBO_TRUSTED_PROXIES", "127.0.0.1/32, 192.168.0.0/16");
            let config = Config::load(None, &CliOverrides::default()).unwrap();
            assert!(config.trusted_proxies.contains("::ffff:127.0.0.1".parse().unwrap()), "mapped IPv4");
            assert!(config.trusted_proxies.contains("192.168.9.9".parse().unwrap()));
            assert!(Config::load(None, &CliOverrides::default()).is_ok());
            jail.set_env("NUBO_TRUSTED_PROXIES", "not-a-range");
            assert!(Config::load(None, &CliOverrides::default()).unwrap_err().to_string().contains("not-a-range"));
            Ok(())
        });
    }

    #[test]
    fn metrics_are_off_unless_a_token_is_set() {
        Jail::expect_with(|jail| {
            assert!(Config::load(None, &CliOverrides::default()).unwrap().metrics_token().is_none());
            jail.create_file("metrics-token", "scrape-token\n")?;
            jail.set_env("NUBO_METRICS_TOKEN_FILE", "metrics-token");
            let config = Config::load(None, &CliOverrides::default()).unwrap();
            assert_eq!(config.metrics_token().map(|t| t.expose()), Some("scrape-token"));
            jail.set_env("NUBO_METRICS_TOKEN", "");
            let config = Config::load(None, &CliOverrides::default()).unwrap();
            assert!(config.metrics_token().is_none(), "an empty token given directly wins over the file: off");
            Ok(())
        });
    }

    #[test]
    fn unrelated_nubo_variables_are_ignored() {
        Jail::expect_with(|jail| {
            jail.set_env("NUBO_TEST_REQUIRE_SERVICES", "1");
            jail.set_env("NUBO_CONFIG", "/nowhere.toml");
            assert!(Config::load(None, &CliOverrides::default()).is_ok());
            Ok(())
        });
    }
}
