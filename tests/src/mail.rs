//! A real SMTP server for the tests: `tests/support/smtp_sink.py` (Python's `aiosmtpd`) on a
//! port of its choosing, writing each accepted mail to a folder the test reads. A recipient
//! named `refuse@...` is refused with 550.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use tempfile::TempDir;

use crate::{Session, TestApp, services_required};

/// The running sink; stopped when dropped.
pub struct SmtpSink {
    child: Child,
    pub port: u16,
    folder: TempDir,
}

impl SmtpSink {
    /// Starts the sink; `None` (the test skips) when Python or `aiosmtpd` is missing and
    /// services are not required.
    pub fn start() -> Option<Self> {
        let python = std::env::var("NUBO_TEST_PYTHON").unwrap_or_else(|_| "python3".to_owned());
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("support/smtp_sink.py");
        let folder = tempfile::Builder::new().prefix("nubo-mail-").tempdir().expect("mail folder");
        let spawned = Command::new(&python)
            .arg(&script)
            .arg(folder.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(err) if !services_required() => {
                eprintln!("skipped: {python} cannot run: {err}");
                return None;
            }
            Err(err) => panic!("the SMTP sink needs {python} with aiosmtpd (pip install aiosmtpd): {err}"),
        };
        let mut line = String::new();
        let read = BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line);
        let Some(port) = read.ok().and_then(|_| line.trim().parse().ok()) else {
            let _ = child.kill();
            let _ = child.wait();
            assert!(!services_required(), "the SMTP sink did not start: is aiosmtpd installed (pip install aiosmtpd)?");
            eprintln!("skipped: the SMTP sink did not start (pip install aiosmtpd)");
            return None;
        };
        Some(Self { child, port, folder })
    }

    /// The folder the mails land in, `NNNN.eml` each.
    pub fn folder(&self) -> PathBuf {
        self.folder.path().to_owned()
    }

    /// Every mail received so far, oldest first, as raw text.
    pub fn mails(&self) -> Vec<String> {
        let mut names: Vec<PathBuf> = std::fs::read_dir(self.folder.path())
            .expect("mail folder")
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|path| path.extension().is_some_and(|ext| ext == "eml"))
            .collect();
        names.sort();
        names.iter().map(|path| std::fs::read_to_string(path).expect("mail")).collect()
    }

    /// Waits (ten seconds at most) until `count` mails arrived and answers them all.
    pub async fn wait_for(&self, count: usize) -> Vec<String> {
        for _ in 0..200 {
            let mails = self.mails();
            if mails.len() >= count {
                return mails;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("expected {count} mails, got {}: {:?}", self.mails().len(), self.mails());
    }

    /// Points the master's mail settings at this sink (plain SMTP) as `admin`.
    pub async fn configure(&self, app: &TestApp, admin: &Session) {
        let settings = json!({
            "mail_smtp_host": "127.0.0.1",
            "mail_smtp_port": self.port,
            "mail_smtp_tls": "none",
            "mail_from": "Nubo <nubo@nubo.test>",
        });
        let response = app.call(Method::PATCH, "/admin/settings", Some(&admin.access), Some(settings)).await;
        assert_eq!(response.status(), 204, "{}", response.text().await.unwrap_or_default());
    }
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The token of the link to `page` (such as `/login/magic`) in a mail, whichever transfer
/// encoding the text part has (quoted-printable spells `=` as `=3D` and breaks long lines).
pub fn link_token(mail: &str, page: &str) -> String {
    let unfolded = mail.replace("=\r\n", "").replace("=\n", "").replace("=3D", "=");
    let marker = format!("{page}?token=");
    let start = unfolded.find(&marker).unwrap_or_else(|| panic!("no link to {page} in:\n{mail}")) + marker.len();
    unfolded[start..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_').collect()
}

/// The link to `page` in a mail, from its scheme (or leading `/`) to the end of its token.
pub fn link(mail: &str, page: &str) -> String {
    let token = link_token(mail, page);
    let unfolded = mail.replace("=\r\n", "").replace("=\n", "").replace("=3D", "=");
    let end = unfolded.find(&token).expect("token") + token.len();
    let start = unfolded[..end].rfind(char::is_whitespace).map_or(0, |at| at + 1);
    unfolded[start..end].to_owned()
}
