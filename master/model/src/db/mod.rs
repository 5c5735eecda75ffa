//! The database: connection pools for SQLite or PostgreSQL behind one `Any` code path, the
//! migrations of both backends, and (in the submodules) every SQL statement of the master.
//! Statements enforce what the schema and one statement can (a quota check in the same UPDATE,
//! a unique name); every rule that reads several facts lives in `nubo-service`.
//!
//! SQLite allows one writer at a time. Rather than letting concurrent transactions race for the
//! write lock (and fail with "database is locked" when a reader tries to upgrade), every write
//! goes through a dedicated single-connection pool; reads use a separate pool and, under WAL,
//! never wait for the writer. On PostgreSQL both handles are the same pool.
//!
//! The statements of the busiest requests run on SQLite through [`inline`] instead: on the
//! calling thread, without sqlx's thread hand-offs. They are written once, with [`Arg`]s and a
//! decoder over [`Values`], and [`Db::read_row`] picks the executor.

pub mod activity;
pub mod avatars;
pub mod blobs;
pub mod columns;
pub mod events;
pub mod groups;
pub mod identities;
pub mod imports;
pub mod ingest;
pub mod inline;
pub mod node_reports;
pub mod nodes;
pub mod objects;
pub mod passkeys;
pub mod policies;
pub mod properties;
pub mod redeem;
pub mod refresh_tokens;
pub mod reports;
pub mod settings;
pub mod shares;
pub mod storage_packs;
pub mod summary;
pub mod tags;
pub mod tasks;
pub mod themes;
pub mod thumbnails;
pub mod tree_pages;
pub mod two_factor;
pub mod uploads;
pub mod users;
pub mod versions;
pub mod webdav_accounts;
pub mod wopi_apps;

use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::migrate::Migrator;
use sqlx::{AnyPool, Executor};

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("../migrations/postgres");

/// How long a SQLite connection waits for a lock held by another process (e.g. the CLI).
const SQLITE_BUSY_TIMEOUT_MS: u32 = 10_000;

/// A write transaction; statements that must commit together take `&mut Conn` (`&mut *tx`).
pub type Tx = sqlx::Transaction<'static, sqlx::Any>;
pub type Conn = sqlx::AnyConnection;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

