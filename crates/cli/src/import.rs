//! `handled import FILE.jsonl`: bulk-load records into the data directory of a
//! stopped server (offline: the store file directly, for bootstrapping), or with
//! `--online` through a running one (`import_online`). Offline, a check reads the
//! file and writes nothing (bad lines, existing handles, prefixes not homed here),
//! keeping what it parsed (more than one sort group sorted through runs in the
//! data directory: `import::runs`), then the load stores that, with a percentage
//! and ETA.

use crate::bar::style;
use crate::counted::plural;
use anyhow::Context;
use clap::Args;
use handled_server::bootstrap::open_store;
use handled_server::config::Config;
use handled_server::import::{check, load, Checked, ImportError, ImportOptions, Parsed};
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

/// [`check`] of a file, with a bar over its bytes; errors say nothing was
/// imported. What it parsed is sorted in `spill_dir` if more than one group.
pub async fn check_file(
    store: &dyn Store,
    path: &Path,
    options: &ImportOptions,
    spill_dir: Option<&Path>,
) -> anyhow::Result<(Checked, Parsed)> {
    let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let bar = ProgressBar::new(file.metadata().map(|m| m.len()).unwrap_or(0));
    bar.set_style(style("checking {bytes}/{total_bytes} ({percent}%) eta {eta}"));
    let checked = check(store, BufReader::new(file), options, spill_dir, |bytes| bar.set_position(bytes)).await;
    bar.finish_and_clear();
    let (checked, parsed) = checked.map_err(|e| match e {
        ImportError::Line { .. } => anyhow::anyhow!("{}: {e}; nothing imported", path.display()),
        other => anyhow::Error::new(other).context(format!("{}: nothing imported", path.display())),
    })?;
    for (prefix, n) in &checked.not_homed {
        eprintln!(
            "warning: {} of prefix {prefix}, which this server does not home (--strict refuses them)",
            plural(*n, "handle")
        );
    }
    Ok((checked, parsed))
}

/// [`load`] of what [`check_file`] parsed of `path`: the records loaded
/// (`progress` gets the records stored so far).
pub async fn load_file(
    store: &dyn Store,
    parsed: Parsed,
    path: &Path,
    case_sensitive: bool,
    progress: impl FnMut(u64),
) -> anyhow::Result<u64> {
    let reread = || std::fs::File::open(path).map(BufReader::new);
    Ok(load(store, parsed, reread, case_sensitive, progress).await?)
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
    let spill = handled_server::import::spill_dir(&config);
    let (checked, parsed) = check_file(&*store, &args.file, &options, spill).await?;
    let bar = ProgressBar::new(checked.records);
    bar.set_style(style("{pos}/{len} handles stored ({percent}%) {rate} eta {eta}"));
    let started = Instant::now();
    let n = load_file(&*store, parsed, &args.file, config.case_sensitive, |n| bar.set_position(n)).await?;
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
