//! `nubo`: the command-line client of a Nubo server. Parses the command line, runs one command
//! and turns its outcome into output and an exit code (see `error::ExitKind`, docs/src/cli.md).

mod client;
mod commands;
mod config;
mod download;
mod error;
mod mtime;
mod output;
mod remote;
mod sync;
mod testing;
mod upload;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use serde_json::Value;

use crate::client::Api;
use crate::error::CliResult;
use crate::output::Output;

#[derive(Debug, Parser)]
#[command(name = "nubo", version, about = "Command-line client of a Nubo server", max_term_width = 100)]
struct Cli {
    /// Print results (and errors, on standard error) as JSON; no progress bars.
    #[arg(long, global = true)]
    json: bool,
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Sign in to a server and keep the session in the config directory.
    Login {
        /// The server's address, e.g. https://cloud.example.org.
        server: String,
        /// The account's e-mail address (asked for when absent).
        #[arg(long)]
        email: Option<String>,
        /// Read the password from the first line of standard input instead of a prompt.
        #[arg(long)]
        password_stdin: bool,
        /// The two-factor code (six digits, or a recovery code), when the account has one.
        #[arg(long, value_name = "CODE")]
        totp: Option<String>,
    },
    /// Sign out: end the session on the server and forget it here.
    Logout,
    /// Show who is signed in, and where.
    Whoami,
    /// List a folder (the root by default), or show one file.
    Ls {
        #[arg(default_value = "/")]
        path: String,
    },
    /// Make folders.
    Mkdir {
        /// Make missing parents too; an existing folder is fine.
        #[arg(short, long)]
        parents: bool,
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Upload files and folders. Run the same command again after an interrupt to resume.
    Put {
        /// Local files or folders.
        #[arg(required = true, value_name = "LOCAL")]
        sources: Vec<PathBuf>,
        /// The remote folder (or, for one source, the new remote path).
        #[arg(value_name = "REMOTE")]
        destination: String,
        /// Replace the content of remote files of the same name.
        #[arg(long)]
        overwrite: bool,
        /// Chunks and small files in flight at once.
        #[arg(long, short = 'P', default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
        parallel: u16,
    },
    /// Download files and folders. Run the same command again after an interrupt to resume.
    Get {
        /// Remote files or folders.
        #[arg(required = true, value_name = "REMOTE")]
        sources: Vec<String>,
        /// The local folder (or, for one source, the new local path).
        #[arg(value_name = "LOCAL")]
        destination: String,
        /// Replace local files that differ.
        #[arg(long)]
        overwrite: bool,
        /// Files downloaded at once.
        #[arg(long, short = 'P', default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
        parallel: u16,
    },
    /// Move or rename files and folders.
    Mv {
        #[arg(required = true, value_name = "SOURCE")]
        sources: Vec<String>,
        /// An existing folder to move into, or (one source) the new path.
        destination: String,
    },
    /// Copy files and folders.
    Cp {
        #[arg(required = true, value_name = "SOURCE")]
        sources: Vec<String>,
        /// An existing folder to copy into, or (one source) the path of the copy.
        destination: String,
    },
    /// Move files and folders to the trash (or delete them for good with --purge).
    Rm {
        /// Remove folders with what they hold.
        #[arg(short, long)]
        recursive: bool,
        /// Delete for good instead of keeping them in the trash.
        #[arg(long)]
        purge: bool,
        #[arg(required = true)]
        paths: Vec<String>,
    },
    /// Share links.
    Share {
        #[command(subcommand)]
        action: ShareAction,
    },
    /// Keep a local folder and a remote folder in step, both ways (see docs/src/cli.md).
    ///
    /// Exit status: 0 everything in step, 8 conflicts kept or paths skipped, 9 refused as unsafe (an
    /// unmounted disk?), else as other commands.
    Sync {
        /// Only send local changes to the server.
        #[arg(long, conflicts_with = "pull")]
        push: bool,
        /// Only bring remote changes here.
        #[arg(long)]
        pull: bool,
        /// Print what a run would do, and do nothing.
        #[arg(long)]
        dry_run: bool,
        /// Keep going: sync again whenever something changes on either side.
        #[arg(long)]
        watch: bool,
        /// Transfers at once.
        #[arg(long, short = 'P', default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
        parallel: u16,
        /// Run even when the local folder is empty or on another disk than last time, or the run
        /// deletes more than half of what was synced (refused otherwise, exit 9).
        #[arg(long)]
        allow_mass_delete: bool,
        /// The local folder (made when missing).
        #[arg(value_name = "LOCAL")]
        local: PathBuf,
        /// The remote folder (made when missing).
        #[arg(value_name = "REMOTE")]
        remote: String,
    },
    /// Find files and folders by name.
    Search {
        /// Text the names contain (any case).
        text: String,
        /// Only files or only folders.
        #[arg(long = "type", value_parser = ["file", "folder"])]
        kind: Option<String>,
        /// Only below this folder.
        #[arg(long)]
        under: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
enum ShareAction {
    /// Share a file or folder; prints its code and link.
    Create {
        path: String,
        /// Visitors must give this password.
        #[arg(long)]
        password: Option<String>,
        /// When the link stops working (RFC 3339, e.g. 2030-01-01T00:00:00Z).
        #[arg(long)]
        expires: Option<String>,
        /// After this many downloads the link stops working.
        #[arg(long)]
        max_downloads: Option<i64>,
    },
    /// List your shares.
    Ls,
    /// End shares by code.
    Rm {
        /// Share codes (a code may begin with `-`).
        #[arg(required = true, allow_hyphen_values = true)]
        codes: Vec<String>,
    },
}

async fn run(command: Command, output: Output) -> CliResult<Value> {
    match command {
        Command::Login { server, email, password_stdin, totp } => {
            commands::login(commands::LoginInput { server, email, password_stdin, totp }, output).await
        }
        Command::Logout => commands::logout(output).await,
        Command::Whoami => commands::whoami(&Api::signed_in()?, output).await,
        Command::Ls { path } => commands::ls(&Api::signed_in()?, &path, output).await,
        Command::Mkdir { parents, paths } => commands::mkdir(&Api::signed_in()?, &paths, parents, output).await,
        Command::Put { sources, destination, overwrite, parallel } => {
            let options = upload::PutOptions { overwrite, parallel: usize::from(parallel) };
            let api = Api::signed_in()?;
            let results = upload::put(&api, &sources, &destination, &options, output).await?;
            if !output.json {
                let unchanged = results.iter().filter(|r| r["status"] == "unchanged").count();
                let bytes: u64 = results.iter().map(|r| r["size"].as_u64().unwrap_or(0)).sum();
                println!(
                    "{} file(s), {} uploaded to {destination}{}",
                    results.len(),
                    output::human_size(bytes),
                    if unchanged > 0 { format!(" ({unchanged} already there)") } else { String::new() }
                );
            }
            Ok(Value::Array(results))
        }
        Command::Get { sources, destination, overwrite, parallel } => {
            let options = download::GetOptions { overwrite, parallel: usize::from(parallel) };
            let api = Api::signed_in()?;
            let target = PathBuf::from(&destination);
            let results = download::get(&api, &sources, &target, &destination, &options, output).await?;
            if !output.json {
                let bytes: u64 = results.iter().map(|r| r["size"].as_u64().unwrap_or(0)).sum();
                println!("{} file(s), {} in {destination}", results.len(), output::human_size(bytes));
            }
            Ok(Value::Array(results))
        }
        Command::Mv { sources, destination } => commands::mv(&Api::signed_in()?, &sources, &destination, output).await,
        Command::Cp { sources, destination } => commands::cp(&Api::signed_in()?, &sources, &destination, output).await,
        Command::Rm { recursive, purge, paths } => {
            commands::rm(&Api::signed_in()?, &paths, recursive, purge, output).await
        }
        Command::Share { action } => {
            let api = Api::signed_in()?;
            match action {
                ShareAction::Create { path, password, expires, max_downloads } => {
                    let share = commands::NewShare { path, password, expires, max_downloads };
                    commands::share_create(&api, share, output).await
                }
                ShareAction::Ls => commands::share_ls(&api, output).await,
                ShareAction::Rm { codes } => commands::share_rm(&api, &codes, output).await,
            }
        }
        Command::Sync { push, pull, dry_run, watch, parallel, allow_mass_delete, local, remote } => {
            let direction = match (push, pull) {
                (true, _) => sync::Direction::Push,
                (_, true) => sync::Direction::Pull,
                _ => sync::Direction::Both,
            };
            let options =
                sync::SyncOptions { direction, dry_run, watch, parallel: usize::from(parallel), allow_mass_delete };
            sync::sync(&Api::signed_in()?, &local, &remote, &options, output).await
        }
        Command::Search { text, kind, under } => {
            commands::search(&Api::signed_in()?, &text, kind.as_deref(), under.as_deref(), output).await
        }
    }
}

fn main() {
    let cli = Cli::parse();
    let output = Output::new(cli.json, cli.quiet);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("the async runtime starts");
    match runtime.block_on(run(cli.command, output)) {
        Ok(value) => {
            // `sync` prints its own lines as it goes and answers null.
            if output.json && !value.is_null() {
                output.print_json(&value);
            }
        }
        Err(err) => {
            if output.json {
                eprintln!("{}", err.to_json());
            } else {
                eprintln!("{err}");
            }
            std::process::exit(err.exit_code());
        }
    }
}
