//! `nubo-bench summary [--objects N] [--users U] [--rounds R]`: `GET /admin/summary` on a site
//! of N objects (default 1,000,000: a tenth folders, the rest files, a fifth of the files sharing
//! their content with another) owned by U users (default 10,000), with shares and finished tasks,
//! on SQLite and on PostgreSQL, each on a release `nubo-master` process. The rows are generated
//! by the database itself (one `INSERT ... SELECT` per table over a number series), so the
//! counters' triggers fire for every row as they would for uploads. Each database's table gives
//! the summary's round-trip latency (HTTP and JSON included) at the median and the 95th
//! percentile over R requests (default 50), and for comparison one aggregate over `objects`
//! that the counters replace.
//!
//! PostgreSQL is found at `NUBO_BENCH_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); a database is created for the run and
//! dropped after it. Without a server there the PostgreSQL rows are skipped with a note.

use std::time::Instant;

use serde_json::Value;
use sqlx::any::AnyPoolOptions;

use crate::files::{ScratchPostgres, start_signed_in_with};

struct Options {
    objects: i64,
    users: i64,
    rounds: usize,
}

fn parse(args: &[String]) -> Options {
    let mut options = Options { objects: 1_000_000, users: 10_000, rounds: 50 };
    let mut args = args.iter();
    while let Some(flag) = args.next() {
        let value: i64 = args.next().and_then(|v| v.parse().ok()).expect("a number after the flag");
        match flag.as_str() {
            "--objects" => options.objects = value,
            "--users" => options.users = value,
            "--rounds" => options.rounds = value as usize,
            other => panic!("unknown option {other}"),
        }
    }
    options
}

pub async fn run(args: &[String]) {
    let options = parse(args);
    sqlx::any::install_default_drivers();
    println!(
        "GET /admin/summary over {} objects of {} users, {} requests",
        options.objects, options.users, options.rounds
    );
    println!("| database | what | p50 ms | p95 ms |");
    println!("|---|---|---:|---:|");
    run_on(&options, None).await;
    match ScratchPostgres::create("summary").await {
        Ok(database) => {
            run_on(&options, Some(&database.url)).await;
            database.drop_database().await;
        }
        Err(admin_url) => println!("| postgres | (no server at {admin_url}: skipped) | | |"),
    }
}

