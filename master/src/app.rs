//! Wiring the master: connect and migrate the database, seed it, build the [`Context`], bind
//! the listener and serve until told to stop. Also the one-shot commands of the CLI.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use nubo_common::secret::Secret;
use nubo_model::config::Config;
use nubo_model::db::Db;
use nubo_model::kv;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use nubo_service::context::Context;

/// A master serving in the background (used by `serve` and by the test harness).
pub struct Running {
    pub addr: SocketAddr,
    pub context: Context,
    shutdown: CancellationToken,
    server: JoinHandle<std::io::Result<()>>,
    jobs: Vec<JoinHandle<()>>,
}

impl Running {
    /// Stops accepting connections, lets in-flight requests finish within `grace`, then closes
    /// the database.
    pub async fn shutdown(self, grace: Duration) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let mut server = self.server;
        match tokio::time::timeout(grace, &mut server).await {
            Ok(joined) => joined.context("server task failed")?.context("server failed")?,
            Err(_) => {
                tracing::warn!(grace_seconds = grace.as_secs(), "in-flight requests did not finish in time; closing");
                server.abort();
            }
        }
        for job in self.jobs {
            if tokio::time::timeout(grace, job).await.is_err() {
                tracing::warn!("a background job did not stop in time");
            }
        }
        if let Err(error) = nubo_service::content::downloads::flush_source_downloads(&self.context).await {
            tracing::warn!(%error, "could not write down the last source-link download counts");
        }
        self.context.db().close().await;
        Ok(())
    }
}

/// Opens the database named by the configuration and applies pending migrations.
pub async fn open_database(config: &Config) -> anyhow::Result<Db> {
    let db = Db::connect(&config.effective_database_url(), config.database_max_connections)
        .await
        .context("cannot open the database")?;
    db.migrate().await.context("cannot migrate the database")?;
    nubo_service::identity::bootstrap::seed(&db).await.context("cannot seed the database")?;
    let filled = nubo_service::identity::bootstrap::fill_search_keys(&db)
        .await
        .context("cannot write the objects' search keys")?;
    if filled > 0 {
        tracing::info!(filled, "wrote the search keys of objects from before search");
    }
    Ok(db)
}

/// Starts serving in the background and answers once the listener is bound.
pub async fn start(config: Config) -> anyhow::Result<Running> {
    config.signing_secret()?;
    let db = open_database(&config).await?;
    let listener =
        TcpListener::bind(config.listen).await.with_context(|| format!("cannot listen on {}", config.listen))?;
    let addr = listener.local_addr()?;
    let store =
        kv::connect(config.redis_url.as_deref(), &config.redis_prefix).await.context("cannot connect to Redis")?;
    nubo_service::identity::bootstrap::seed_first_admin(&db, &config)
        .await
        .context("cannot create the first administrator")?;
    nubo_service::credentials::revocation::restore(&db, store.as_ref())
        .await
        .context("cannot restore token revocations")?;
    let context = Context::new(config, db, store, nubo_http::links::FRONT_END)?;
    if let Some(publisher) = nubo_service::context::hub::connect_publisher(context.config().redis_url.as_deref()).await
    {
        context.events().publish_to(publisher);
    }
    let router = nubo_http::router(context.clone());
    let shutdown = CancellationToken::new();
    let mut jobs = nubo_service::jobs::start(&context, &shutdown);
    jobs.extend(nubo_service::tree::events::start(&context, &shutdown));
    let limits = context.config().edge_limits();
    let server = tokio::spawn(nubo_common::serve::serve(listener, router, limits, shutdown.clone().cancelled_owned()));
    tracing::info!(%addr, version = env!("CARGO_PKG_VERSION"), "nubo-master listening on http://{addr}");
    Ok(Running { addr, context, shutdown, server, jobs })
}

/// `nubo-master serve`: runs until SIGINT or SIGTERM, then shuts down gracefully.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let grace = Duration::from_secs(config.shutdown_grace_seconds);
    let running = start(config).await?;
    shutdown_signal().await;
    tracing::info!("shutting down");
    running.shutdown(grace).await
}

async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler cannot fail on unix");
        tokio::select! {
            _ = interrupt => {},
            _ = terminate.recv() => {},
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

/// `nubo-master migrate`: applies pending migrations and reports how many are applied.
pub async fn migrate(config: &Config) -> anyhow::Result<i64> {
    let db = open_database(config).await?;
    let applied = db.applied_migrations().await?;
    db.close().await;
    Ok(applied)
}

/// `nubo-master user create-admin`: answers the new user's id and, when no password was given,
/// the generated one (shown once).
pub async fn create_admin(
    config: &Config,
    email: &str,
    password: Option<Secret>,
) -> anyhow::Result<(Uuid, Option<Secret>)> {
    let db = open_database(config).await?;
    let (password, generated) = match password {
        Some(p) => (p, false),
        None => (nubo_service::credentials::password::generate_password(), true),
    };
    let result = nubo_service::identity::accounts::create_admin(&db, email, &password).await;
    db.close().await;
    let id = result.map_err(|e| anyhow::anyhow!("{}", e.message))?;
    Ok((id, generated.then_some(password)))
}
