//! The commands other than the transfers: signing in and out, listing, folders, moving,
//! copying, removing, shares and search. Each answers the JSON it prints with `--json`, and
//! prints its human form itself otherwise.

use std::io::{BufRead, IsTerminal, Write};

use reqwest::Method;
use serde_json::{Value, json};

use crate::client::{Api, now_unix, unix_of};
use crate::config::Credentials;
use crate::error::{CliError, CliResult, ExitKind};
use crate::output::{Output, human_size, short_time};
use crate::remote::{self, FolderCache, Object, RemotePath, query_value};

/// How the password and the second factor reach `login`.
pub struct LoginInput {
    pub server: String,
    pub email: Option<String>,
    pub password_stdin: bool,
    pub totp: Option<String>,
}

fn prompt_line(question: &str) -> CliResult<String> {
    eprint!("{question}");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| CliError::new(ExitKind::Failed, format!("cannot read standard input: {e}")))?;
    Ok(line.trim().to_owned())
}

fn no_terminal(what: &str, option: &str) -> CliError {
    CliError::usage(format!("{what} is needed and standard input is not a terminal"))
        .with_hint(format!("pass {option}"))
}

pub async fn login(input: LoginInput, output: Output) -> CliResult<Value> {
    let api = Api::anonymous(&input.server);
    let interactive = std::io::stdin().is_terminal();
    let email = match input.email {
        Some(email) => email,
        None if interactive => prompt_line("E-mail: ")?,
        None => return Err(no_terminal("the e-mail address", "--email")),
    };
    let password = if input.password_stdin {
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| CliError::new(ExitKind::Failed, format!("cannot read standard input: {e}")))?;
        line.trim_end_matches(['\r', '\n']).to_owned()
    } else if interactive {
        rpassword::prompt_password("Password: ")
            .map_err(|e| CliError::new(ExitKind::Failed, format!("cannot read the password: {e}")))?
    } else {
        return Err(no_terminal("the password", "--password-stdin"));
    };
    let mut body = json!({"provider": "email_password", "identifier": email, "credential": password});
    if let Some(code) = &input.totp {
        body["two_fa_code"] = json!(code);
    }
    let answer: Value = match api.json(Method::POST, "/user/session", Some(&body)).await {
        Ok(answer) => answer,
        Err(err) if err.code.as_deref() == Some("auth.two_factor_required") => {
            // Asked only when the password was right and the account has a second factor on.
            if !interactive || input.password_stdin {
                let mut asked =
                    err.with_hint("pass --totp CODE (the six digits of your authenticator app, or a recovery code)");
                asked.kind = ExitKind::AuthNeeded;
                return Err(asked);
            }
            body["two_fa_code"] = json!(prompt_line("Two-factor code: ")?);
            api.json(Method::POST, "/user/session", Some(&body)).await?
        }
        Err(err) => return Err(crate::client::explain_https_failure(&api, err).await),
    };
    let text = |key: &str| answer[key].as_str().unwrap_or_default().to_owned();
    let credentials = Credentials {
        server: api.server.clone(),
        email: email.clone(),
        user_id: answer["user"]["id"].as_str().unwrap_or_default().to_owned(),
        access_token: text("access_token"),
        access_expires: unix_of(&text("access_expires")),
        refresh_token: text("refresh_token"),
        refresh_expires: unix_of(&text("refresh_expires")),
    };
    if credentials.access_token.is_empty() || credentials.refresh_token.is_empty() {
        return Err(CliError::new(ExitKind::Failed, "the sign-in answer carries no tokens"));
    }
    credentials.save()?;
    if !output.json {
        println!("Signed in to {} as {email}.", api.server);
    }
    Ok(json!({"server": api.server, "email": email, "user_id": credentials.user_id}))
}

