//! `handled restore SRC --data-dir DIR`: a data directory from a backup, for
//! `handled serve --data-dir DIR`. The whole backup is checked first (format,
//! checksum); the directory is then built beside DIR and renamed into place, so
//! a failed restore leaves DIR as it was. A non-empty DIR is replaced only with
//! `--force`, and even then kept (renamed to `DIR.replaced-TIME`), never
//! deleted; never while a server has its store open.

use crate::printable::printable;
use anyhow::{bail, Context};
use clap::Args;
use handled_store::backup::{BackupItem, BackupReader, BackupTotals};
use handled_store::{EmbeddedRestore, STORE_FILE_NAME};
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args)]
pub struct RestoreArgs {
    /// The backup file (`handled backup` wrote it).
    src: PathBuf,
    /// The data directory to create (or, with --force, replace).
    #[arg(long, env = "HANDLED_DATA_DIR")]
    data_dir: PathBuf,
    /// Replace a non-empty data directory (its old contents are kept as DIR.replaced-TIME).
    #[arg(long)]
    force: bool,
}

pub async fn run(args: RestoreArgs) -> anyhow::Result<ExitCode> {
    tokio::task::spawn_blocking(move || restore(&args)).await?
}

fn open(src: &Path) -> anyhow::Result<BackupReader<BufReader<std::fs::File>>> {
    let file = std::fs::File::open(src).with_context(|| format!("cannot open {}", src.display()))?;
    BackupReader::new(BufReader::new(file)).with_context(|| format!("{} is not a usable backup", src.display()))
}

fn restore(args: &RestoreArgs) -> anyhow::Result<ExitCode> {
    let (src, dir) = (&args.src, &args.data_dir);
    // Check the whole file before touching anything.
    let mut reader = open(src)?;
    let manifest = reader.manifest().clone();
    while reader.next_item().with_context(|| format!("{} is not a usable backup", src.display()))?.is_some() {}
    let occupied = occupied(dir)?;
    if occupied && !args.force {
        bail!(
            "{} is not empty: restore into a new directory, or give --force to replace it \
             (its contents are kept as {}.replaced-TIME)",
            dir.display(),
            dir.display()
        );
    }
    if occupied {
        refuse_if_open(&dir.join(STORE_FILE_NAME))?;
    }
    let staging = sibling(dir, &format!("restoring-{}", std::process::id()))?;
    let written = build(src, &staging).and_then(|totals| {
        // In place: DIR becomes the restored directory in one rename.
        if occupied {
            let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
            let kept = sibling(dir, &format!("replaced-{secs}"))?;
            std::fs::rename(dir, &kept).with_context(|| format!("cannot move {} aside", dir.display()))?;
            eprintln!("the old contents of {} are in {}", dir.display(), kept.display());
        } else if dir.exists() {
            std::fs::remove_dir(dir).with_context(|| format!("cannot replace the empty {}", dir.display()))?;
        }
        std::fs::rename(&staging, dir)
            .with_context(|| format!("cannot rename {} to {}", staging.display(), dir.display()))?;
        crate::backup::sync_dir(dir)?;
        Ok(totals)
    });
    let totals = match written {
        Ok(t) => t,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            return Err(e.context(format!("nothing restored into {}", dir.display())));
        }
    };
    eprintln!(
        "restored {} store entries and {} files into {} (backup of {} handles taken {} by handled {}); \
         start it with: handled serve --data-dir {}",
        totals.entries,
        totals.files,
        dir.display(),
        manifest["handles"],
        taken_at(&manifest["created"]),
        // The manifest is the backup's word: shown, never obeyed by the terminal.
        printable(manifest["server"].as_str().unwrap_or("?")),
        dir.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Write the backup's store and files into the new directory `staging`.
fn build(src: &Path, staging: &Path) -> anyhow::Result<BackupTotals> {
    std::fs::create_dir(staging).with_context(|| format!("cannot create {}", staging.display()))?;
    let mut reader = open(src)?;
    let mut store = EmbeddedRestore::create(&staging.join(STORE_FILE_NAME))?;
    // The file was checked, but it is read again: it is checked again, to the end.
    while let Some(item) = reader.next_item().with_context(|| format!("{} changed while restoring", src.display()))? {
        match item {
            BackupItem::Entry(e) => store.add(e)?,
            BackupItem::File { name, bytes } => {
                let path = staging.join(&name);
                let mut f = crate::backup::open_private(&path)?;
                f.write_all(&bytes)
                    .and_then(|_| f.sync_all())
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
        }
    }
    store.finish()?;
    crate::backup::sync_dir(&staging.join(STORE_FILE_NAME))?;
    reader.totals().context("backup incomplete")
}

/// Does `dir` exist with something in it?
fn occupied(dir: &Path) -> anyhow::Result<bool> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_some()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => bail!("{} is not a directory", dir.display()),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", dir.display())),
    }
}

/// `DIR.suffix` beside DIR (same filesystem, so renames are atomic).
fn sibling(dir: &Path, suffix: &str) -> anyhow::Result<PathBuf> {
    let name = dir.file_name().with_context(|| format!("{} has no directory name", dir.display()))?;
    let mut name = name.to_os_string();
    name.push(format!(".{suffix}"));
    Ok(dir.with_file_name(name))
}

/// A running server holds an exclusive lock on its store file (redb's flock).
fn refuse_if_open(store: &Path) -> anyhow::Result<()> {
    use std::os::fd::AsRawFd;
    let Ok(file) = std::fs::File::open(store) else { return Ok(()) };
    // SAFETY: flock on a descriptor we own; the lock goes with the file.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0;
    if locked {
        bail!("{} is open (a server is running on this data directory?): stop it first", store.display());
    }
    Ok(())
}

/// The manifest's `created` (unix seconds) as a UTC date, e.g. `2026-11-27 10:31:02 UTC`.
fn taken_at(created: &serde_json::Value) -> String {
    let format = time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    created
        .as_i64()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .and_then(|t| t.format(&format).ok())
        .unwrap_or_else(|| format!("at {created} (not a date)"))
}
