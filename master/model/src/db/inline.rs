//! SQLite statements run on the calling thread: rusqlite connections to the same database file
//! (the SQLite library sqlx links), for the statements of the busiest requests (a WebDAV `PUT`
//! or `GET` walks its path, reads the owner's usage and policy, creates the file).
//!
//! Why beside sqlx: sqlx runs every SQLite connection on a thread of its own, so each statement
//! is a hand-off to that thread and back, and its pool pings a connection (one more hand-off) on
//! every return. Measured on a 4 KiB WebDAV `PUT`, those hand-offs cost more than the statements:
//! twelve thread switches and ~480 µs of CPU on SQLite's threads per request (with the
//! statements here: 0.2 switches and ~15 µs there, the periodic checkpoint). Here a statement
//! is a function call on the thread that needs its answer.
//!
//! A connection is never held across an `.await`. A read takes the write connection when no
//! write holds it: a connection's page cache survives only its own writes (SQLite drops it when
//! another connection changed the file), so the writer's is the one that stays warm. Otherwise
//! it takes one from a free list of read connections and puts it back when the row is decoded,
//! so the list holds as many as threads ran statements at once.
//! Writes take the one write connection under a mutex for the length of a transaction that
//! never awaits. `BEGIN IMMEDIATE` does not wait on the thread for a write lock another
//! connection holds (sqlx's writer, the command line): it gives the mutex back and tries again
//! after an async sleep, so a busy database parks the request, not the runtime's thread.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rusqlite::types::{ToSqlOutput, Value, ValueRef};
use rusqlite::{Connection, ErrorCode, OpenFlags, Statement, ToSql};

use super::{Arg, DbError, Values};

/// Idle read connections kept; more are opened when more threads read at once, and closed after.
const IDLE_READERS: usize = 8;
/// Prepared statements each connection keeps (the hot requests use a handful).
const STATEMENT_CACHE: usize = 64;
/// How long a write waits for another connection's write lock before it fails as busy.
const WRITE_LOCK_WAIT: Duration = Duration::from_secs(10);
/// Pause between tries for a write lock another connection holds (SQLite's own busy handler
/// polls at 1 to 100 ms).
const WRITE_LOCK_RETRY: Duration = Duration::from_millis(1);

/// The database file's connections on the calling thread.
pub struct Inline {
    path: PathBuf,
    pragmas: String,
    readers: Mutex<Vec<Connection>>,
    writer: Mutex<Connection>,
}

