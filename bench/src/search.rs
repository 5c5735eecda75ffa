//! `nubo-bench search [--objects N] [--rounds R]`: `GET /search` over one user's tree of N
//! objects (default 100,000: 1,000 folders of 99 files) on SQLite and on PostgreSQL, each on a
//! release `nubo-master` process. The tree is seeded straight into the database (with the
//! search keys the master would write); each query runs R times (default 30) in turn with the
//! others, and the table gives the round-trip latency (HTTP and JSON included) at the median
//! and the 95th percentile, with how many objects match.
//!
//! PostgreSQL is found at `NUBO_BENCH_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); a database is created for the run and dropped
//! after it. Without a server there the PostgreSQL row is skipped with a note.

use std::time::Instant;

use nubo_model::domain::object::search_key;
use serde_json::Value;
use sqlx::any::AnyPoolOptions;

use crate::files::{Bench, ScratchPostgres, start_signed_in_with};

const WORDS: [&str; 10] =
    ["photo", "Report", "notes", "Bericht", "Übersicht", "invoice", "IMG", "draft", "Ärger", "summary"];
const EXTENSIONS: [&str; 5] = [".jpg", ".pdf", ".md", ".txt", ".png"];
const FILES_PER_FOLDER: usize = 99;

struct Options {
    objects: usize,
    rounds: usize,
}

fn parse(args: &[String]) -> Options {
    let mut options = Options { objects: 100_000, rounds: 30 };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value = args.next().and_then(|v| v.parse().ok()).expect("a number after the flag");
        match flag.as_str() {
            "--objects" => options.objects = value,
            "--rounds" => options.rounds = value,
            other => panic!("unknown option {other}"),
        }
    }
    options
}

pub async fn run(args: &[String]) {
    let options = parse(args);
    sqlx::any::install_default_drivers();
    println!("search over {} objects of one user, {} rounds per query", options.objects, options.rounds);
    println!("{:<10} {:<44} {:>8} {:>9} {:>9}", "database", "query", "matches", "p50 ms", "p95 ms");
    run_on(&options, None).await;
    match ScratchPostgres::create("search").await {
        Ok(database) => {
            run_on(&options, Some(&database.url)).await;
            database.drop_database().await;
        }
        Err(admin_url) => println!("postgres   (no server at {admin_url}: skipped)"),
    }
}

/// Seeds, searches and prints the rows of one database (`None`: the master's own SQLite file).
async fn run_on(options: &Options, postgres: Option<&str>) {
    let env: Vec<(&str, &str)> = postgres.map(|url| ("NUBO_DATABASE_URL", url)).into_iter().collect();
    let (bench, owner) = start_signed_in_with(&env).await;
    let url = match postgres {
        Some(url) => url.to_owned(),
        None => format!("sqlite://{}", bench.server.dir.path().join("data/nubo.db").display()),
    };
    let label = if postgres.is_some() { "postgres" } else { "sqlite" };
    let groups = seed(&url, &owner, &bench.root, options.objects).await;
    let tag = bench
        .json(
            reqwest::Method::POST,
            "/tag",
            Some(serde_json::json!({"name": "documents", "type": "automatic", "rule": "*.pdf, *.md"})),
        )
        .await;
    let tag = tag["id"].as_str().expect("tag id").to_owned();
    let queries = [
        ("rare: q=übersicht-00004", "q=%C3%BCbersicht-00004".to_owned()),
        ("common: q=ärger (10%)", "q=%C3%A4rger".to_owned()),
        ("everywhere: q=e", "q=e".to_owned()),
        ("nowhere: q=zzzz", "q=zzzz".to_owned()),
        ("q=report&type=file", "q=report&type=file".to_owned()),
        ("q=photo&under=<a tenth of the tree>", format!("q=photo&under={}", groups[0])),
        ("tag=<*.pdf, *.md>&q=bericht", format!("tag={tag}&q=bericht")),
    ];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); queries.len()];
    let mut matches = vec![0; queries.len()];
    for round in 0..=options.rounds {
        for (i, (_, query)) in queries.iter().enumerate() {
            let started = Instant::now();
            let page = search(&bench, query).await;
            // Round 0 warms the caches and is not counted.
            if round > 0 {
                samples[i].push(started.elapsed().as_secs_f64() * 1000.0);
            }
            matches[i] = page["count"].as_i64().expect("count");
        }
    }
    for (i, (label_of_query, _)) in queries.iter().enumerate() {
        let sorted = &mut samples[i];
        sorted.sort_by(f64::total_cmp);
        let at = |p: f64| sorted[((sorted.len() as f64 - 1.0) * p).round() as usize];
        println!("{label:<10} {label_of_query:<44} {:>8} {:>9.2} {:>9.2}", matches[i], at(0.5), at(0.95));
    }
}

