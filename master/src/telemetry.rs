//! Logging set-up: human-readable text or one JSON object per line, filtered by `log_level`.

use tracing_subscriber::EnvFilter;

use nubo_model::config::LogFormat;

/// Installs the global subscriber; a second call (tests start many servers) is a no-op.
pub fn init(format: LogFormat, level: &str) {
    let filter = EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"));
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour && format == LogFormat::Text);
    let _already_set = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