pub async fn logout(output: Output) -> CliResult<Value> {
    let Some(credentials) = Credentials::load()? else {
        if !output.json {
            println!("Not signed in.");
        }
        return Ok(json!({"signed_out": false}));
    };
    // End the session on the server too; the local copy goes whatever it answers.
    let api = Api::anonymous(&credentials.server);
    let ended = api
        .http
        .delete(api.url("/user/session"))
        .bearer_auth(&credentials.refresh_token)
        .send()
        .await
        .is_ok_and(|r| r.status().is_success());
    Credentials::remove()?;
    if !output.json {
        println!("Signed out of {}.", credentials.server);
    }
    Ok(json!({"signed_out": true, "server": credentials.server, "server_session_ended": ended}))
}

pub async fn whoami(api: &Api, output: Output) -> CliResult<Value> {
    let me: Value = api.get("/user/me").await?;
    let credentials = api.credentials().await;
    if !output.json {
        let server = credentials.as_ref().map(|c| c.server.as_str()).unwrap_or_default();
        println!("{} on {server}", me["email"].as_str().or(me["nickname"].as_str()).unwrap_or_default());
        if let Some(c) = &credentials {
            let left = c.access_expires - now_unix();
            println!("access token valid for {} more minute(s)", left.max(0) / 60);
        }
    }
    Ok(me)
}

fn print_objects(objects: &[Object]) {
    for object in objects {
        let (kind, size) = if object.is_folder() { ('d', "-".to_owned()) } else { ('-', human_size(object.size)) };
        let slash = if object.is_folder() { "/" } else { "" };
        println!("{kind} {size:>10}  {}  {}{slash}", short_time(&object.updated_at), object.name);
    }
}

pub async fn ls(api: &Api, path: &str, output: Output) -> CliResult<Value> {
    let path = RemotePath::parse(path);
    let object = remote::require(api, &path).await?;
    if !object.is_folder() {
        if !output.json {
            print_objects(std::slice::from_ref(&object));
        }
        return Ok(json!({"folder": null, "items": [object]}));
    }
    let (folder, items) = remote::list_folder(api, &path)
        .await?
        .ok_or_else(|| CliError::not_found(format!("nothing at {}", path.display())))?;
    if !output.json {
        print_objects(&items);
    }
    Ok(json!({"folder": folder, "items": items}))
}

pub async fn mkdir(api: &Api, paths: &[String], parents: bool, output: Output) -> CliResult<Value> {
    let cache = FolderCache::default();
    let mut made = Vec::new();
    for raw in paths {
        let path = RemotePath::parse(raw);
        let name = path.name().ok_or_else(|| CliError::usage("the root exists already"))?.to_owned();
        let folder = if parents {
            cache.ensure(api, &path).await?
        } else {
            let parent = remote::require(api, &path.parent()).await?;
            if !parent.is_folder() {
                return Err(CliError::conflict(format!("{} is a file", path.parent().display())));
            }
            remote::create_folder(api, &parent.id, &name).await?
        };
        if !output.json {
            println!("{}", path.display());
        }
        made.push(folder);
    }
    Ok(json!(made))
}

/// Sources and where they go: into an existing folder, or (one source) to a new path.
enum Target {
    Into(Object),
    Renamed { parent: Object, name: String },
}

async fn target_of(api: &Api, sources: usize, destination: &str) -> CliResult<Target> {
    let path = RemotePath::parse(destination);
    match remote::lookup(api, &path).await? {
        Some(folder) if folder.is_folder() => Ok(Target::Into(folder)),
        Some(_) => Err(CliError::conflict(format!("{} exists", path.display()))
            .with_hint("remove it first with `nubo rm`, or name a folder to move into")),
        None if sources > 1 || path.folder_hint => Err(CliError::not_found(format!("no folder at {}", path.display()))
            .with_hint("make it first with `nubo mkdir -p`")),
        None => {
            let parent = remote::require(api, &path.parent()).await?;
            let name = path.name().unwrap_or_default().to_owned();
            Ok(Target::Renamed { parent, name })
        }
    }
}

