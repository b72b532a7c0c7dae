//! What the subcommands that work on a stopped server's data directory
//! (`promote`, `compact`) are told: its configuration, or the directory alone.

use clap::Args;
use handled_server::config::Config;
use std::path::PathBuf;

#[derive(Args)]
pub struct StoppedServer {
    /// TOML configuration file (the server's: data directory, store).
    #[arg(long, short, env = "HANDLED_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory of the stopped server (default `data`, relative to the working directory).
    #[arg(long, env = "HANDLED_DATA_DIR")]
    data_dir: Option<PathBuf>,
}

impl StoppedServer {
    /// The server's configuration, its data directory as given.
    pub fn config(self) -> anyhow::Result<Config> {
        let mut config = Config::load(self.config.as_deref())?;
        if let Some(d) = self.data_dir {
            config.data_dir = d;
        }
        Ok(config)
    }
}
