//! `nubo get`: remote files and folders onto the local disk. Each file is written to
//! `{name}.part` and renamed when complete and verified (its length, and its blake3 against the
//! server's `ETag`); an interrupted download continues from the end of its `.part` file with a
//! `Range` request when run again, unless the file changed meanwhile (another `ETag`). A local
//! file already holding the remote file (same size and time) counts as done.

use std::path::{Path, PathBuf};

use futures_util::{StreamExt, TryStreamExt, stream};
use reqwest::Method;
use reqwest::header::{ETAG, RANGE};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;

use crate::client::{ATTEMPTS, Api, backoff, checked, unix_of};
use crate::config::{read_json as read_record, remove_record, resume_record_path, write_private_json};
use crate::error::{CliError, CliResult, ExitKind};
use crate::output::{Output, Progress};
use crate::remote::{self, Object, RemotePath};
use crate::testing;

pub struct GetOptions {
    /// Replace local files that differ.
    pub overwrite: bool,
    /// Files downloaded at once.
    pub parallel: usize,
}

/// What a `.part` file was started from: the content's `ETag` and size.
#[derive(Debug, Serialize, Deserialize)]
struct GetRecord {
    etag: Option<String>,
    size: u64,
}

struct Planned {
    object: Object,
    target: PathBuf,
}

fn local_error(what: &str, path: &Path) -> impl FnOnce(std::io::Error) -> CliError {
    move |err| CliError::local(what, path, err)
}

/// Downloads `sources` to `destination`; answers one JSON value per file.
pub async fn get(
    api: &Api,
    sources: &[String],
    destination: &Path,
    destination_raw: &str,
    options: &GetOptions,
    output: Output,
) -> CliResult<Vec<Value>> {
    let into_dir = destination.is_dir() || destination_raw.ends_with('/') || sources.len() > 1;
    let mut objects = Vec::new();
    for source in sources {
        objects.push(remote::require(api, &RemotePath::parse(source)).await?);
    }
    if into_dir {
        tokio::fs::create_dir_all(destination).await.map_err(local_error("cannot create", destination))?;
    }
    let mut files = Vec::new();
    for object in objects {
        let target = if into_dir { destination.join(&object.name) } else { destination.to_owned() };
        if object.is_folder() {
            Box::pin(plan_folder(api, &object, &target, &mut files)).await?;
        } else {
            files.push(Planned { object, target });
        }
    }
    let total = files.iter().map(|f| f.object.size).sum();
    let progress = Progress::new(output, "get", total, files.len());
    let results = stream::iter(files)
        .map(|file| download(api, file, options, &progress))
        .buffer_unordered(options.parallel.max(1))
        .try_collect::<Vec<Value>>()
        .await;
    progress.finish();
    results
}

/// Makes `target` and the folders below it; adds the files to fetch.
async fn plan_folder(api: &Api, folder: &Object, target: &Path, files: &mut Vec<Planned>) -> CliResult<()> {
    if target.exists() && !target.is_dir() {
        return Err(CliError::conflict(format!("{} exists and is not a folder", target.display())));
    }
    tokio::fs::create_dir_all(target).await.map_err(local_error("cannot create", target))?;
    let path = RemotePath::parse(&folder.path);
    let (_, items) = remote::list_folder(api, &path)
        .await?
        .ok_or_else(|| CliError::not_found(format!("{} is gone", folder.path)))?;
    for item in items {
        let below = target.join(&item.name);
        if item.is_folder() {
            Box::pin(plan_folder(api, &item, &below, files)).await?;
        } else {
            files.push(Planned { object: item, target: below });
        }
    }
    Ok(())
}

fn modified_unix(path: &Path) -> Option<i64> {
    let modified = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(crate::mtime::unix_nanos(modified).div_euclid(1_000_000_000))
}

/// Whether the local file at `path` holds the remote content (its blake3 is the server's): with
/// `--overwrite` the user asks for the server's bytes, so a copy damaged behind an unchanged size
/// and time is not trusted. `false` when the server keeps no blake3 for it.
async fn holds_remote_content(api: &Api, object: &Object, path: &Path) -> CliResult<bool> {
    let Some(remote_hash) = crate::remote::stored_blake3(api, &object.id).await? else { return Ok(false) };
    Ok(crate::upload::hash_file(path).await? == remote_hash)
}