async fn search(bench: &Bench, query: &str) -> Value {
    let response = bench
        .client
        .get(format!("{}/search?{query}", bench.server.base))
        .bearer_auth(&bench.token)
        .send()
        .await
        .expect("search");
    assert!(response.status().is_success(), "search {query}: {}", response.status());
    response.json().await.expect("search answer")
}

/// Writes `objects` objects below `root`: ten top-level folders, each holding a tenth of the
/// folders, each folder holding files named from [`WORDS`]; answers the top-level folders' ids.
async fn seed(url: &str, owner: &str, root: &str, objects: usize) -> Vec<String> {
    let pool = AnyPoolOptions::new().max_connections(1).connect(url).await.expect("open database");
    let now = 1_795_000_000_000_i64;
    let folders = (objects / (FILES_PER_FOLDER + 1)).max(10);
    let groups: Vec<String> = (0..10).map(|_| uuid::Uuid::now_v7().to_string()).collect();
    let mut rows: Vec<(String, String, String, &str)> = Vec::with_capacity(objects);
    for (i, group) in groups.iter().enumerate() {
        rows.push((group.clone(), root.to_owned(), format!("Group {i}"), "folder"));
    }
    let mut n = 0usize;
    for f in 0..folders {
        let folder = uuid::Uuid::now_v7().to_string();
        rows.push((folder.clone(), groups[f % groups.len()].clone(), format!("Folder {f:05}"), "folder"));
        for _ in 0..FILES_PER_FOLDER {
            let name = format!("{}-{n:06}{}", WORDS[n % WORDS.len()], EXTENSIONS[(n / WORDS.len()) % EXTENSIONS.len()]);
            rows.push((uuid::Uuid::now_v7().to_string(), folder.clone(), name, "file"));
            n += 1;
        }
    }
    let mut tx = pool.begin().await.expect("begin");
    for batch in rows.chunks(200) {
        let values = (0..batch.len())
            .map(|i| {
                let p = i * 6;
                format!("(${}, ${}, ${}, ${}, ${}, ${}, 0, {now}, {now})", p + 1, p + 2, p + 3, p + 4, p + 5, p + 6)
            })
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "INSERT INTO objects (id, owner_id, parent_id, name, name_key, kind, size, created_at, updated_at) VALUES {values}"
        );
        let mut query = sqlx::query(&sql);
        for (id, parent, name, kind) in batch {
            query = query.bind(id).bind(owner).bind(parent).bind(name).bind(search_key(name)).bind(*kind);
        }
        query.execute(&mut *tx).await.expect("insert objects");
    }
    tx.commit().await.expect("commit");
    // What autovacuum does to a table at rest (PostgreSQL's index-only scans need its visibility
    // map, its planner the statistics). SQLite is left as the master leaves it: without them.
    if url.starts_with("postgres") {
        sqlx::query("VACUUM ANALYZE objects").execute(&pool).await.expect("vacuum");
    }
    pool.close().await;
    groups
}
