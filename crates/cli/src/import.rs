//! `handled import FILE.jsonl`: bulk-load records into the data directory with a progress bar.

use anyhow::Context;
use clap::Args;
use handled_server::bootstrap::open_store;
use handled_server::config::Config;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::BufReader;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args)]
pub struct ImportArgs {
    /// JSON lines: {"handle": "TEST/1", "values": [...]} per line.
    file: PathBuf,
    /// TOML configuration file (the server's: data directory, store, case rules).
    #[arg(long, short, env = "HANDLED_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory to load into (default `data`, relative to the working directory).
    #[arg(long, env = "HANDLED_DATA_DIR")]
    data_dir: Option<PathBuf>,
}

pub async fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let mut config = Config::load(args.config.as_deref())?;
    if let Some(d) = args.data_dir {
        config.data_dir = d;
    }
    let file = std::fs::File::open(&args.file).with_context(|| format!("cannot open {}", args.file.display()))?;
    let total_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let store =
        open_store(&config).await.with_context(|| format!("cannot open the store in {}", config.data_dir.display()))?;
    let bar = ProgressBar::new_spinner();
    bar.set_style(
        ProgressStyle::with_template("{spinner} {pos} handles loaded ({per_sec}) {elapsed}").expect("static template"),
    );
    let started = Instant::now();
    let n =
        handled_server::import::import(&*store, BufReader::new(file), config.case_sensitive, |n| bar.set_position(n))
            .await?;
    bar.finish_and_clear();
    eprintln!(
        "imported {n} handles ({} MB) into {} in {:.1} s",
        total_bytes / 1_000_000,
        config.data_dir.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