#[derive(Debug, thiserror::Error)]
pub enum DbError {
    #[error("unsupported database URL {0:?}: use sqlite://PATH or postgres://...")]
    UnsupportedUrl(String),
    #[error("cannot create the database directory {path}: {source}")]
    CreateDir { path: String, source: std::io::Error },
    #[error(transparent)]
    Sqlx(#[from] sqlx::Error),
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A stored value that does not decode into its type (see [`columns`]).
    #[error("column {column} holds an invalid value: {reason}")]
    Invalid { column: String, reason: String },
}

impl DbError {
    /// True for a unique-constraint violation, from either executor and backend.
    pub fn is_unique_violation(&self) -> bool {
        match self {
            DbError::Sqlx(sqlx::Error::Database(error)) => error.is_unique_violation(),
            DbError::Sqlite(error) => matches!(
                error,
                rusqlite::Error::SqliteFailure(failure, _)
                    if failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                        || failure.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
            ),
            _ => false,
        }
    }
}

/// A statement argument, bound to `$1`, `$2`, ... in order by either executor.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    Text(&'a str),
    OptText(Option<&'a str>),
    Int(i64),
}

/// A row's values by column name, from sqlx's rows or [`inline`]'s: a decoder written over this
/// serves both executors.
pub trait Values {
    fn text(&self, column: &str) -> Result<String, DbError>;
    fn opt_text(&self, column: &str) -> Result<Option<String>, DbError>;
    fn int(&self, column: &str) -> Result<i64, DbError>;
    fn opt_int(&self, column: &str) -> Result<Option<i64>, DbError>;
    /// The same by position (from 0), for wide rows whose columns are numbered: finding a column
    /// by name scans the columns before it, so decoding a row that way grows with its width
    /// squared (the path walk reads seven columns per level).
    fn text_at(&self, index: usize) -> Result<String, DbError>;
    fn opt_text_at(&self, index: usize) -> Result<Option<String>, DbError>;
    fn int_at(&self, index: usize) -> Result<i64, DbError>;
    fn opt_int_at(&self, index: usize) -> Result<Option<i64>, DbError>;
}

impl Values for sqlx::any::AnyRow {
    fn text(&self, column: &str) -> Result<String, DbError> {
        Ok(sqlx::Row::try_get(self, column)?)
    }
    fn opt_text(&self, column: &str) -> Result<Option<String>, DbError> {
        Ok(sqlx::Row::try_get(self, column)?)
    }
    fn int(&self, column: &str) -> Result<i64, DbError> {
        Ok(sqlx::Row::try_get(self, column)?)
    }
    fn opt_int(&self, column: &str) -> Result<Option<i64>, DbError> {
        Ok(sqlx::Row::try_get(self, column)?)
    }
    fn text_at(&self, index: usize) -> Result<String, DbError> {
        Ok(sqlx::Row::try_get(self, index)?)
    }
    fn opt_text_at(&self, index: usize) -> Result<Option<String>, DbError> {
        Ok(sqlx::Row::try_get(self, index)?)
    }
    fn int_at(&self, index: usize) -> Result<i64, DbError> {
        Ok(sqlx::Row::try_get(self, index)?)
    }
    fn opt_int_at(&self, index: usize) -> Result<Option<i64>, DbError> {
        Ok(sqlx::Row::try_get(self, index)?)
    }
}

/// How busy one connection pool is; `open - idle` connections are in use.
#[derive(Debug, Clone, Copy)]
pub struct PoolUse {
    pub name: &'static str,
    pub max: u32,
    pub open: u32,
    pub idle: u32,
}

/// The master's database handle; cheap to clone.
#[derive(Clone, Debug)]
pub struct Db {
    reader: AnyPool,
    writer: AnyPool,
    backend: Backend,
    /// SQLite's connections on the calling thread (`None` on PostgreSQL).
    inline: Option<Arc<inline::Inline>>,
}

impl Db {
    /// Connects to `sqlite://...` or `postgres://...`. For SQLite the file (and its directory)
    /// is created when missing, and WAL, a busy timeout and foreign keys are switched on.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, DbError> {
        sqlx::any::install_default_drivers();
        let backend = if url.starts_with("sqlite:") {
            Backend::Sqlite
        } else if url.starts_with("postgres:") || url.starts_with("postgresql:") {
            Backend::Postgres
        } else {
            return Err(DbError::UnsupportedUrl(url.to_owned()));
        };
        let options = AnyConnectOptions::from_str(url)?;
        match backend {
            Backend::Postgres => {
                let pool = AnyPoolOptions::new()
                    .max_connections(max_connections.max(2))
                    .acquire_timeout(Duration::from_secs(30))
                    .connect_with(options)
                    .await?;
                Ok(Self { reader: pool.clone(), writer: pool, backend, inline: None })
            }
            Backend::Sqlite => {
                // Every connection must open the same database: an in-memory one exists once per
                // connection.
                if matches!(sqlite_path(url), "" | ":memory:") || url.contains("mode=memory") {
                    return Err(DbError::UnsupportedUrl(url.to_owned()));
                }
                create_sqlite_parent_dir(url)?;
                let writer = sqlite_pool(1).connect_with(options.clone()).await?;
                // The page size of a new database (SQLite ignores it once the file has pages,
                // and switching to WAL writes the first one).
                writer.execute(format!("PRAGMA page_size = {SQLITE_PAGE_SIZE}").as_str()).await?;
                // WAL is a property of the file: set it once, through the writer.
                writer.execute("PRAGMA journal_mode = WAL").await?;
                // Each SQLite connection is a thread of its own with its own page cache and
                // statements; readers beyond twice the cores add memory, not throughput.
                let cores = std::thread::available_parallelism().map_or(2, |n| n.get() as u32);
                let readers = max_connections.clamp(1, (2 * cores).max(2));
                let reader = sqlite_pool(readers).connect_with(options).await?;
                let inline = inline::Inline::open(std::path::Path::new(sqlite_path(url)), sqlite_pragmas())?;
                Ok(Self { reader, writer, backend, inline: Some(Arc::new(inline)) })
            }
        }
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// SQLite's connections on the calling thread; `None` on PostgreSQL.
    pub fn inline(&self) -> Option<&inline::Inline> {
        self.inline.as_deref()
    }

