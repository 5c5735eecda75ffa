//! What the `nubo` binary's test suites share: the outcome of one run and how to read it.
// Each suite reads the outcome its own way.
#![allow(dead_code)]

use serde_json::Value;

/// What one run of the binary did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn of(output: std::process::Output) -> Run {
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Asserts success; the parsed standard output (with `--json`).
    pub fn json(&self) -> Value {
        assert_eq!(self.code, 0, "nubo failed: {}", self.stderr);
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.stdout))
    }

    /// The JSON error `--json` prints on standard error.
    pub fn error(&self) -> Value {
        let line = self.stderr.lines().rev().find(|l| l.starts_with('{')).unwrap_or_default();
        serde_json::from_str::<Value>(line).unwrap_or_else(|_| panic!("no JSON error: {}", self.stderr))["error"]
            .clone()
    }

    /// The `--json` event lines (`nubo sync`).
    pub fn events(&self) -> Vec<Value> {
        self.stdout.lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
    }

    pub fn count(&self, event: &str) -> usize {
        self.events().iter().filter(|e| e["event"] == event).count()
    }

    pub fn summary(&self) -> Value {
        self.events().into_iter().find(|e| e["event"] == "summary").unwrap_or_else(|| panic!("no summary: {self:?}"))
    }

    pub fn converged(&self) -> &Self {
        assert_eq!(self.code, 0, "the run converges: {}\n{}", self.stdout, self.stderr);
        self
    }
}