async fn resolve_all(api: &Api, sources: &[String]) -> CliResult<Vec<Object>> {
    let mut objects = Vec::new();
    for source in sources {
        let path = RemotePath::parse(source);
        if path.is_root() {
            return Err(CliError::usage("the root folder cannot be moved, copied or removed"));
        }
        objects.push(remote::require(api, &path).await?);
    }
    Ok(objects)
}

async fn rename(api: &Api, id: &str, name: &str) -> CliResult<Object> {
    api.json(Method::PATCH, &format!("/object/{id}"), Some(&json!({"name": name}))).await
}

async fn move_into(api: &Api, id: &str, folder_id: &str) -> CliResult<()> {
    api.json::<Value>(Method::PATCH, "/object", Some(&json!({"src_ids": [id], "dst_id": folder_id}))).await.map(drop)
}

/// Removes objects for good: to the trash, then out of it.
async fn purge(api: &Api, ids: &[&str]) -> CliResult<()> {
    let body = json!({"ids": ids});
    api.json::<Value>(Method::DELETE, "/object", Some(&body)).await?;
    api.json::<Value>(Method::DELETE, "/trash", Some(&body)).await.map(drop)
}

/// A name nobody else uses, for an object on its way (`.nubo-transit-` and 16 hex digits).
fn transit_name(object_id: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let seed = format!("{object_id}\n{}\n{nanos}", std::process::id());
    format!(".nubo-transit-{}", &blake3::hash(seed.as_bytes()).to_hex()[..16])
}

/// Moves `object` into the folder `parent` under `name`. The server moves and renames in two
/// requests, and either order can collide (renamed first, with `name` taken where it is; moved
/// first, with its old name taken there), so it travels under a transit name: renamed to it
/// where it is, moved, renamed to `name`. A refused step undoes the ones before it.
async fn move_renamed(api: &Api, object: &Object, parent: &Object, name: &str) -> CliResult<()> {
    let transit = transit_name(&object.id);
    rename(api, &object.id, &transit).await?;
    if let Err(err) = move_into(api, &object.id, &parent.id).await {
        let back = rename(api, &object.id, &object.name).await;
        return Err(undone(err, back, &object.path, &format!("{}/{transit}", parent_path(&object.path))));
    }
    if let Err(err) = rename(api, &object.id, name).await {
        let origin = object.rest.get("parent_id").and_then(Value::as_str).unwrap_or_default();
        let back = match move_into(api, &object.id, origin).await {
            Ok(()) => rename(api, &object.id, &object.name).await,
            Err(failed) => Err(failed),
        };
        return Err(undone(err, back, &object.path, &format!("{}/{transit}", parent.path.trim_end_matches('/'))));
    }
    Ok(())
}

/// `err`, and when undoing failed too (`undo`), where the object at `path` waits now.
fn undone<T>(err: CliError, undo: CliResult<T>, path: &str, waiting: &str) -> CliError {
    match undo {
        Ok(_) => err,
        Err(_) => err.with_hint(format!("{path} could not be put back: it is at {waiting}; move it with `nubo mv`")),
    }
}

/// The folder part of a server path (`/a/b.txt` -> `/a`; the root's children -> ``).
fn parent_path(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(parent, _)| parent)
}

