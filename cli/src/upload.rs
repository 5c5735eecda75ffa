//! `nubo put`: local files and folders into the remote tree. A file of at most one chunk goes
//! in one request (`POST /file/content`); a larger one through an upload session whose chunks
//! are sent several at a time, straight to the storage node when the session names one
//! (`direct`). A local resume record (server, user, remote path, size, mtime) keeps the
//! session's id, so running the same command again after an interrupt sends only the chunks
//! the server does not have. A file that is already there with the same content counts as
//! done, so an interrupted folder upload picks up where it stopped.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt, stream};
use indicatif::ProgressBar;
use reqwest::Method;
use reqwest::header::{CONTENT_LENGTH, CONTENT_TYPE};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::client::{ATTEMPTS, Api, backoff, checked, read_json};
use crate::config::{self, read_json as read_record, remove_record, resume_record_path, write_private_json};
use crate::error::{CliError, CliResult, ExitKind};
use crate::output::{Output, Progress};
use crate::remote::{self, FolderCache, Object, RemotePath, query_value};
use crate::testing;

/// Chunk size assumed when the server names no policy.
const DEFAULT_CHUNK: u64 = 8 * 1024 * 1024;

pub struct PutOptions {
    /// Replace the content of a file of the same name.
    pub overwrite: bool,
    /// Requests carrying bytes in flight at once (chunks and small files together).
    pub parallel: usize,
}

/// One local file and where it goes.
pub struct Planned {
    pub local: PathBuf,
    /// The remote folder it goes into, from the user's root.
    pub parent: RemotePath,
    pub name: String,
    pub size: u64,
    pub modified_ms: i64,
    /// Replace the content of a remote file of the same name.
    pub overwrite: bool,
    /// The content's blake3 when known: the server then makes the file at once from content
    /// the user already has, without the bytes being sent again.
    pub blake3: Option<String>,
    /// With `overwrite`: the content the remote file must still have for the upload to replace
    /// it (else 409 `object.changed`), so a change made there meanwhile is never overwritten.
    pub replaces_blake3: Option<String>,
}

/// What `put` (and `sync`) need while files are in flight.
pub struct Put<'a> {
    api: &'a Api,
    options: &'a PutOptions,
    progress: Progress,
    permits: Arc<Semaphore>,
    folders: FolderCache,
    /// Files up to this size go in one request.
    single_max: u64,
    user_id: String,
}

#[derive(Debug, Deserialize)]
struct Session {
    id: String,
    file_size: u64,
    chunk_size: u64,
    total_chunks: u32,
    #[serde(default)]
    uploaded: Vec<u32>,
    object: Option<Object>,
    direct: Option<Direct>,
}

#[derive(Debug, Clone, Deserialize)]
struct Direct {
    url: String,
    credential: String,
}

/// A storage node's view of a direct upload (`GET {direct.url}`, and its chunk answers).
#[derive(Debug, Deserialize)]
struct NodeStatus {
    #[serde(default)]
    received: Vec<u32>,
    #[serde(default)]
    result: Option<NodeOutcome>,
}

/// The master's answer to the node's report, relayed.
#[derive(Debug, Deserialize)]
struct NodeOutcome {
    status: u16,
    body: Value,
}

#[derive(Debug, Serialize, Deserialize)]
struct PutRecord {
    session_id: String,
}

fn metadata(path: &Path) -> CliResult<std::fs::Metadata> {
    std::fs::metadata(path).map_err(|err| CliError::local("cannot read", path, err))
}

fn file_name_of(path: &Path) -> CliResult<String> {
    let absolute = std::path::absolute(path).map_err(|err| CliError::local("cannot resolve", path, err))?;
    let canonical = std::fs::canonicalize(&absolute).unwrap_or(absolute);
    canonical
        .file_name()
        .and_then(|n| n.to_str())
        .map(str::to_owned)
        .ok_or_else(|| CliError::usage(format!("{} has no usable name", path.display())))
}

fn planned(local: PathBuf, parent: RemotePath, name: String, meta: &std::fs::Metadata) -> Planned {
    let modified_ms = crate::mtime::of_metadata(meta).div_euclid(1_000_000);
    Planned {
        local,
        parent,
        name,
        size: meta.len(),
        modified_ms,
        overwrite: false,
        blake3: None,
        replaces_blake3: None,
    }
}