async fn download(api: &Api, file: Planned, options: &GetOptions, progress: &Progress) -> CliResult<Value> {
    let Planned { object, target } = file;
    let remote_time = unix_of(&object.updated_at);
    let report = |status: &str, resumed_from: u64| {
        json!({"remote": object.path, "local": target.display().to_string(), "id": object.id,
               "size": object.size, "status": status, "resumed_from": resumed_from})
    };
    if let Ok(meta) = std::fs::metadata(&target) {
        if meta.is_file()
            && meta.len() == object.size
            && modified_unix(&target) == Some(remote_time)
            && (!options.overwrite || holds_remote_content(api, &object, &target).await?)
        {
            progress.total.inc(object.size);
            return Ok(report("unchanged", 0));
        }
        if meta.is_dir() || !options.overwrite {
            return Err(CliError::conflict(format!("{} exists", target.display()))
                .with_hint("pass --overwrite to replace it, or choose another local path"));
        }
    }
    if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
        tokio::fs::create_dir_all(parent).await.map_err(local_error("cannot create", parent))?;
    }
    let mut part_name = target.file_name().unwrap_or_default().to_owned();
    part_name.push(".part");
    let part = target.with_file_name(part_name);
    let resumed_from = fetch_verified(api, &object, &part, progress).await?;
    tokio::fs::rename(&part, &target).await.map_err(local_error("cannot rename", &part))?;
    // The remote time on the local file lets a second `get` see it is up to date.
    let modified = crate::mtime::from_unix_nanos(remote_time.saturating_mul(1_000_000_000));
    let _ = std::fs::File::options().write(true).open(&target).and_then(|f| f.set_modified(modified));
    Ok(report("downloaded", resumed_from))
}

/// Downloads `object` into the temporary file `part` (continuing a part an interrupted run left,
/// when its record says it holds the same content) and checks it is complete and the server's
/// content; answers how many bytes were already there and kept (0 after a restart). The caller
/// renames `part` into place.
pub async fn fetch_verified(api: &Api, object: &Object, part: &Path, progress: &Progress) -> CliResult<u64> {
    let absolute = std::path::absolute(part).unwrap_or_else(|_| part.to_owned());
    let credentials = api.credentials().await;
    let user = credentials.map(|c| c.user_id).unwrap_or_default();
    let record_path =
        resume_record_path("get", &format!("{}\n{user}\n{}\n{}", api.server, object.id, absolute.display()))?;
    let record = read_record::<GetRecord>(&record_path)?.filter(|r| r.size == object.size);
    let mut offset = match (&record, std::fs::metadata(part)) {
        (Some(_), Ok(meta)) if meta.len() <= object.size => meta.len(),
        _ => 0,
    };
    // Reported only while what was there is kept: a restart from byte 0 resumed nothing.
    let mut resumed_from = offset;
    let bar = if object.size > 0 { progress.file(&object.name, object.size) } else { indicatif::ProgressBar::hidden() };
    progress.advance(&bar, offset);
    let mut expected_etag = record.and_then(|r| r.etag);
    let mut attempt = 1;
    let etag = loop {
        match fetch(api, object, part, offset, expected_etag.as_deref(), &record_path, progress, &bar).await {
            Ok(Fetched::Complete(etag)) => break etag,
            Ok(Fetched::Restart) => {
                progress.retract(&bar, offset);
                offset = 0;
                resumed_from = 0;
                expected_etag = None;
            }
            Err(Interrupted { error, written_to }) if error.is_transient() && attempt < ATTEMPTS => {
                if offset == 0 {
                    expected_etag = read_record::<GetRecord>(&record_path)?.and_then(|r| r.etag);
                }
                offset = written_to;
                tokio::time::sleep(backoff(attempt)).await;
                attempt += 1;
            }
            Err(Interrupted { error, .. }) => return Err(error),
        }
    };
    bar.finish_and_clear();
    verify(part, object.size, etag.as_deref()).await.inspect_err(|_| {
        let _ = std::fs::remove_file(part);
        remove_record(&record_path);
    })?;
    remove_record(&record_path);
    Ok(resumed_from)
}

enum Fetched {
    /// The `.part` file holds the whole content; its `ETag`.
    Complete(Option<String>),
    /// The content changed since the `.part` file was begun: start over.
    Restart,
}

struct Interrupted {
    error: CliError,
    /// How many bytes the `.part` file holds now.
    written_to: u64,
}