    /// The first row `sql` answers for `args`, decoded by `decode`: on SQLite on the calling
    /// thread ([`inline`]), on PostgreSQL through the read pool.
    pub async fn read_row<T>(
        &self,
        sql: &str,
        args: &[Arg<'_>],
        decode: impl Fn(&dyn Values) -> Result<T, DbError>,
    ) -> Result<Option<T>, DbError> {
        if let Some(inline) = self.inline() {
            return inline.read(|conn| inline::query_row(conn, sql, args, &decode));
        }
        let row = bound(sqlx::query(sql), args).fetch_optional(&self.reader).await?;
        row.map(|row| decode(&row)).transpose()
    }

    /// Applies pending migrations of this backend; applying them again is a no-op.
    pub async fn migrate(&self) -> Result<(), DbError> {
        let migrator = match self.backend {
            Backend::Sqlite => &SQLITE_MIGRATIONS,
            Backend::Postgres => &POSTGRES_MIGRATIONS,
        };
        migrator.run(&self.writer).await?;
        Ok(())
    }

    /// Number of migrations this build knows for the backend.
    pub fn known_migrations(&self) -> usize {
        match self.backend {
            Backend::Sqlite => SQLITE_MIGRATIONS.iter().count(),
            Backend::Postgres => POSTGRES_MIGRATIONS.iter().count(),
        }
    }

    /// Starts a write transaction. On SQLite it takes the write lock first (`BEGIN IMMEDIATE`,
    /// waiting up to the busy timeout for it): a deferred transaction that reads before it writes
    /// fails at once with `SQLITE_BUSY_SNAPSHOT` ("database is locked", 517) when another
    /// connection (the inline writer, see [`inline`]) committed since its first read, and no
    /// busy timeout waits that out.
    pub async fn begin(&self) -> Result<Tx, DbError> {
        Ok(match self.backend {
            Backend::Sqlite => self.writer.begin_with("BEGIN IMMEDIATE").await?,
            Backend::Postgres => self.writer.begin().await?,
        })
    }

    /// The pool for statements that only read (public for tools and tests; SQL belongs in
    /// this module's submodules).
    pub fn reader(&self) -> &AnyPool {
        &self.reader
    }

    /// The pool for statements and transactions that write.
    pub fn writer(&self) -> &AnyPool {
        &self.writer
    }

    /// A trivial statement through the read pool (readiness checks).
    pub async fn ping(&self) -> Result<(), DbError> {
        sqlx::query("SELECT 1").execute(&self.reader).await?;
        Ok(())
    }

    /// The connections of each pool, open and idle: one pool on PostgreSQL, the readers and the
    /// single writer on SQLite.
    pub fn pool_use(&self) -> Vec<PoolUse> {
        let of = |name: &'static str, pool: &AnyPool| PoolUse {
            name,
            max: pool.options().get_max_connections(),
            open: pool.size(),
            idle: pool.num_idle() as u32,
        };
        match self.backend {
            Backend::Postgres => vec![of("main", &self.reader)],
            Backend::Sqlite => vec![of("reader", &self.reader), of("writer", &self.writer)],
        }
    }

    pub async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }

    /// Copies what SQLite's write-ahead log holds into the database file, without waiting for
    /// readers or the writer (a no-op on PostgreSQL). SQLite would otherwise do it inside the
    /// commit that crosses its threshold, and that write would wait for a thousand pages to be
    /// copied and synced; the master runs this every [`SQLITE_CHECKPOINT_EVERY`] instead.
    pub async fn checkpoint(&self) -> Result<Checkpoint, DbError> {
        if self.backend != Backend::Sqlite {
            return Ok(Checkpoint::default());
        }
        // Answers (busy, frames in the log, frames copied); -1 when the file is not in WAL mode.
        let (_, log_frames, copied_frames): (i64, i64, i64) =
            sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(&self.reader).await?;
        Ok(Checkpoint { log_frames: log_frames.max(0) as u64, copied_frames: copied_frames.max(0) as u64 })
    }

    /// Empties SQLite's write-ahead log file (see [`LogWatch`]) when nothing uses the log now;
    /// answers whether it did (never on PostgreSQL). It runs on the calling thread, as the
    /// statements of [`inline`] do, and happens once per idle spell.
    pub fn empty_log(&self) -> Result<bool, DbError> {
        self.inline().map_or(Ok(false), inline::Inline::empty_log)
    }

