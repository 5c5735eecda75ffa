//! `nubo-s3-server`: the tests' S3 server (s3s-fs, see `nubo_tests::s3`) as a process of its
//! own, so a cluster test can run, kill and restart it like any other service.
//!
//! `nubo-s3-server --listen ADDR --dir DIR --bucket NAME --access-key KEY --secret-key KEY`
//! serves path-style S3 over plain HTTP until killed, and prints `ready http://ADDR` once it
//! accepts connections.

use std::path::PathBuf;

struct Arguments {
    listen: String,
    dir: PathBuf,
    bucket: String,
    access_key: String,
    secret_key: String,
}

const USAGE: &str = "usage: nubo-s3-server --listen ADDR --dir DIR --bucket NAME --access-key KEY --secret-key KEY";

fn parse(args: &[String]) -> Result<Arguments, String> {
    let mut values = std::collections::HashMap::new();
    let mut iter = args.iter();
    while let Some(flag) = iter.next() {
        let known = ["--listen", "--dir", "--bucket", "--access-key", "--secret-key"];
        if !known.contains(&flag.as_str()) {
            return Err(format!("unknown option {flag}"));
        }
        let value = iter.next().ok_or_else(|| format!("{flag} needs a value"))?;
        values.insert(flag.as_str(), value.clone());
    }
    let mut take = |flag: &str| values.remove(flag).ok_or_else(|| format!("{flag} is required"));
    Ok(Arguments {
        listen: take("--listen")?,
        dir: PathBuf::from(take("--dir")?),
        bucket: take("--bucket")?,
        access_key: take("--access-key")?,
        secret_key: take("--secret-key")?,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arguments = match parse(&args) {
        Ok(arguments) => arguments,
        Err(err) => {
            eprintln!("{err}\n{USAGE}");
            std::process::exit(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(&arguments.listen).await {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("cannot listen on {}: {err}", arguments.listen);
            std::process::exit(1);
        }
    };
    let serving = nubo_tests::s3::serve(
        listener,
        &arguments.dir,
        &arguments.bucket,
        &arguments.access_key,
        &arguments.secret_key,
    );
    match serving {
        Ok(serving) => {
            println!("ready http://{}", arguments.listen);
            serving.await;
        }
        Err(err) => {
            eprintln!("cannot serve {}: {err}", arguments.dir.display());
            std::process::exit(1);
        }
    }
}