/// Copies `object` into the folder `parent` (its own one too) under `name`. A copy takes its
/// original's name, which may be taken in `parent`, so it is made in a fresh staging folder
/// there, renamed in it and moved out; the staging folder is then removed for good, and with
/// the copy inside when a step was refused.
async fn copy_renamed(api: &Api, object: &Object, parent: &Object, name: &str) -> CliResult<Object> {
    let staging = remote::create_folder(api, &parent.id, &transit_name(&object.id)).await?;
    let copied = async {
        let body = json!({"src_ids": [object.id], "dst_id": staging.id});
        let copies: Vec<Object> = api.json(Method::POST, "/object/copies", Some(&body)).await?;
        let copy = copies
            .into_iter()
            .next()
            .ok_or_else(|| CliError::new(ExitKind::Failed, "the server answered the copy with no object"))?;
        let copy = rename(api, &copy.id, name).await?;
        move_into(api, &copy.id, &parent.id).await?;
        Ok::<Object, CliError>(copy)
    }
    .await;
    let left = purge(api, &[staging.id.as_str()]).await.is_err();
    let left_hint = format!("the staging folder {} is left behind: remove it with `nubo rm -r --purge`", staging.path);
    match copied {
        Ok(mut copy) => {
            copy.path = format!("{}/{name}", parent.path.trim_end_matches('/'));
            copy.rest.insert("parent_id".to_owned(), json!(parent.id));
            if left {
                eprintln!("warning: {left_hint}");
            }
            Ok(copy)
        }
        Err(err) if left => Err(err.with_hint(left_hint)),
        Err(err) => Err(err),
    }
}

fn ids(objects: &[Object]) -> Vec<&str> {
    objects.iter().map(|o| o.id.as_str()).collect()
}

pub async fn mv(api: &Api, sources: &[String], destination: &str, output: Output) -> CliResult<Value> {
    let objects = resolve_all(api, sources).await?;
    let moved = match target_of(api, objects.len(), destination).await? {
        Target::Into(folder) => {
            let body = json!({"src_ids": ids(&objects), "dst_id": folder.id});
            api.json::<Value>(Method::PATCH, "/object", Some(&body)).await?;
            objects.iter().map(|o| json!({"id": o.id, "from": o.path, "to": format!("{}/{}", folder.path.trim_end_matches('/'), o.name)})).collect()
        }
        Target::Renamed { parent, name } => {
            let object = &objects[0];
            let same_folder = object.rest.get("parent_id").and_then(Value::as_str) == Some(parent.id.as_str());
            if same_folder {
                rename(api, &object.id, &name).await?;
            } else if name == object.name {
                move_into(api, &object.id, &parent.id).await?;
            } else {
                move_renamed(api, object, &parent, &name).await?;
            }
            vec![
                json!({"id": object.id, "from": object.path, "to": format!("{}/{name}", parent.path.trim_end_matches('/'))}),
            ]
        }
    };
    if !output.json {
        for entry in &moved {
            println!("{} -> {}", entry["from"].as_str().unwrap_or_default(), entry["to"].as_str().unwrap_or_default());
        }
    }
    Ok(json!(moved))
}

pub async fn cp(api: &Api, sources: &[String], destination: &str, output: Output) -> CliResult<Value> {
    let objects = resolve_all(api, sources).await?;
    let copies: Vec<Object> = match target_of(api, objects.len(), destination).await? {
        Target::Into(folder) => {
            let body = json!({"src_ids": ids(&objects), "dst_id": folder.id});
            api.json(Method::POST, "/object/copies", Some(&body)).await?
        }
        Target::Renamed { parent, name } => {
            let object = &objects[0];
            let same_folder = object.rest.get("parent_id").and_then(Value::as_str) == Some(parent.id.as_str());
            if name == object.name && !same_folder {
                let body = json!({"src_ids": [object.id], "dst_id": parent.id});
                api.json(Method::POST, "/object/copies", Some(&body)).await?
            } else {
                vec![copy_renamed(api, object, &parent, &name).await?]
            }
        }
    };
    if !output.json {
        for copy in &copies {
            println!("{}", copy.path);
        }
    }
    Ok(json!(copies))
}

