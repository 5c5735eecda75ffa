//! Migrations on both backends, and concurrent writes on SQLite.

use nubo_master::db::{Backend as DbBackend, Db};
use nubo_tests::{Backend, TestApp, TestDatabase};

async fn migrations_apply_once_and_again_as_a_no_op(backend: Backend) {
    let Some(database) = TestDatabase::create(backend).await else { return };
    let db = Db::connect(&database.url, 4).await.unwrap();
    assert!(db.table_names().await.unwrap().is_empty(), "database starts empty");
    db.migrate().await.unwrap();
    let tables = db.table_names().await.unwrap();
    for table in [
        "users",
        "auth_identities",
        "groups",
        "policies",
        "objects",
        "physical_files",
        "settings",
        "theme_presets",
        "shares",
        "tasks",
        "upload_sessions",
        "webdav_accounts",
    ] {
        assert!(tables.contains(&table.to_owned()), "{table} missing after migration: {tables:?}");
    }
    let applied = db.applied_migrations().await.unwrap();
    assert_eq!(applied, db.known_migrations() as i64);
    db.migrate().await.unwrap();
    assert_eq!(db.applied_migrations().await.unwrap(), applied, "second run applies nothing");
    assert_eq!(db.table_names().await.unwrap(), tables);
    db.close().await;
}

#[tokio::test]
async fn migrations_apply_on_empty_sqlite_and_twice_is_a_no_op() {
    migrations_apply_once_and_again_as_a_no_op(Backend::Sqlite).await;
}

#[tokio::test]
async fn migrations_apply_on_empty_postgres_and_twice_is_a_no_op() {
    migrations_apply_once_and_again_as_a_no_op(Backend::Postgres).await;
}

#[tokio::test]
async fn sqlite_database_runs_in_wal_mode() {
    let app = TestApp::spawn(Backend::Sqlite).await.unwrap();
    assert_eq!(app.state().db().backend(), DbBackend::Sqlite);
    let wal = std::fs::exists(app.database.dir.path().join("nubo.db-wal")).unwrap();
    assert!(wal, "WAL file exists next to the database");
}
