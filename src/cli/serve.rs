//! `liaison serve`: configuration, logging, signals, and (with `--demo`) the demo setup.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use tokio_util::sync::CancellationToken;

use super::logging::say;
use crate::app::App;
use crate::config::{Config, Overrides};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Also create the demo members alice and bob, the channel demo and the external party partner,
    /// print ready-to-paste client settings and write demo.json in the data directory.
    #[arg(long)]
    pub demo: bool,
    /// Configuration file (TOML); see config/liaison.example.toml.
    #[arg(long, env = "LIAISON_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory [default: ./liaison-data]
    #[arg(long, env = "LIAISON_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// HTTP listen address, host:port (port 0 picks one) [default: 127.0.0.1:8080]
    #[arg(long, env = "LIAISON_LISTEN")]
    pub listen: Option<String>,
    /// Public base URL advertised to clients (set it when listening on 0.0.0.0) [default: http://<listen>]
    #[arg(long, env = "LIAISON_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Database URL: sqlite://PATH or postgres://USER:PASSWORD@HOST:PORT/DB [default: sqlite in the data directory]
    #[arg(long, env = "LIAISON_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

pub(super) async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let overrides = Overrides {
        config: args.config,
        data_dir: args.data_dir,
        listen: args.listen,
        public_url: args.public_url,
        database_url: args.database_url,
    };
    let config = Config::load(&overrides, std::env::vars())?;
    // The OTLP exporter's HTTP client is built at once, and wants the TLS provider.
    crate::net::tls::install_crypto_provider();
    let exporter = super::logging::init(config.log_format, &config.telemetry)?;
    if exporter.is_some() {
        tracing::info!("Exporting traces over OTLP/HTTP.");
    }

    let shutdown = CancellationToken::new();
    let app = App::build(config, shutdown.clone()).await?;
    if let Some(secret) = &app.bootstrap_token {
        let file = app.data_dir().join(crate::app::ADMIN_TOKEN_FILE);
        say(&format!(
            "Created the bootstrap admin token (shown once; also in {}, mode 0600):\n  {secret}\n",
            file.display()
        ));
    }
    if args.demo {
        let demo = crate::app::demo::ensure(&app)
            .await
            .context("Could not create the demo")?;
        let file = app.data_dir().join(crate::app::demo::DEMO_FILE);
        say(&crate::app::demo::instructions(&demo, &file));
    }
    say(&format!(
        "liaison is serving at {} (listening on {})",
        app.public_url(),
        app.local_addr()
    ));

    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("Shutting down.");
        shutdown.cancel();
    });
    let served = app.run_until_stopped().await;
    if let Some(exporter) = exporter {
        // The batch exporter's flush blocks on its own thread's answer.
        let _ = tokio::task::spawn_blocking(move || exporter.shutdown()).await;
    }
    super::logging::flush();
    served
}

async fn wait_for_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(s) => s,
                Err(_) => return std::future::pending().await,
            };
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