/// Adds the files below `dir` (to go below `remote`) and the folders to make.
fn walk(dir: &Path, remote: &RemotePath, files: &mut Vec<Planned>, folders: &mut Vec<RemotePath>) -> CliResult<()> {
    folders.push(remote.clone());
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(|err| CliError::local("cannot read", dir, err))?
        .collect::<Result<_, _>>()
        .map_err(|err| CliError::local("cannot read", dir, err))?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            eprintln!("warning: skipped {}: its name is not UTF-8", path.display());
            continue;
        };
        let meta = metadata(&path)?;
        if meta.is_dir() {
            walk(&path, &remote.join(&name), files, folders)?;
        } else if meta.is_file() {
            files.push(planned(path, remote.clone(), name, &meta));
        } else {
            eprintln!("warning: skipped {}: not a regular file", path.display());
        }
    }
    Ok(())
}

/// Uploads `sources` to `destination`; answers one JSON line per file.
pub async fn put(
    api: &Api,
    sources: &[PathBuf],
    destination: &str,
    options: &PutOptions,
    output: Output,
) -> CliResult<Vec<Value>> {
    let destination = RemotePath::parse(destination);
    let existing = remote::lookup(api, &destination).await?;
    let into_folder = match &existing {
        Some(object) => object.is_folder(),
        None => sources.len() > 1 || destination.folder_hint,
    };
    let mut files: Vec<Planned> = Vec::new();
    let mut folders = Vec::new();
    if into_folder {
        folders.push(destination.clone());
    }
    for source in sources {
        let meta = metadata(source)?;
        let (parent, name) = if into_folder {
            (destination.clone(), file_name_of(source)?)
        } else {
            let name = destination.name().unwrap_or_default().to_owned();
            (destination.parent(), name)
        };
        if meta.is_dir() {
            if existing.as_ref().is_some_and(|o| !o.is_folder()) {
                return Err(CliError::conflict(format!("{} is a file, not a folder", destination.display())));
            }
            walk(source, &parent.join(&name), &mut files, &mut folders)?;
        } else if meta.is_file() {
            files.push(planned(source.clone(), parent, name, &meta));
        } else {
            return Err(CliError::usage(format!("{} is not a file or a folder", source.display())));
        }
    }
    for file in &mut files {
        file.overwrite = options.overwrite;
    }
    let total: u64 = files.iter().map(|f| f.size).sum();
    let put = Put::new(api, options, Progress::new(output, "put", total, files.len())).await?;
    // Parents before children: the walk lists each folder before what is inside it.
    for folder in &folders {
        put.folders.ensure(api, folder).await?;
    }
    let results = stream::iter(files)
        .map(|file| put.file(file))
        .buffer_unordered(options.parallel.max(1))
        .try_collect::<Vec<Value>>()
        .await;
    put.progress.finish();
    results
}

