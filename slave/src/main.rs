//! `nubo-slave` command line: parses arguments, loads the configuration and calls the library.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use nubo_slave::config::{CliOverrides, Config};
use nubo_slave::server::{Node, shutdown_signal};

#[derive(Parser)]
#[command(name = "nubo-slave", version, about = "Nubo storage node")]
struct Cli {
    /// TOML configuration file.
    #[arg(long, env = "NUBO_CONFIG")]
    config: Option<PathBuf>,
    /// Address and port to listen on (overrides NUBO_LISTEN).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Data directory (overrides NUBO_DATA_DIR).
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let overrides = CliOverrides { listen: cli.listen, data_dir: cli.data_dir };
    let config = match Config::load(cli.config.as_deref(), &overrides) {
        Ok(config) => config,
        Err(err) => return fail(&err),
    };
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt().with_env_filter(filter).init();
    let listen = config.listen;
    let node = match Node::new(config) {
        Ok(node) => node,
        Err(err) => return fail(&err),
    };
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(err) => return fail(&err),
    };
    let served = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        node.serve(listener, shutdown_signal()).await
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => fail(&err),
    }
}

fn fail(err: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("nubo-slave: {err}");
    ExitCode::FAILURE
}