impl std::fmt::Debug for Inline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inline").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Inline {
    /// Opens the write connection to `path` (created by sqlx already), with `pragmas` (the
    /// settings every connection of the master gets) run on each connection.
    pub fn open(path: &Path, pragmas: String) -> Result<Self, DbError> {
        let writer = connect(path, &pragmas)?;
        // Waiting for another connection's write lock happens in [`Inline::write`], not here.
        writer.busy_timeout(Duration::ZERO)?;
        // The write connection keeps the usual page cache, not a larger one. When a commit split
        // index pages, SQLite's page cache has held a page numbered past the end of the file (the
        // lock-byte page, as a swap slot), and ending the transaction then walks every page the
        // cache holds to drop it. With 8 MiB of 2 KiB pages that walk took 7-9% of a small
        // WebDAV `PUT`'s CPU, and more as the cache filled (~1% with 512 KiB); the pages a write
        // reads are few and stay cached in the kernel anyway.
        Ok(Self { path: path.to_owned(), pragmas, readers: Mutex::default(), writer: Mutex::new(writer) })
    }

    /// Runs `read` on the write connection if it is free, else on a read connection, and
    /// answers what it returns. The write connection does not wait for locks (see
    /// [`Inline::write`]): in the rare case a read finds the database busy there, it runs again
    /// on a read connection, which waits as every connection of the master does.
    pub fn read<T>(&self, read: impl Fn(&Connection) -> Result<T, DbError>) -> Result<T, DbError> {
        let writer = match self.writer.try_lock() {
            Ok(writer) => Some(writer),
            Err(std::sync::TryLockError::Poisoned(poisoned)) => Some(poisoned.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        // (A transaction a panic left open would show its uncommitted rows: not that one.)
        if let Some(writer) = writer.filter(|writer| writer.is_autocommit()) {
            match read(&writer) {
                Err(DbError::Sqlite(error)) if is_busy(&error) => {}
                answer => return answer,
            }
        }
        let idle = lock(&self.readers).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => connect(&self.path, &self.pragmas)?,
        };
        let answer = read(&conn);
        let mut readers = lock(&self.readers);
        if readers.len() < IDLE_READERS {
            readers.push(conn);
        }
        answer
    }

    /// Runs `work` in a write transaction (`BEGIN IMMEDIATE`), committed when it answers `Ok`
    /// and rolled back when it fails.
    pub async fn write<T>(&self, work: impl FnOnce(&Connection) -> Result<T, DbError>) -> Result<T, DbError> {
        let conn = self.begin_immediate().await?;
        finish(&conn, work(&conn))
    }

    /// [`Inline::write`] for work that may refuse after writing: a refusal (`Ok(Err(_))`) rolls
    /// the transaction back and is answered as is.
    pub async fn write_or_refuse<T, R>(
        &self,
        work: impl FnOnce(&Connection) -> Result<Result<T, R>, DbError>,
    ) -> Result<Result<T, R>, DbError> {
        let conn = self.begin_immediate().await?;
        match work(&conn) {
            Ok(Err(refusal)) => {
                run(&conn, "ROLLBACK")?;
                Ok(Err(refusal))
            }
            answer => finish(&conn, answer),
        }
    }

    /// The write connection inside a new `BEGIN IMMEDIATE` transaction, waiting for another
    /// process's write lock for at most `WRITE_LOCK_WAIT`.
    async fn begin_immediate(&self) -> Result<std::sync::MutexGuard<'_, Connection>, DbError> {
        let started = Instant::now();
        let conn = loop {
            {
                let conn = lock(&self.writer);
                if !conn.is_autocommit() {
                    // A transaction left open by a panic in an earlier `work` (the mutex was
                    // poisoned and recovered): nothing of it was committed.
                    conn.execute_batch("ROLLBACK")?;
                }
                match run(&conn, "BEGIN IMMEDIATE") {
                    Ok(()) => break conn,
                    Err(error) if !is_busy(&error) || started.elapsed() >= WRITE_LOCK_WAIT => {
                        return Err(error.into());
                    }
                    Err(_) => {}
                }
            }
            tokio::time::sleep(WRITE_LOCK_RETRY).await;
        };
        Ok(conn)
    }

    /// Copies whatever the write-ahead log still holds into the database file and truncates the
    /// log file to nothing, if no reader or writer is using the log now; answers whether it did.
    /// It never waits: the write connection gives up at once on a busy database.
    pub fn empty_log(&self) -> Result<bool, DbError> {
        let conn = lock(&self.writer);
        if !conn.is_autocommit() {
            // A transaction a panic left open (the next write rolls it back): not idle.
            return Ok(false);
        }
        // Answers (busy, frames in the log, frames copied).
        let busy = query_row(&conn, "PRAGMA wal_checkpoint(TRUNCATE)", &[], |row| row.int("busy"))?;
        Ok(busy == Some(0))
    }
}

/// Commits after `answer` succeeded; rolls back after it failed (or the commit did).
fn finish<T>(conn: &Connection, answer: Result<T, DbError>) -> Result<T, DbError> {
    let committed = answer.and_then(|value| run(conn, "COMMIT").map(|()| value).map_err(DbError::from));
    if committed.is_err()
        && !conn.is_autocommit()
        && let Err(error) = conn.execute_batch("ROLLBACK")
    {
        tracing::warn!(%error, "could not roll back a failed SQLite transaction");
    }
    committed
}

/// Runs a statement without arguments or rows (`BEGIN IMMEDIATE`, `COMMIT`) from the statement
/// cache: `execute_batch` would parse it again on every transaction.
fn run(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.raw_execute().map(drop)
}

