//! `handled import FILE.jsonl`: bulk-load records into the data directory of a
//! stopped server (offline: the store file directly, for bootstrapping), or with
//! `--online` through a running one (`import_online`). Offline, the file is read
//! twice: a check that writes nothing (bad lines, existing handles, prefixes not
//! homed here), then the load, with a percentage and ETA (more than one sort
//! group is first sorted through runs in the data directory: `import::runs`).

use crate::bar::style;
use crate::counted::plural;
use anyhow::Context;
use clap::Args;
use handled_server::bootstrap::open_store;
use handled_server::config::Config;
use handled_server::import::{check, Checked, ImportError, ImportOptions, Progress};
use handled_store::Store;
use indicatif::ProgressBar;
use std::io::BufReader;
use std::path::{Path, PathBuf};
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
    /// Overwrite handles that exist (without it, one that exists stops the import).
    #[arg(long)]
    replace: bool,
    /// Refuse records of prefixes this server does not home (without it, they are loaded with a warning).
    #[arg(long)]
    strict: bool,
    /// Through the running server, as an administrator (the connection and credentials
    /// flags below), in sessions at once; resumable: a rerun goes on where it stopped.
    /// Without it, the store file of a stopped server is written directly.
    #[arg(long, conflicts_with_all = ["config", "data_dir", "strict"])]
    online: bool,
    /// With --online: sessions sending records at once.
    #[arg(long, default_value_t = 8, requires = "online")]
    parallel: usize,
    #[command(flatten)]
    connect: crate::admin::Connect,
}

/// [`check`] of a file, with a bar over its bytes; errors say nothing was imported.
pub async fn check_file(store: &dyn Store, path: &Path, options: &ImportOptions) -> anyhow::Result<Checked> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let bar = ProgressBar::new(file.metadata().map(|m| m.len()).unwrap_or(0));
    bar.set_style(style("checking {bytes}/{total_bytes} ({percent}%) eta {eta}"));
    let checked = check(store, BufReader::new(file), options, |bytes| bar.set_position(bytes)).await;
    bar.finish_and_clear();
    let checked = checked.map_err(|e| match e {
        ImportError::Line { .. } => anyhow::anyhow!("{}: {e}; nothing imported", path.display()),
        other => anyhow::Error::new(other).context(format!("{}: nothing imported", path.display())),
    })?;
    for (prefix, n) in &checked.not_homed {
        eprintln!(
            "warning: {} of prefix {prefix}, which this server does not home (--strict refuses them)",
            plural(*n, "handle")
        );
    }
    Ok(checked)
}

/// `imported 1 handle (2 replaced) from FILE`.
pub fn summary(loaded: u64, checked: &Checked, path: &Path) -> String {
    let replaced = if checked.existing > 0 { format!(" ({} replaced)", checked.existing) } else { String::new() };
    format!("imported {}{replaced} from {}", plural(loaded, "handle"), path.display())
}

pub async fn run(args: ImportArgs) -> anyhow::Result<ExitCode> {
    if args.online {
        return crate::import_online::run(&args.file, &args.connect, args.replace, args.parallel).await;
    }
    let mut config = Config::load(args.config.as_deref())?;
    if let Some(d) = args.data_dir {
        config.data_dir = d;
    }
    // A one-off command reads what it needs; warming the whole file is for serving.
    config.storage.warm_on_start = false;
    let store = open_store(&config).await.with_context(|| {
        format!(
            "cannot open the store in {} (if a server is running on it, import through it with --online)",
            config.data_dir.display()
        )
    })?;
    let options = ImportOptions {
        strict: args.strict,
        replace: args.replace,
        ..ImportOptions::for_server(&config, &*store).await?
    };
    let checked = check_file(&*store, &args.file, &options).await?;
    let file = std::fs::File::open(&args.file).with_context(|| format!("cannot open {}", args.file.display()))?;
    let bar = ProgressBar::new(checked.records);
    bar.set_style(style("{msg}{pos}/{len} handles stored ({percent}%) {rate} eta {eta}"));
    let started = Instant::now();
    let spill = handled_server::import::spill_dir(&config);
    let n = handled_server::import::import(&*store, BufReader::new(file), config.case_sensitive, spill, |p| match p {
        Progress::Sorted(n) => bar.set_message(format!("{n} sorted, ")),
        Progress::Stored(n) => {
            bar.set_message("");
            bar.set_position(n)
        }
    })
    .await?;
    bar.finish_and_clear();
    store.close();
    eprintln!(
        "{} into {} in {:.1} s",
        summary(n, &checked, &args.file),
        std::path::absolute(&config.data_dir).unwrap_or(config.data_dir.clone()).display(),
        started.elapsed().as_secs_f64()
    );
    Ok(ExitCode::SUCCESS)
}
