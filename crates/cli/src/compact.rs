//! `handled compact`: give a stopped embedded store's free pages back to the
//! file system. Deleting and rewriting handles leaves free pages inside the
//! file, which later writes reuse but which the file keeps (BENCHMARKS.md,
//! "Capacity": deleting and re-adding a tenth of the handles); a restore from
//! a backup gives the same compact file, while the server keeps running.

use crate::stopped::StoppedServer;
use anyhow::{bail, Context};
use clap::Args;
use handled_store::{EmbeddedOptions, EmbeddedStore, StoreAdmin, STORE_FILE_NAME};
use std::process::ExitCode;

#[derive(Args)]
pub struct CompactArgs {
    #[command(flatten)]
    server: StoppedServer,
}

pub async fn run(args: CompactArgs) -> anyhow::Result<ExitCode> {
    let config = args.server.config()?;
    if !config.storage.store.compactable() {
        bail!(
            "compact is for the embedded store; this configuration's store is {:?} (use the database's own tools)",
            config.storage.store
        );
    }
    let file = config.data_dir.join(STORE_FILE_NAME);
    if !file.exists() {
        bail!("{} does not exist: no store to compact", file.display());
    }
    let (before, after) = tokio::task::spawn_blocking(move || -> anyhow::Result<(u64, u64)> {
        // Opening replays the write-ahead log; the checkpoint writes it into the
        // file, so that compaction keeps every acknowledged write where it belongs.
        let held = || format!("cannot open {} (a running server holds it: stop it first)", file.display());
        let store = EmbeddedStore::open(&file, EmbeddedOptions { warm_on_open: false, ..EmbeddedOptions::default() })
            .with_context(held)?;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        rt.block_on(store.checkpoint())?;
        drop(store);
        Ok(EmbeddedStore::compact_file(&file)?)
    })
    .await??;
    let mb = |b: u64| b as f64 / (1 << 20) as f64;
    eprintln!("compacted {}: {:.0} MB → {:.0} MB", config.data_dir.display(), mb(before), mb(after));
    Ok(ExitCode::SUCCESS)
}