fn is_busy(error: &rusqlite::Error) -> bool {
    matches!(error.sqlite_error_code(), Some(ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn connect(path: &Path, pragmas: &str) -> Result<Connection, DbError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.execute_batch(pragmas)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// Prepares `sql` (cached per connection) and binds `args` to it: `$n` takes the n-th argument,
/// as sqlx binds them, so one SQL text serves both.
fn prepare<'c>(conn: &'c Connection, sql: &str, args: &[Arg<'_>]) -> Result<rusqlite::CachedStatement<'c>, DbError> {
    let mut statement = conn.prepare_cached(sql)?;
    bind(&mut statement, args)?;
    Ok(statement)
}

fn bind(statement: &mut Statement<'_>, args: &[Arg<'_>]) -> Result<(), DbError> {
    for index in 1..=statement.parameter_count() {
        let position = statement
            .parameter_name(index)
            .and_then(|name| name.strip_prefix('$'))
            .and_then(|number| number.parse::<usize>().ok())
            .unwrap_or(index);
        let arg = position
            .checked_sub(1)
            .and_then(|at| args.get(at))
            .ok_or(rusqlite::Error::InvalidParameterCount(position, args.len()))?;
        statement.raw_bind_parameter(index, arg)?;
    }
    Ok(())
}

/// Runs `sql` with `args` and decodes its first row, if any.
pub fn query_row<T>(
    conn: &Connection,
    sql: &str,
    args: &[Arg<'_>],
    decode: impl FnOnce(&dyn Values) -> Result<T, DbError>,
) -> Result<Option<T>, DbError> {
    let mut statement = prepare(conn, sql, args)?;
    let mut rows = statement.raw_query();
    match rows.next()? {
        Some(row) => decode(row).map(Some),
        None => Ok(None),
    }
}

/// Runs a statement that answers no rows (or whose rows are not needed).
pub fn execute(conn: &Connection, sql: &str, args: &[Arg<'_>]) -> Result<usize, DbError> {
    Ok(prepare(conn, sql, args)?.raw_execute()?)
}

impl ToSql for Arg<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Arg::Text(text) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Arg::OptText(Some(text)) => ToSqlOutput::Borrowed(ValueRef::Text(text.as_bytes())),
            Arg::OptText(None) => ToSqlOutput::Owned(Value::Null),
            Arg::Int(number) => ToSqlOutput::Owned(Value::Integer(number)),
        })
    }
}

impl Values for rusqlite::Row<'_> {
    fn text(&self, column: &str) -> Result<String, DbError> {
        Ok(self.get(column)?)
    }
    fn opt_text(&self, column: &str) -> Result<Option<String>, DbError> {
        Ok(self.get(column)?)
    }
    fn int(&self, column: &str) -> Result<i64, DbError> {
        Ok(self.get(column)?)
    }
    fn opt_int(&self, column: &str) -> Result<Option<i64>, DbError> {
        Ok(self.get(column)?)
    }
    fn text_at(&self, index: usize) -> Result<String, DbError> {
        Ok(self.get(index)?)
    }
    fn opt_text_at(&self, index: usize) -> Result<Option<String>, DbError> {
        Ok(self.get(index)?)
    }
    fn int_at(&self, index: usize) -> Result<i64, DbError> {
        Ok(self.get(index)?)
    }
    fn opt_int_at(&self, index: usize) -> Result<Option<i64>, DbError> {
        Ok(self.get(index)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn memory() -> Connection {
        Connection::open_in_memory().expect("an in-memory database")
    }

    #[test]
    fn dollar_parameters_take_the_argument_of_their_number_wherever_they_stand() {
        let conn = memory();
        let sql = "SELECT $3 AS c, $1 AS a, $3 || $2 AS cb";
        let args = [Arg::Text("one"), Arg::Int(2), Arg::OptText(Some("three"))];
        let row =
            query_row(&conn, sql, &args, |row| Ok((row.text("a")?, row.text("c")?, row.text("cb")?))).unwrap().unwrap();
        assert_eq!(row, ("one".to_owned(), "three".to_owned(), "three2".to_owned()));
        let null = query_row(&conn, "SELECT $1 AS n", &[Arg::OptText(None)], |row| row.opt_text("n")).unwrap();
        assert_eq!(null, Some(None));
    }

    #[test]
    fn values_by_position_follow_the_select_order() {
        let conn = memory();
        let sql = "SELECT $2 AS b, $1 AS a, NULL AS n";
        let row = query_row(&conn, sql, &[Arg::Text("one"), Arg::Int(2)], |row| {
            Ok((row.int_at(0)?, row.text_at(1)?, row.opt_text_at(2)?, row.opt_text_at(1)?))
        })
        .unwrap()
        .unwrap();
        assert_eq!(row, (2, "one".to_owned(), None, Some("one".to_owned())));
        let past_the_end = query_row(&conn, sql, &[Arg::Text("one"), Arg::Int(2)], |row| row.text_at(3));
        assert!(past_the_end.is_err(), "a position past the last column is an error");
    }

    #[test]
    fn a_parameter_without_its_argument_is_an_error_not_a_null() {
        let conn = memory();
        let missing = query_row(&conn, "SELECT $2 AS b", &[Arg::Int(1)], |row| row.opt_int("b"));
        assert!(matches!(missing, Err(DbError::Sqlite(rusqlite::Error::InvalidParameterCount(2, 1)))), "{missing:?}");
    }

    /// The write connection does not wait for locks; a read that finds the database locked by
    /// another process runs again on a read connection, which waits for the lock to go. (A
    /// database in WAL mode rarely refuses a reader; one with a rollback journal does while a
    /// writer holds its exclusive lock, which makes the case easy to set up.)
    #[test]
    fn a_read_that_finds_the_database_locked_waits_on_a_read_connection() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inline.db");
        Connection::open(&path)
            .unwrap()
            .execute_batch("CREATE TABLE t (v INTEGER); INSERT INTO t VALUES (1);")
            .unwrap();
        let inline = Inline::open(&path, "PRAGMA busy_timeout = 10000;".to_owned()).unwrap();
        let count = || inline.read(|conn| query_row(conn, "SELECT COUNT(*) AS n FROM t", &[], |row| row.int("n")));
        assert_eq!(count().unwrap(), Some(1));
        let holder = Connection::open(&path).unwrap();
        holder.execute_batch("BEGIN EXCLUSIVE; INSERT INTO t VALUES (2);").unwrap();
        let released = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            holder.execute_batch("COMMIT").unwrap();
        });
        let started = Instant::now();
        assert_eq!(count().unwrap(), Some(2), "read once the lock is gone");
        assert!(started.elapsed() >= Duration::from_millis(200), "it waited: {:?}", started.elapsed());
        released.join().unwrap();
    }

    #[tokio::test]
    async fn a_transaction_a_panic_left_open_is_rolled_back_before_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inline.db");
        drop(Connection::open(&path).unwrap());
        let inline = std::sync::Arc::new(Inline::open(&path, String::new()).unwrap());
        inline.write(|conn| execute(conn, "CREATE TABLE t (v INTEGER)", &[])).await.unwrap();
        let panicking = std::sync::Arc::clone(&inline);
        let panicked = tokio::spawn(async move {
            panicking
                .write(|conn| -> Result<(), DbError> {
                    execute(conn, "INSERT INTO t (v) VALUES (1)", &[])?;
                    panic!("a bug in a decoder")
                })
                .await
        })
        .await;
        assert!(panicked.is_err(), "the task panicked");
        let count = |conn: &Connection| query_row(conn, "SELECT COUNT(*) AS n FROM t", &[], |row| row.int("n"));
        assert_eq!(inline.read(count).unwrap(), Some(0), "a read does not see the open transaction's row");
        inline.write(|conn| execute(conn, "INSERT INTO t (v) VALUES (2)", &[])).await.unwrap();
        let values =
            inline.read(|conn| query_row(conn, "SELECT group_concat(v) AS v FROM t", &[], |row| row.text("v")));
        assert_eq!(values.unwrap().as_deref(), Some("2"), "only the later write is kept");
    }

    #[tokio::test]
    async fn a_failed_transaction_leaves_nothing_and_the_connection_usable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inline.db");
        // The master's sqlx pools create the file; here a plain connection does.
        drop(Connection::open(&path).unwrap());
        let inline = Inline::open(&path, "PRAGMA journal_mode = WAL;".to_owned()).unwrap();
        inline.write(|conn| execute(conn, "CREATE TABLE t (v TEXT NOT NULL)", &[])).await.unwrap();
        let failed = inline
            .write(|conn| {
                execute(conn, "INSERT INTO t (v) VALUES ($1)", &[Arg::Text("kept?")])?;
                execute(conn, "INSERT INTO t (v) VALUES ($1)", &[Arg::OptText(None)])
            })
            .await;
        assert!(failed.is_err(), "the NOT NULL violation fails the transaction");
        let count = |conn: &Connection| query_row(conn, "SELECT COUNT(*) AS n FROM t", &[], |row| row.int("n"));
        assert_eq!(inline.read(count).unwrap(), Some(0), "the first insert was rolled back");
        inline.write(|conn| execute(conn, "INSERT INTO t (v) VALUES ($1)", &[Arg::Text("next")])).await.unwrap();
        assert_eq!(inline.read(count).unwrap(), Some(1));
    }
}
