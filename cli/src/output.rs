//! What the user sees: progress bars on standard error (hidden with `--json` or when it is not
//! a terminal), human-readable sizes and times, and JSON for scripts on standard output.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

/// How a command reports: JSON for scripts, or text and progress bars for people.
#[derive(Debug, Clone, Copy)]
pub struct Output {
    pub json: bool,
    pub progress: bool,
    /// `--quiet`: no progress bars and no line per step.
    pub quiet: bool,
}

impl Output {
    pub fn new(json: bool, quiet: bool) -> Output {
        Output { json, progress: !json && !quiet && std::io::stderr().is_terminal(), quiet }
    }

    pub fn print_json(&self, value: &Value) {
        println!("{}", serde_json::to_string_pretty(value).unwrap_or_default());
    }
}

/// The bars of one transfer command: a total bar and one bar per large file in flight.
#[derive(Clone)]
pub struct Progress {
    bars: Option<MultiProgress>,
    pub total: ProgressBar,
}

const TOTAL_STYLE: &str = "{prefix:>8} [{elapsed_precise}] {wide_bar:.cyan/blue} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta} {msg}";
const FILE_STYLE: &str = "{prefix:>8} {wide_msg} {bar:30} {bytes}/{total_bytes} {binary_bytes_per_sec} ETA {eta}";

impl Progress {
    pub fn new(output: Output, verb: &str, total_bytes: u64, files: usize) -> Progress {
        if !output.progress {
            return Progress { bars: None, total: ProgressBar::hidden() };
        }
        let bars = MultiProgress::with_draw_target(ProgressDrawTarget::stderr_with_hz(8));
        let total = bars.add(ProgressBar::new(total_bytes));
        total.set_style(ProgressStyle::with_template(TOTAL_STYLE).expect("template").progress_chars("=> "));
        total.set_prefix(verb.to_owned());
        total.set_message(format!("{files} file(s)"));
        total.enable_steady_tick(Duration::from_millis(250));
        Progress { bars: Some(bars), total }
    }

    /// A bar for one file of `size` bytes (hidden when bars are off).
    pub fn file(&self, name: &str, size: u64) -> ProgressBar {
        let Some(bars) = &self.bars else { return ProgressBar::hidden() };
        let bar = bars.insert_before(&self.total, ProgressBar::new(size));
        bar.set_style(ProgressStyle::with_template(FILE_STYLE).expect("template").progress_chars("=> "));
        bar.set_message(name.to_owned());
        bar
    }

    /// Counts `bytes` done on the total and on `file`.
    pub fn advance(&self, file: &ProgressBar, bytes: u64) {
        self.total.inc(bytes);
        file.inc(bytes);
    }

    /// Takes back bytes counted for an attempt that failed.
    pub fn retract(&self, file: &ProgressBar, bytes: u64) {
        self.total.set_position(self.total.position().saturating_sub(bytes));
        file.set_position(file.position().saturating_sub(bytes));
    }

    pub fn finish(&self) {
        self.total.finish_and_clear();
    }
}

/// `1.5 MiB`, `512 B`.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}

/// `2026-05-01 12:30` of an RFC 3339 time (as given when it does not parse).
pub fn short_time(rfc3339: &str) -> String {
    match rfc3339.get(..16) {
        Some(prefix) if rfc3339.len() > 16 => prefix.replace('T', " "),
        _ => rfc3339.to_owned(),
    }
}
