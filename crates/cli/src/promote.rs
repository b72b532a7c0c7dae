//! `handled promote`: turn a stopped replication mirror into a primary
//! (docs/replication.md, "Promotion"). A running mirror is promoted without a
//! restart by removing `replication_source` from its configuration and sending
//! SIGHUP; this command is for a stopped one (it opens the data directory).

use crate::stopped::StoppedServer;
use anyhow::Context;
use clap::Args;
use handled_server::bootstrap::open_store;
use handled_server::replication::mirror::progress;
use std::process::ExitCode;

#[derive(Args)]
pub struct PromoteArgs {
    #[command(flatten)]
    server: StoppedServer,
}

pub async fn run(args: PromoteArgs) -> anyhow::Result<ExitCode> {
    let mut config = args.server.config()?;
    config.storage.warm_on_start = false; // a one-off command: nothing to serve at speed
    let store = open_store(&config).await.with_context(|| {
        format!(
            "cannot open the store in {} (a running server holds it: if it is a mirror, remove \
             replication_source from its configuration and send it SIGHUP instead; a primary needs no promotion)",
            config.data_dir.display()
        )
    })?;
    let already = handled_server::replication::mirror::is_promoted(&*store).await?;
    let dumping = store.meta_get(progress::DUMP_KEY).await?.is_some();
    // A mirror records its source's key at first contact, then its dump and pulls.
    let mut was_mirror = dumping;
    for key in [progress::PINNED_KEY, progress::PULL_KEY] {
        was_mirror |= store.meta_get(key).await?.is_some();
    }
    if !already && !was_mirror {
        store.close();
        eprintln!(
            "{} was never a replication mirror (no source, dump or pull recorded): it is a primary already; \
             nothing written",
            config.data_dir.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    handled_server::replication::mirror::write_promoted(&*store).await?;
    store.close();
    if already {
        eprintln!("{} was already promoted", config.data_dir.display());
    } else {
        eprintln!(
            "promoted {}: it starts as a primary, continuing the source's transaction ids{}",
            config.data_dir.display(),
            if dumping { " (WARNING: its first dump had not finished, so it lacks part of the data)" } else { "" }
        );
    }
    Ok(ExitCode::SUCCESS)
}