impl<'a> Put<'a> {
    /// Transfers with `options.parallel` requests carrying bytes at once, counted on `progress`.
    pub async fn new(api: &'a Api, options: &'a PutOptions, progress: Progress) -> CliResult<Put<'a>> {
        let credentials = api.credentials().await.ok_or_else(|| CliError::auth_needed("not signed in"))?;
        let policies: Vec<Value> = api.get("/user/settings/policies").await?;
        let chunk = policies.first().and_then(|p| p["chunk_size"].as_u64()).unwrap_or(DEFAULT_CHUNK);
        Ok(Put {
            api,
            options,
            progress,
            permits: Arc::new(Semaphore::new(options.parallel.max(1))),
            folders: FolderCache::default(),
            single_max: chunk,
            user_id: credentials.user_id,
        })
    }

    /// Uploads one file into the remote folder `parent` (which is at `file.parent`): in one
    /// request when small, its content not known to the server and nothing it must replace,
    /// else through a session (resumable; made at once when `file.blake3` names content the user
    /// already has; completed only while the replaced file has `file.replaces_blake3`).
    /// Answers the file and how it went (`single`, `session`, `direct`, `known`).
    pub async fn upload_into(&self, file: &Planned, parent: &Object) -> CliResult<(Object, &'static str)> {
        let bar =
            if file.size > self.single_max { self.progress.file(&file.name, file.size) } else { ProgressBar::hidden() };
        let outcome = if file.size <= self.single_max && file.blake3.is_none() && file.replaces_blake3.is_none() {
            self.single(file, parent).await
        } else {
            self.session(file, parent, &bar).await
        };
        bar.finish_and_clear();
        outcome.map(|(object, how)| {
            let method =
                if how.chunks_sent == 0 && how.method != "single" && !how.resumed { "known" } else { how.method };
            (object, method)
        })
    }

    async fn file(&self, file: Planned) -> CliResult<Value> {
        let parent = self.folders.ensure(self.api, &file.parent).await?;
        let remote_path = file.parent.join(&file.name);
        let bar =
            if file.size > self.single_max { self.progress.file(&file.name, file.size) } else { ProgressBar::hidden() };
        let outcome = if file.size <= self.single_max {
            self.single(&file, &parent).await
        } else {
            self.session(&file, &parent, &bar).await
        };
        bar.finish_and_clear();
        let (object, how) = match outcome {
            Ok(done) => done,
            Err(err) if err.code.as_deref() == Some("object.name_taken") && !file.overwrite => {
                match self.unchanged(&remote_path, &file).await? {
                    Some(object) => {
                        self.progress.total.inc(file.size);
                        (object, Transfer::unchanged())
                    }
                    None => {
                        return Err(err.with_hint(format!(
                            "{} exists with other content (or is a folder): pass --overwrite to replace a file's content",
                            remote_path.display()
                        )));
                    }
                }
            }
            Err(err) => return Err(err),
        };
        Ok(json!({
            "local": file.local.display().to_string(),
            "remote": remote_path.display(),
            "id": object.id,
            "size": file.size,
            "method": how.method,
            "status": how.status,
            "resumed": how.resumed,
            "chunks_sent": how.chunks_sent,
            "total_chunks": how.total_chunks,
        }))
    }

    /// The remote file when it already holds exactly the local file's bytes.
    async fn unchanged(&self, remote_path: &RemotePath, file: &Planned) -> CliResult<Option<Object>> {
        let Some(object) = remote::lookup(self.api, remote_path).await? else { return Ok(None) };
        if object.is_folder() || object.size != file.size {
            return Ok(None);
        }
        let Some(remote_hash) = remote::stored_blake3(self.api, &object.id).await? else { return Ok(None) };
        let local_hash = hash_file(&file.local).await?;
        Ok((local_hash == remote_hash).then_some(object))
    }

    /// A small file in one request; with `--overwrite`, a taken name has its content replaced.
    async fn single(&self, file: &Planned, parent: &Object) -> CliResult<(Object, Transfer)> {
        let bytes = Bytes::from(
            tokio::fs::read(&file.local).await.map_err(|e| CliError::local("cannot read", &file.local, e))?,
        );
        let _permit = self.permits.acquire().await.expect("the semaphore stays open");
        let url = self.api.url(&format!("/file/content?parent_id={}&name={}", parent.id, query_value(&file.name)));
        let created = self.send_bytes(Method::POST, &url, &bytes).await;
        let object = match created {
            Ok(object) => object,
            Err(err) if err.code.as_deref() == Some("object.name_taken") && file.overwrite => {
                let existing = remote::require(self.api, &file.parent.join(&file.name)).await?;
                if existing.is_folder() {
                    return Err(err);
                }
                let url = self.api.url(&format!("/file/content?id={}", existing.id));
                self.send_bytes(Method::PATCH, &url, &bytes).await?
            }
            Err(err) => return Err(err),
        };
        self.progress.total.inc(file.size);
        testing::chunk_sent();
        Ok((object, Transfer { method: "single", status: "uploaded", resumed: false, chunks_sent: 1, total_chunks: 1 }))
    }

    /// Sends `bytes` as the whole body; a broken connection is tried again (a retried create
    /// that had in fact landed then answers 409, which the caller resolves by content).
    async fn send_bytes(&self, method: Method, url: &str, bytes: &Bytes) -> CliResult<Object> {
        let mut attempt = 1;
        loop {
            let sent = self
                .api
                .send(|http| {
                    http.request(method.clone(), url)
                        .header(CONTENT_TYPE, "application/octet-stream")
                        .header(CONTENT_LENGTH, bytes.len())
                        .body(bytes.clone())
                })
                .await;
            match sent {
                // The file is stored, but this answer never reaches us: a retry, as after a
                // broken connection.
                Ok(response) if testing::lose_upload_answer() && attempt < ATTEMPTS => {
                    drop(response);
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
                Ok(response) => return read_json(&self.api.server, response).await,
                Err(err) if err.is_transient() && attempt < ATTEMPTS => {
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// A large file through an upload session, resumed when a record names one.
    async fn session(&self, file: &Planned, parent: &Object, bar: &ProgressBar) -> CliResult<(Object, Transfer)> {
        let local = std::path::absolute(&file.local).unwrap_or_else(|_| file.local.clone());
        let remote_path = file.parent.join(&file.name);
        let key = format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            self.api.server,
            self.user_id,
            remote_path.display(),
            file.size,
            file.modified_ms,
            local.display()
        );
        let record = resume_record_path("put", &key)?;
        let mut resumed = None;
        if let Some(PutRecord { session_id }) = read_record::<PutRecord>(&record)? {
            match self.api.get::<Session>(&format!("/file/upload/{session_id}")).await {
                Ok(session) if session.file_size == file.size => resumed = Some(session),
                Ok(_) => remove_record(&record),
                Err(err) if matches!(err.status, Some(404 | 410)) => remove_record(&record),
                Err(err) => return Err(err),
            }
        }
        let was_resumed = resumed.is_some();
        let session = match resumed {
            Some(session) => session,
            None => {
                let mut request = json!({"file_name": file.name, "file_size": file.size, "parent_id": parent.id,
                                     "overwrite": file.overwrite});
                if let Some(hash) = &file.blake3 {
                    request["blake3"] = json!(hash);
                }
                if let Some(hash) = file.replaces_blake3.as_ref().filter(|_| file.overwrite) {
                    request["replaces_blake3"] = json!(hash);
                }
                let session: Session = self.api.json(Method::POST, "/file/upload", Some(&request)).await?;
                write_private_json(&record, &PutRecord { session_id: session.id.clone() })?;
                session
            }
        };
        if let Some(object) = session.object.clone() {
            config::remove_record(&record);
            return Ok((object, Transfer::session(&session, was_resumed, 0)));
        }
        let received = match &session.direct {
            Some(direct) => {
                let status = self.node_status(direct).await?;
                if let Some(outcome) = status.result {
                    let object = relayed(outcome)?;
                    remove_record(&record);
                    return Ok((object, Transfer::session(&session, was_resumed, 0)));
                }
                status.received
            }
            None => session.uploaded.clone(),
        };
        let missing: Vec<u32> = (0..session.total_chunks).filter(|i| !received.contains(i)).collect();
        let already: u64 = received.iter().map(|&i| chunk_len(&session, i)).sum();
        // A session that kept no byte is a fresh start, whatever record named it.
        let was_resumed = was_resumed && already > 0;
        self.progress.advance(bar, already);
        let sent = AtomicU64::new(0);
        let completed: Vec<Option<Object>> = stream::iter(missing.iter().copied())
            .map(|index| {
                let (sent, session, bar) = (&sent, &session, bar);
                async move {
                    let answer = self.chunk(session, &file.local, index, bar).await;
                    sent.fetch_add(1, Ordering::Relaxed);
                    answer
                }
            })
            .buffer_unordered(self.options.parallel.max(1))
            .try_collect()
            .await?;
        let object = match completed.into_iter().flatten().next() {
            Some(object) => object,
            None => self.finish(&session, &remote_path).await?,
        };
        remove_record(&record);
        Ok((object, Transfer::session(&session, was_resumed, sent.load(Ordering::Relaxed) as u32)))
    }

    async fn node_status(&self, direct: &Direct) -> CliResult<NodeStatus> {
        let response = self
            .api
            .http
            .get(&direct.url)
            .bearer_auth(&direct.credential)
            .send()
            .await
            .map_err(|e| CliError::network(&direct.url, &e))?;
        read_json(&direct.url, checked(response).await?).await
    }

    /// Sends chunk `index`; answers the created file when this chunk completed the upload.
    async fn chunk(&self, session: &Session, local: &Path, index: u32, bar: &ProgressBar) -> CliResult<Option<Object>> {
        let _permit = self.permits.acquire().await.expect("the semaphore stays open");
        let offset = u64::from(index) * session.chunk_size;
        let bytes = read_at(local, offset, chunk_len(session, index)).await?;
        let mut attempt = 1;
        loop {
            let counted = Arc::new(AtomicU64::new(0));
            let answer = self.send_chunk(session, index, &bytes, bar, &counted).await;
            match answer {
                Ok(object) => {
                    testing::chunk_sent();
                    return Ok(object);
                }
                Err(err) if err.is_transient() && attempt < ATTEMPTS => {
                    self.progress.retract(bar, counted.load(Ordering::Relaxed));
                    tokio::time::sleep(backoff(attempt)).await;
                    attempt += 1;
                }
                Err(err) => return Err(err),
            }
        }
    }

    async fn send_chunk(
        &self,
        session: &Session,
        index: u32,
        bytes: &Bytes,
        bar: &ProgressBar,
        counted: &Arc<AtomicU64>,
    ) -> CliResult<Option<Object>> {
        let body = || counting_body(bytes.clone(), self.progress.clone(), bar.clone(), counted.clone());
        match &session.direct {
            Some(direct) => {
                let url = format!("{}/{index}", direct.url);
                let response = self
                    .api
                    .http
                    .put(&url)
                    .bearer_auth(&direct.credential)
                    .header(CONTENT_TYPE, "application/octet-stream")
                    .header(CONTENT_LENGTH, bytes.len())
                    .body(body())
                    .send()
                    .await
                    .map_err(|e| CliError::network(&direct.url, &e))?;
                let accepted = response.status() == reqwest::StatusCode::ACCEPTED;
                let answer: Value = read_json(&direct.url, checked(response).await?).await?;
                if accepted {
                    // The node completed the blob; the master has not confirmed yet.
                    return self.await_node(direct).await.map(Some);
                }
                if answer["object"].is_object() {
                    return serde_json::from_value(answer["object"].clone()).map(Some).map_err(unexpected);
                }
                if answer["completed"] == true {
                    // Completed, and the file was deleted since: nothing to name.
                    return Err(CliError::new(ExitKind::Failed, "the upload completed but its file is gone"));
                }
                Ok(None)
            }
            None => {
                let url = self.api.url(&format!("/file/upload/{}/{index}", session.id));
                let response = self
                    .api
                    .send(|http| {
                        http.put(&url)
                            .header(CONTENT_TYPE, "application/octet-stream")
                            .header(CONTENT_LENGTH, bytes.len())
                            .body(body())
                    })
                    .await;
                let answer = match response {
                    Ok(response) => read_json::<Session>(&self.api.server, response).await,
                    Err(err) => Err(err),
                };
                match answer {
                    Ok(answer) => Ok(answer.object),
                    // Two last chunks arrived together: the other one completes the upload.
                    Err(err) if err.code.as_deref() == Some("upload.not_open") => Ok(None),
                    Err(err) => Err(err),
                }
            }
        }
    }

    /// Every chunk is in but no answer named the file (its last chunk's answer was lost):
    /// complete through the master, or read the outcome from the node.
    async fn finish(&self, session: &Session, remote_path: &RemotePath) -> CliResult<Object> {
        let Some(direct) = &session.direct else {
            for attempt in 1..=20 {
                let path = format!("/file/upload/{}/complete", session.id);
                match self.api.json::<Session>(Method::POST, &path, None).await {
                    Ok(done) => return done.object.ok_or_else(|| unexpected("the completed upload names no file")),
                    // Another request is completing it: wait for its outcome.
                    Err(err) if err.code.as_deref() == Some("upload.not_open") && attempt < 20 => {
                        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
                    }
                    // Completed (and the session gone) by the other request.
                    Err(err) if err.code.as_deref() == Some("upload.not_found") => {
                        return remote::require(self.api, remote_path).await;
                    }
                    Err(err) => return Err(err),
                }
            }
            return Err(unexpected("the upload never completed"));
        };
        self.await_node(direct).await
    }

    /// Asks the node for the master's answer to its report until there is one (a minute).
    async fn await_node(&self, direct: &Direct) -> CliResult<Object> {
        for _ in 0..120 {
            let status = self.node_status(direct).await?;
            if let Some(outcome) = status.result {
                return relayed(outcome);
            }
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        }
        Err(CliError::new(ExitKind::Failed, "the storage node has the file but the server has not confirmed it")
            .with_hint("run the same command again in a while to see the outcome"))
    }
}

/// The file from the master's answer the node relays, or its refusal as an error.
fn relayed(outcome: NodeOutcome) -> CliResult<Object> {
    if outcome.status == 200 && outcome.body["object"].is_object() {
        return serde_json::from_value(outcome.body["object"].clone()).map_err(unexpected);
    }
    Err(CliError::from_answer(outcome.status, &outcome.body.to_string()))
}

fn unexpected(err: impl std::fmt::Display) -> CliError {
    CliError::new(ExitKind::Failed, format!("the server's answer is not what this client expects: {err}"))
}

/// How one file went up, for the JSON report.
struct Transfer {
    method: &'static str,
    status: &'static str,
    resumed: bool,
    chunks_sent: u32,
    total_chunks: u32,
}

impl Transfer {
    fn unchanged() -> Transfer {
        Transfer { method: "none", status: "unchanged", resumed: false, chunks_sent: 0, total_chunks: 0 }
    }

    fn session(session: &Session, resumed: bool, chunks_sent: u32) -> Transfer {
        let method = if session.direct.is_some() { "direct" } else { "session" };
        Transfer { method, status: "uploaded", resumed, chunks_sent, total_chunks: session.total_chunks }
    }
}

fn chunk_len(session: &Session, index: u32) -> u64 {
    let start = u64::from(index) * session.chunk_size;
    session.chunk_size.min(session.file_size.saturating_sub(start))
}

/// The body of a chunk, counted on the bars as it is handed to the connection.
fn counting_body(bytes: Bytes, progress: Progress, bar: ProgressBar, counted: Arc<AtomicU64>) -> reqwest::Body {
    const PIECE: usize = 256 * 1024;
    let pieces: Vec<Bytes> =
        (0..bytes.len()).step_by(PIECE).map(|s| bytes.slice(s..(s + PIECE).min(bytes.len()))).collect();
    reqwest::Body::wrap_stream(stream::iter(pieces).map(move |piece| {
        progress.advance(&bar, piece.len() as u64);
        counted.fetch_add(piece.len() as u64, Ordering::Relaxed);
        Ok::<Bytes, std::io::Error>(piece)
    }))
}

/// `len` bytes of `path` from `offset`.
async fn read_at(path: &Path, offset: u64, len: u64) -> CliResult<Bytes> {
    let owned = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let file = std::fs::File::open(&owned)?;
        let mut buffer = vec![0; len as usize];
        read_exact_at(&file, &mut buffer, offset)?;
        Ok::<Bytes, std::io::Error>(Bytes::from(buffer))
    })
    .await
    .map_err(|e| CliError::new(ExitKind::Failed, e.to_string()))?
    .map_err(|err| CliError::local("cannot read", path, err))
}

#[cfg(unix)]
fn read_exact_at(file: &std::fs::File, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
}

#[cfg(not(unix))]
fn read_exact_at(mut file: &std::fs::File, buffer: &mut [u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(offset))?;
    file.read_exact(buffer)
}

/// blake3 of a local file, hex.
pub async fn hash_file(path: &Path) -> CliResult<String> {
    let owned = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut hasher = blake3::Hasher::new();
        hasher.update_reader(std::fs::File::open(&owned)?)?;
        Ok::<String, std::io::Error>(hasher.finalize().to_hex().to_string())
    })
    .await
    .map_err(|e| CliError::new(ExitKind::Failed, e.to_string()))?
    .map_err(|err| CliError::local("cannot read", path, err))
}