/// One download request from `offset`, appended to `part`. A fresh download records what it
/// was begun from (`record_path`) before its first byte, so an interrupt leaves a resumable part.
#[allow(clippy::too_many_arguments)]
async fn fetch(
    api: &Api,
    object: &Object,
    part: &Path,
    offset: u64,
    expected_etag: Option<&str>,
    record_path: &Path,
    progress: &Progress,
    bar: &indicatif::ProgressBar,
) -> Result<Fetched, Interrupted> {
    let keep = |error: CliError| Interrupted { error, written_to: offset };
    if offset == object.size && offset > 0 {
        return Ok(Fetched::Complete(expected_etag.map(str::to_owned)));
    }
    let token: Value = api.json(Method::POST, &format!("/file/download/{}", object.id), None).await.map_err(keep)?;
    let url = api.site_url(token["url"].as_str().unwrap_or_default());
    let mut request = api.http.get(&url);
    if offset > 0 {
        request = request.header(RANGE, format!("bytes={offset}-"));
    }
    let response = request.send().await.map_err(|e| keep(CliError::network(&api.server, &e)))?;
    if response.status() == reqwest::StatusCode::RANGE_NOT_SATISFIABLE {
        return Ok(Fetched::Restart);
    }
    let response = checked(response).await.map_err(keep)?;
    let etag = response.headers().get(ETAG).and_then(|v| v.to_str().ok()).map(|v| v.trim_matches('"').to_owned());
    let partial = response.status() == reqwest::StatusCode::PARTIAL_CONTENT;
    if offset > 0 && (!partial || etag.as_deref() != expected_etag) {
        return Ok(Fetched::Restart);
    }
    if offset == 0 {
        tokio::fs::File::create(part).await.map_err(|e| keep(CliError::local("cannot create", part, e)))?;
        write_private_json(record_path, &GetRecord { etag: etag.clone(), size: object.size }).map_err(keep)?;
    }
    match append(part, response, progress, bar, offset).await {
        Ok(written) if written == object.size => Ok(Fetched::Complete(etag)),
        Ok(written) => Err(Interrupted {
            error: CliError::new(ExitKind::Network, "the download ended early"),
            written_to: written,
        }),
        Err(interrupted) => Err(interrupted),
    }
}

/// Appends the response body to `part` (which holds `offset` bytes); answers its new length.
async fn append(
    part: &Path,
    response: reqwest::Response,
    progress: &Progress,
    bar: &indicatif::ProgressBar,
    offset: u64,
) -> Result<u64, Interrupted> {
    let file = tokio::fs::OpenOptions::new()
        .append(true)
        .open(part)
        .await
        .map_err(|e| Interrupted { error: CliError::local("cannot open", part, e), written_to: offset })?;
    let mut writer = tokio::io::BufWriter::with_capacity(1 << 20, file);
    let mut written = offset;
    let mut body = response.bytes_stream();
    let mut failure = None;
    while let Some(piece) = body.next().await {
        match piece {
            Ok(piece) => {
                if let Err(e) = writer.write_all(&piece).await {
                    failure = Some(CliError::local("cannot write", part, e));
                    break;
                }
                written += piece.len() as u64;
                progress.advance(bar, piece.len() as u64);
                if testing::bytes_written(piece.len() as u64) {
                    let _ = writer.flush().await;
                    testing::stop_after_bytes();
                }
            }
            Err(e) => {
                failure = Some(CliError::network("the server", &e));
                break;
            }
        }
    }
    let flushed = writer.flush().await;
    if let Some(error) = failure {
        return Err(Interrupted { error, written_to: written });
    }
    flushed.map_err(|e| Interrupted { error: CliError::local("cannot write", part, e), written_to: written })?;
    Ok(written)
}

/// Checks the finished `.part` file: its length, and its blake3 when the `ETag` is one.
async fn verify(part: &Path, size: u64, etag: Option<&str>) -> CliResult<()> {
    let length = std::fs::metadata(part).map_err(local_error("cannot read", part))?.len();
    if length != size {
        return Err(CliError::new(ExitKind::Failed, format!("{} has {length} bytes, expected {size}", part.display())));
    }
    let Some(etag) = etag.filter(|e| e.len() == 64 && e.bytes().all(|b| b.is_ascii_hexdigit())) else {
        return Ok(());
    };
    let hash = crate::upload::hash_file(part).await?;
    if hash != etag {
        return Err(CliError::new(
            ExitKind::Failed,
            format!("{} does not match the server's content hash", part.display()),
        )
        .with_hint("run the same command again to download it afresh"));
    }
    Ok(())
}