async fn run_on(options: &Options, postgres: Option<&str>) {
    let env: Vec<(&str, &str)> = postgres.map(|url| ("NUBO_DATABASE_URL", url)).into_iter().collect();
    let (bench, _owner) = start_signed_in_with(&env).await;
    let url = match postgres {
        Some(url) => url.to_owned(),
        None => format!("sqlite://{}", bench.server.dir.path().join("data/nubo.db").display()),
    };
    let label = if postgres.is_some() { "postgres" } else { "sqlite" };
    let pool = AnyPoolOptions::new().max_connections(1).connect(&url).await.expect("open database");
    let started = Instant::now();
    seed(&pool, &url, postgres.is_some(), options).await;
    eprintln!("{label}: seeded in {:.1} s", started.elapsed().as_secs_f64());

    let mut samples = Vec::with_capacity(options.rounds);
    let mut last = Value::Null;
    for round in 0..=options.rounds {
        let started = Instant::now();
        last = bench.json(reqwest::Method::GET, "/admin/summary", None).await;
        // Round 0 warms the caches and is not counted.
        if round > 0 {
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    assert_eq!(
        last["objects"]["files"].as_i64().unwrap() + last["objects"]["folders"].as_i64().unwrap(),
        options.objects
    );
    let (p50, p95) = percentiles(&mut samples);
    println!("| {label} | GET /admin/summary (counters) | {p50:.2} | {p95:.2} |");

    // What the counters replace: the same totals aggregated from `objects` on each request.
    let mut samples = Vec::new();
    for round in 0..=5 {
        let started = Instant::now();
        let rows: Vec<(String, i64, i64)> = sqlx::query_as(
            "SELECT kind, COUNT(*), CAST(SUM(size) AS BIGINT) FROM objects WHERE parent_id IS NOT NULL GROUP BY kind",
        )
        .fetch_all(&pool)
        .await
        .expect("aggregate");
        assert_eq!(rows.iter().map(|r| r.1).sum::<i64>(), options.objects);
        if round > 0 {
            samples.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let (p50, p95) = percentiles(&mut samples);
    println!("| {label} | for comparison: COUNT/SUM over objects by kind (SQL only) | {p50:.2} | {p95:.2} |");
    pool.close().await;
}

fn percentiles(samples: &mut [f64]) -> (f64, f64) {
    samples.sort_by(f64::total_cmp);
    let at = |p: f64| samples[((samples.len() as f64 - 1.0) * p).round() as usize];
    (at(0.5), at(0.95))
}

/// Users (every 50th banned; created over the last 60 days), their root folders (not counted
/// among the N objects), then the objects: every tenth a folder, the others files of up to 1 MB whose blob is shared by every
/// fifth pair (de-duplication), all added over the last 90 days; a share per 100 objects and a
/// finished task per user. Ids are UUID-shaped text, as the master writes.
async fn seed(pool: &sqlx::AnyPool, url: &str, postgres: bool, options: &Options) {
    let (policy,): (String,) =
        sqlx::query_as("SELECT id FROM policies ORDER BY created_at LIMIT 1").fetch_one(pool).await.expect("a policy");
    let (group,): (String,) = sqlx::query_as("SELECT id FROM groups WHERE is_admin = 0 ORDER BY created_at LIMIT 1")
        .fetch_one(pool)
        .await
        .expect("a group");
    let now = nubo_model::domain::time::now_ms();
    let day = 86_400_000_i64;
    let users = options.users;
    let objects = options.objects;
    // A number series 0..n-1 as a table `n(i)`, in each dialect; `uuid(prefix, expr)` a UUID
    // whose last group is the number.
    let series = |n: i64| {
        if postgres {
            format!("(SELECT generate_series(CAST(0 AS BIGINT), {}) AS i) AS n", n - 1)
        } else {
            format!(
                "(WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < {}) SELECT i FROM s) AS n",
                n - 1
            )
        }
    };
    let uuid = |prefix: &str, expr: &str| {
        if postgres {
            format!("'{prefix}-0000-4000-8000-' || lpad(({expr})::text, 12, '0')")
        } else {
            format!("printf('{prefix}-0000-4000-8000-%012d', {expr})")
        }
    };
    let statements = [
        format!(
            "INSERT INTO users (id, email, nickname, status, group_id, created_at, updated_at)
             SELECT {}, 'user' || i || '@bench.example', 'user' || i,
                    CASE WHEN i % 50 = 0 THEN 'BANNED' ELSE 'ACTIVE' END, '{group}', {now} - i * {} , {now}
             FROM {}",
            uuid("10000000", "i"),
            60 * day / users,
            series(users)
        ),
        format!(
            "INSERT INTO objects (id, owner_id, parent_id, name, name_key, kind, size, created_at, updated_at)
             SELECT {}, {}, NULL, '', '', 'folder', 0, {now}, {now} FROM {}",
            uuid("20000000", "i"),
            uuid("10000000", "i"),
            series(users)
        ),
        // One blob per file, except that every fifth pair of files shares one.
        format!(
            "INSERT INTO physical_files (id, policy_id, storage_key, size, blake3, ref_count, created_at)
             SELECT {}, '{policy}', 'bench/' || i, (i * 7919) % 1000000, 'hash' || i, 1, {now} FROM {}
             WHERE i % 10 <> 0 AND i % 10 <> 2",
            uuid("40000000", "i"),
            series(objects)
        ),
        format!(
            "INSERT INTO objects (id, owner_id, parent_id, policy_id, physical_file_id, name, name_key, kind, size,
                                  created_at, updated_at)
             SELECT {}, {}, {},
                    CASE WHEN i % 10 = 0 THEN NULL ELSE '{policy}' END,
                    CASE WHEN i % 10 = 0 THEN NULL WHEN i % 10 = 2 THEN {} ELSE {} END,
                    'object-' || i, 'object-' || i, CASE WHEN i % 10 = 0 THEN 'folder' ELSE 'file' END,
                    CASE WHEN i % 10 = 0 THEN 0 WHEN i % 10 = 2 THEN ((i - 1) * 7919) % 1000000 ELSE (i * 7919) % 1000000 END,
                    {now} - (i * 7) % {}, {now}
             FROM {}",
            uuid("30000000", "i"),
            uuid("10000000", &format!("i % {users}")),
            uuid("20000000", &format!("i % {users}")),
            uuid("40000000", "i - 1"),
            uuid("40000000", "i"),
            90 * day,
            series(objects)
        ),
        format!(
            "INSERT INTO shares (id, code, owner_id, object_id, created_at)
             SELECT {}, 'code' || i, {}, {}, {now} FROM {} WHERE i % 100 = 1",
            uuid("50000000", "i"),
            uuid("10000000", &format!("i % {users}")),
            uuid("30000000", "i"),
            series(objects)
        ),
        format!(
            "INSERT INTO tasks (id, type, status, owner_id, run_after, created_at, updated_at, finished_at)
             SELECT {}, 'POLICY_MIGRATE', 'completed', {}, {now}, {now}, {now}, {now} FROM {}",
            uuid("60000000", "i"),
            uuid("10000000", "i"),
            series(users)
        ),
    ];
    for statement in statements {
        sqlx::query(&statement).execute(pool).await.unwrap_or_else(|e| panic!("{e}: {statement}"));
    }
    // What the master's periodic job does within a minute: fold PostgreSQL's appended changes
    // into the counters (here all 1.8 million at once). Then what autovacuum does to tables at
    // rest (planner statistics, visibility map); SQLite is left as the master leaves it.
    if postgres {
        let started = Instant::now();
        let db = nubo_model::db::Db::connect(url, 1).await.expect("connect");
        let folded = nubo_model::db::summary::fold(&db).await.expect("fold");
        eprintln!("postgres: folded {folded} changes in {:.1} s", started.elapsed().as_secs_f64());
        sqlx::query("VACUUM ANALYZE").execute(pool).await.expect("vacuum");
    }
}