    /// Names of the tables in the database, sorted (for diagnostics and migration tests).
    pub async fn table_names(&self) -> Result<Vec<String>, DbError> {
        let sql = match self.backend {
            Backend::Sqlite => {
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            }
            Backend::Postgres => {
                "SELECT tablename::text AS name FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename"
            }
        };
        let names: Vec<(String,)> = sqlx::query_as(sql).fetch_all(&self.reader).await?;
        Ok(names.into_iter().map(|(n,)| n).collect())
    }

    /// Number of migrations recorded as applied.
    pub async fn applied_migrations(&self) -> Result<i64, DbError> {
        let (n,): (i64,) =
            sqlx::query_as("SELECT COUNT(*) FROM _sqlx_migrations WHERE success").fetch_one(&self.reader).await?;
        Ok(n)
    }
}

/// How often the master copies SQLite's write-ahead log into the database file (see
/// [`Db::checkpoint`]). A checkpoint copies each page once however often it changed since the
/// last, and syncs the file: the pages every write changes (the owner's row, the ends of the
/// indexes) are copied and written back once a second instead of four times (measured on
/// 4 KiB WebDAV writes against 250 ms: ~10% less CPU per write).
pub const SQLITE_CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// The log size (in pages, 256 MiB) at which a committing connection checkpoints by itself.
/// A second of the busiest writes (~2,500 small files, ~12 pages each) stays below it; it bounds
/// the log where nothing runs the periodic checkpoint (the CLI, a stalled master).
const SQLITE_AUTOCHECKPOINT_PAGES: u32 = 65_536;

/// How long SQLite's write-ahead log must stay as it is, copied whole into the database file,
/// before the periodic checkpoint empties the log file ([`LogWatch`]).
pub const SQLITE_LOG_IDLE_BEFORE_EMPTYING: Duration = Duration::from_secs(2);

/// Decides, from the periodic checkpoints, when to empty SQLite's write-ahead log file.
///
/// Why: SQLite writes each page into the log as a 24-byte header and the page, so its writes
/// do not line up with the file system's pages, and each log write into a page the operating
/// system no longer caches must first read that page from disk. While the master is busy, the
/// log file's pages were just written and are cached, and writing over them is cheapest; once
/// it has been idle long enough for the operating system to reclaim them, the next writes
/// would read each one back first (measured after idle pauses on the benchmark machines:
/// small WebDAV writes at half speed). An empty log file is written at its end instead, where
/// nothing needs reading. Emptying it while busy would make every write allocate new blocks
/// (measured: ~35 µs more CPU per small write), so it happens only after the log stayed the
/// same for [`SQLITE_LOG_IDLE_BEFORE_EMPTYING`].
#[derive(Debug, Default)]
pub struct LogWatch {
    /// The last checkpoint's figures, and since when they have not changed.
    unchanged: Option<(Checkpoint, Instant)>,
}

impl LogWatch {
    /// Takes in what a checkpoint at `now` found; answers whether to empty the log now.
    pub fn observe(&mut self, seen: Checkpoint, now: Instant) -> bool {
        let all_copied = seen.log_frames > 0 && seen.copied_frames == seen.log_frames;
        match self.unchanged {
            Some((last, since)) if last == seen && all_copied => {
                if now.duration_since(since) < SQLITE_LOG_IDLE_BEFORE_EMPTYING {
                    return false;
                }
                self.unchanged = None;
                true
            }
            _ => {
                self.unchanged = Some((seen, now));
                false
            }
        }
    }
}

/// What a [`Db::checkpoint`] found and did (zeros on PostgreSQL).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Checkpoint {
    /// Pages (frames) in SQLite's write-ahead log.
    pub log_frames: u64,
    /// Of those, how many are now in the database file.
    pub copied_frames: u64,
}

/// The page size of a new SQLite database, in bytes (SQLite's default is 4096).
///
/// Why smaller: a commit writes every page it changed into the write-ahead log, whole. A new
/// file changes one page in each of about ten B-trees (the object, its blob, their indexes, the
/// owner's usage), whatever the page size, so halving the pages halves the bytes each small
/// write logs (~50 KiB to ~28 KiB). Measured on the transaction of a new file: ~20% less CPU.
/// At 2048 an index entry stays within its page up to ~490 bytes, above the longest name plus
/// ids; 1024 would push long names onto overflow pages.
const SQLITE_PAGE_SIZE: u32 = 2048;

