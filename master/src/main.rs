//! `nubo-master` command line: parses arguments, loads the configuration and calls the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use nubo_common::secret::Secret;
use nubo_master::{app, telemetry};
use nubo_model::config::{CliOverrides, Config, LogFormat, SecretFile};

/// jemalloc instead of the system allocator: WebDAV listings and small writes allocate a lot, and
/// it keeps resident memory lower than glibc's per-thread arenas under concurrent requests. Its
/// options are fixed at build time (`.cargo/config.toml`): a background thread hands memory that
/// has stayed free for a few seconds back to the kernel, so a password hash (19 MiB) or a burst
/// of upload buffers does not stay resident, while buffers freed and taken again at once are not
/// faulted in again. mimalloc, used before, kept such memory (a set-up server held ~52 MiB of
/// heap against ~6 MiB now), and telling it otherwise halved 1 GiB GETs or needed `unsafe`.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "nubo-master", version, about = "Nubo master server")]
struct Cli {
    /// TOML configuration file.
    #[arg(long, env = "NUBO_CONFIG", global = true)]
    config: Option<PathBuf>,
    /// Address and port to listen on (overrides NUBO_LISTEN).
    #[arg(long, global = true)]
    listen: Option<SocketAddr>,
    /// Data directory (overrides NUBO_DATA_DIR).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    /// Database URL, sqlite://... or postgres://... (overrides NUBO_DATABASE_URL).
    #[arg(long, global = true)]
    database_url: Option<String>,
    /// Redis URL (overrides NUBO_REDIS_URL).
    #[arg(long, global = true)]
    redis_url: Option<String>,
    /// File holding the JWT signing secret (overrides NUBO_SECRET_FILE).
    #[arg(long, global = true)]
    secret_file: Option<PathBuf>,
    /// Log format (overrides NUBO_LOG_FORMAT).
    #[arg(long, global = true, value_parser = parse_log_format)]
    log_format: Option<LogFormat>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the server (the default).
    Serve {
        /// First do what `init` does: create the data directory and, when no secret is
        /// configured, a signing secret file readable by its owner only (an existing one is kept).
        #[arg(long)]
        init_secret: bool,
    },
    /// Create the data directory and, when no secret is configured, a random signing secret in
    /// the secret file (`<data_dir>/secret` unless named), mode 0600, kept when it exists; then exit.
    Init,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Print the OpenAPI document of the API (as `GET /api/v1/openapi.json` serves it) and exit.
    Openapi,
    /// Manage users.
    #[command(subcommand)]
    User(UserCommand),
}

#[derive(Subcommand)]
enum UserCommand {
    /// Create an administrator with an e-mail and password.
    CreateAdmin {
        #[arg(long)]
        email: String,
        /// File holding the password; without it a random password is generated and printed once.
        #[arg(long)]
        password_file: Option<PathBuf>,
    },
}

fn parse_log_format(value: &str) -> Result<LogFormat, String> {
    match value {
        "text" => Ok(LogFormat::Text),
        "json" => Ok(LogFormat::Json),
        other => Err(format!("{other:?} is not a log format: use text or json")),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let overrides = CliOverrides {
        listen: cli.listen,
        data_dir: cli.data_dir,
        database_url: cli.database_url,
        redis_url: cli.redis_url,
        secret_file: cli.secret_file,
        log_format: cli.log_format,
    };
    if matches!(cli.command, Some(Command::Openapi)) {
        // Needs no configuration: the web app's API client is generated from this in CI.
        return match nubo_http::api::openapi().to_pretty_json() {
            Ok(document) => {
                println!("{document}");
                ExitCode::SUCCESS
            }
            Err(err) => fail(err),
        };
    }
    let creates_secret = matches!(cli.command, Some(Command::Init | Command::Serve { init_secret: true }));
    let loaded = if creates_secret {
        Config::load_creating_secret(cli.config.as_deref(), &overrides).map(|(config, secret)| (config, Some(secret)))
    } else {
        Config::load(cli.config.as_deref(), &overrides).map(|config| (config, None))
    };
    let (config, secret_file) = match loaded {
        Ok(loaded) => loaded,
        Err(err) => return fail(err),
    };
    telemetry::init(config.log_format, &config.log_level);
    if let Some(secret_file) = &secret_file
        && !matches!(cli.command, Some(Command::Init))
    {
        tracing::info!("{}", describe(secret_file));
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => return fail(err),
    };
    let outcome = runtime.block_on(async move {
        match cli.command.unwrap_or(Command::Serve { init_secret: false }) {
            Command::Serve { .. } => app::serve(config).await,
            Command::Init => {
                if let Some(secret_file) = &secret_file {
                    println!("{}", describe(secret_file));
                }
                println!("data directory {} is ready", config.data_dir.display());
                Ok(())
            }
            Command::Openapi => Ok(()),
            Command::Migrate => {
                let applied = app::migrate(&config).await?;
                println!("database is up to date ({applied} migrations applied)");
                Ok(())
            }
            Command::User(UserCommand::CreateAdmin { email, password_file }) => {
                let password = password_file.map(|p| Secret::from_file(&p)).transpose()?;
                let (id, generated) = app::create_admin(&config, &email, password).await?;
                println!("created administrator {email} ({id})");
                if let Some(password) = generated {
                    println!("generated password (shown once): {}", password.expose());
                }
                Ok(())
            }
        }
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(err),
    }
}

/// One line on what became of the signing secret file.
fn describe(secret_file: &SecretFile) -> String {
    match secret_file {
        SecretFile::Given => "the signing secret is configured directly; no secret file written".to_owned(),
        SecretFile::Kept(path) => format!("kept the signing secret in {}", path.display()),
        SecretFile::Created(path) => {
            format!("created the signing secret in {} (readable by its owner only)", path.display())
        }
    }
}

fn fail(err: impl std::fmt::Display) -> ExitCode {
    eprintln!("error: {err:#}");
    ExitCode::FAILURE
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use std::time::{Duration, Instant};

    /// One MiB in the KiB that `/proc` counts in.
    const MIB_IN_KIB: u64 = 1024;

    /// The process's resident anonymous memory (heap), in KiB.
    fn anonymous_resident_kib() -> u64 {
        let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
        status
            .lines()
            .find_map(|line| line.strip_prefix("RssAnon:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("an RssAnon line")
    }

    /// The allocator's build options are in effect: memory freed in the 1 MiB pieces uploads
    /// and downloads use goes back to the kernel within seconds, with nothing else allocating
    /// (without the background thread jemalloc only purges when something allocates, and by
    /// default only as far as `MADV_FREE`, which leaves the pages resident).
    #[test]
    fn freed_memory_goes_back_to_the_kernel() {
        let before = anonymous_resident_kib();
        let pieces: Vec<Vec<u8>> = (0..64_u8).map(|i| vec![i | 1; 1 << 20]).collect();
        let held = anonymous_resident_kib();
        assert!(held >= before + 48 * MIB_IN_KIB, "64 MiB written should be resident: {before} KiB, then {held} KiB");
        drop(pieces);
        let patience = Duration::from_secs(30);
        let deadline = Instant::now() + patience;
        loop {
            let now = anonymous_resident_kib();
            if now + 48 * MIB_IN_KIB <= held {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "freed memory still resident after {patience:?}: {held} KiB, now {now} KiB"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