pub async fn rm(api: &Api, paths: &[String], recursive: bool, purge: bool, output: Output) -> CliResult<Value> {
    let objects = resolve_all(api, paths).await?;
    if let Some(folder) = objects.iter().find(|o| o.is_folder() && !recursive) {
        return Err(CliError::usage(format!("{} is a folder", folder.path)).with_hint("pass -r to remove folders"));
    }
    let body = json!({"ids": ids(&objects)});
    api.json::<Value>(Method::DELETE, "/object", Some(&body)).await?;
    if purge {
        api.json::<Value>(Method::DELETE, "/trash", Some(&body)).await?;
    }
    if !output.json {
        let verb = if purge { "deleted" } else { "moved to the trash" };
        for object in &objects {
            println!("{} {verb}", object.path);
        }
    }
    let removed: Vec<Value> = objects.iter().map(|o| json!({"id": o.id, "path": o.path})).collect();
    Ok(json!({"removed": removed, "purged": purge}))
}

pub struct NewShare {
    pub path: String,
    pub password: Option<String>,
    pub expires: Option<String>,
    pub max_downloads: Option<i64>,
}

pub async fn share_create(api: &Api, share: NewShare, output: Output) -> CliResult<Value> {
    let object = remote::require(api, &RemotePath::parse(&share.path)).await?;
    let mut body = json!({"object_id": object.id});
    if let Some(password) = share.password {
        body["password"] = json!(password);
    }
    if let Some(expires) = share.expires {
        body["expires_at"] = json!(expires);
    }
    if let Some(max) = share.max_downloads {
        body["max_downloads"] = json!(max);
    }
    let created: Value = api.json(Method::POST, "/share", Some(&body)).await?;
    if !output.json {
        println!("{}  {}", created["code"].as_str().unwrap_or_default(), absolute_share_url(api, &created));
    }
    Ok(created)
}

fn absolute_share_url(api: &Api, share: &Value) -> String {
    api.site_url(share["url"].as_str().unwrap_or_default())
}

pub async fn share_ls(api: &Api, output: Output) -> CliResult<Value> {
    let mut shares: Vec<Value> = Vec::new();
    loop {
        let page: Value = api.get(&format!("/share?limit=1000&offset={}", shares.len())).await?;
        let items = page["items"].as_array().cloned().unwrap_or_default();
        let count = page["count"].as_u64().unwrap_or(0) as usize;
        let empty = items.is_empty();
        shares.extend(items);
        if empty || shares.len() >= count {
            break;
        }
    }
    if !output.json {
        for share in &shares {
            let state = if share["available"] == true { "" } else { "  (unavailable)" };
            println!(
                "{}  {}  {}{state}",
                share["code"].as_str().unwrap_or_default(),
                share["name"].as_str().unwrap_or_default(),
                absolute_share_url(api, share)
            );
        }
    }
    Ok(json!(shares))
}

pub async fn share_rm(api: &Api, codes: &[String], output: Output) -> CliResult<Value> {
    for code in codes {
        api.json::<Value>(Method::DELETE, &format!("/share/{}", query_value(code)), None).await?;
        if !output.json {
            println!("share {code} ended");
        }
    }
    Ok(json!({"removed": codes}))
}

pub async fn search(
    api: &Api,
    text: &str,
    kind: Option<&str>,
    under: Option<&str>,
    output: Output,
) -> CliResult<Value> {
    let mut query = format!("/search?limit=1000&q={}", query_value(text));
    if let Some(kind) = kind {
        query.push_str(&format!("&type={kind}"));
    }
    if let Some(under) = under {
        let folder = remote::require(api, &RemotePath::parse(under)).await?;
        query.push_str(&format!("&under={}", folder.id));
    }
    let mut found: Vec<Object> = Vec::new();
    loop {
        let page: Value = api.get(&format!("{query}&offset={}", found.len())).await?;
        let items: Vec<Object> = serde_json::from_value(page["items"].clone()).unwrap_or_default();
        let count = page["count"].as_u64().unwrap_or(0) as usize;
        let empty = items.is_empty();
        found.extend(items);
        if empty || found.len() >= count {
            break;
        }
    }
    if !output.json {
        for object in &found {
            let slash = if object.is_folder() { "/" } else { "" };
            println!("{}{slash}", object.path);
        }
    }
    Ok(json!(found))
}