/// Page cache per SQLite connection. Each connection keeps its own; in WAL mode it is dropped
/// whenever another connection writes, so a large one buys little and costs memory per reader.
const SQLITE_CACHE_KIB: u32 = 512;

/// Binds `args` to a sqlx query, in order.
fn bound<'q>(
    mut query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>>,
    args: &[Arg<'q>],
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments<'q>> {
    for arg in args {
        query = match *arg {
            Arg::Text(text) => query.bind(text),
            Arg::OptText(text) => query.bind(text),
            Arg::Int(number) => query.bind(number),
        };
    }
    query
}

/// A WHERE clause built condition by condition with `$n` placeholders, and the texts to bind in
/// order (sqlx's `QueryBuilder` writes `?` placeholders for `Any`, which PostgreSQL does not
/// accept). A condition names its value `{}`; numbers compare through `CAST({} AS BIGINT)`.
#[derive(Debug)]
pub(crate) struct Where {
    sql: String,
    binds: Vec<String>,
}

impl Where {
    pub fn new() -> Self {
        Self { sql: String::from(" WHERE 1 = 1"), binds: Vec::new() }
    }

    /// Adds ` AND condition` when `value` is present.
    pub fn and(&mut self, condition: &str, value: Option<String>) {
        if let Some(value) = value {
            self.binds.push(value);
            self.sql.push_str(" AND ");
            self.sql.push_str(&condition.replace("{}", &format!("${}", self.binds.len())));
        }
    }

    /// Adds ` AND (condition OR condition ...)`, one per value; no values match nothing.
    pub fn and_any(&mut self, condition: &str, values: &[String]) {
        let mut alternatives = Vec::with_capacity(values.len());
        for value in values {
            self.binds.push(value.clone());
            alternatives.push(condition.replace("{}", &format!("${}", self.binds.len())));
        }
        if alternatives.is_empty() {
            alternatives.push("1 = 0".to_owned());
        }
        self.sql.push_str(&format!(" AND ({})", alternatives.join(" OR ")));
    }

    /// One page of `SELECT {columns} FROM {from}` under this clause (and `extra`, conditions
    /// without values) in `order`, and how many rows match in all.
    pub async fn page<T>(
        &self,
        db: &Db,
        (columns, from, extra): (&str, &str, &str),
        order: &str,
        (offset, limit): (i64, i64),
    ) -> Result<(Vec<T>, i64), DbError>
    where
        T: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> + Send + Unpin,
    {
        let condition = format!("{}{extra}", self.sql);
        let n = self.binds.len();
        let sql =
            format!("SELECT {columns} FROM {from}{condition} ORDER BY {order} LIMIT ${} OFFSET ${}", n + 1, n + 2);
        let mut query = sqlx::query_as::<_, T>(&sql);
        for value in &self.binds {
            query = query.bind(value.as_str());
        }
        let rows = query.bind(limit).bind(offset).fetch_all(db.reader()).await?;
        let count_sql = format!("SELECT COUNT(*) FROM {from}{condition}");
        let mut count = sqlx::query_as::<_, (i64,)>(&count_sql);
        for value in &self.binds {
            count = count.bind(value.as_str());
        }
        let (total,) = count.fetch_one(db.reader()).await?;
        Ok((rows, total))
    }
}

/// `$1, $2, ..., $count`: the placeholders of an `IN (...)` list bound value by value.
pub(crate) fn placeholders(count: usize) -> String {
    (1..=count).map(|n| format!("${n}")).collect::<Vec<_>>().join(", ")
}

/// `%text%` with LIKE wildcards in `text` escaped (for `LIKE {} ESCAPE '\'`), so they match
/// literally.
pub fn like_pattern(text: &str) -> String {
    let escaped = text.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_");
    format!("%{escaped}%")
}

/// The settings every SQLite connection of the master gets, whichever executor runs it.
fn sqlite_pragmas() -> String {
    format!(
        "PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}; PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -{SQLITE_CACHE_KIB}; PRAGMA wal_autocheckpoint = {SQLITE_AUTOCHECKPOINT_PAGES};"
    )
}

fn sqlite_pool(max_connections: u32) -> AnyPoolOptions {
    AnyPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(Duration::from_secs(30))
        // A connection to a local file does not go stale; pinging it before every statement
        // doubled the round trips to SQLite's worker thread.
        .test_before_acquire(false)
        .after_connect(|conn, _meta| {
            Box::pin(async move {
                conn.execute(sqlite_pragmas().as_str()).await?;
                Ok(())
            })
        })
}

/// The file a `sqlite:` URL names (`:memory:` or empty for none).
fn sqlite_path(url: &str) -> &str {
    url.trim_start_matches("sqlite:").trim_start_matches("//").split('?').next().unwrap_or_default()
}

/// Creates the directory of the file a `sqlite:` URL names (in-memory URLs are refused before).
fn create_sqlite_parent_dir(url: &str) -> Result<(), DbError> {
    if let Some(parent) = std::path::Path::new(sqlite_path(url)).parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent)
            .map_err(|source| DbError::CreateDir { path: parent.display().to_string(), source })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(frames: u64, copied: u64) -> Checkpoint {
        Checkpoint { log_frames: frames, copied_frames: copied }
    }

    #[test]
    fn the_log_is_emptied_once_it_stayed_copied_and_unchanged_for_the_idle_time() {
        let start = Instant::now();
        let mut watch = LogWatch::default();
        let idle = SQLITE_LOG_IDLE_BEFORE_EMPTYING;
        assert!(!watch.observe(log(40, 40), start), "first seen");
        assert!(!watch.observe(log(40, 40), start + idle / 2), "not idle long enough");
        assert!(watch.observe(log(40, 40), start + idle), "idle for the whole time");
        assert!(!watch.observe(log(40, 40), start + idle * 2), "a new wait begins after emptying");
        assert!(watch.observe(log(40, 40), start + idle * 3));
    }

    /// The page size and mode of the SQLite database at `path`, and its rows of table `t`.
    fn page_size_mode_and_rows(path: &std::path::Path) -> (i64, String, i64) {
        let conn = rusqlite::Connection::open(path).unwrap();
        let page_size = conn.query_row("PRAGMA page_size", [], |row| row.get(0)).unwrap();
        let mode = conn.query_row("PRAGMA journal_mode", [], |row| row.get(0)).unwrap();
        let rows = conn.query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0)).unwrap_or(-1);
        (page_size, mode, rows)
    }

    #[tokio::test]
    async fn a_new_sqlite_database_gets_the_small_page_size_and_an_existing_one_keeps_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let fresh = dir.path().join("fresh/nubo.db");
        let db = Db::connect(&format!("sqlite://{}?mode=rwc", fresh.display()), 2).await.unwrap();
        db.writer().execute("CREATE TABLE t (v TEXT)").await.unwrap();
        db.close().await;
        let expected = (i64::from(SQLITE_PAGE_SIZE), "wal".to_owned(), 0);
        assert_eq!(page_size_mode_and_rows(&fresh), expected, "a new database");
        assert_ne!(SQLITE_PAGE_SIZE, 4096, "the setting differs from SQLite's default, so this test can fail");

        let existing = dir.path().join("existing.db");
        rusqlite::Connection::open(&existing)
            .unwrap()
            .execute_batch("PRAGMA page_size = 4096; CREATE TABLE t (v TEXT); INSERT INTO t VALUES ('kept');")
            .unwrap();
        let db = Db::connect(&format!("sqlite://{}", existing.display()), 2).await.unwrap();
        db.close().await;
        assert_eq!(page_size_mode_and_rows(&existing), (4096, "wal".to_owned(), 1), "an existing database");
    }

    #[test]
    fn a_log_that_changes_or_is_not_all_copied_is_left_alone() {
        let start = Instant::now();
        let idle = SQLITE_LOG_IDLE_BEFORE_EMPTYING;
        let mut busy = LogWatch::default();
        for step in 0..10_u32 {
            let frames = 40 + u64::from(step);
            assert!(!busy.observe(log(frames, frames), start + idle * step), "the log grew at step {step}");
        }
        let mut behind = LogWatch::default();
        for step in 0..10_u32 {
            assert!(!behind.observe(log(40, 30), start + idle * step), "a reader keeps frames uncopied");
        }
        let mut empty = LogWatch::default();
        for step in 0..10_u32 {
            assert!(!empty.observe(log(0, 0), start + idle * step), "an empty log is not emptied again");
        }
    }
}
