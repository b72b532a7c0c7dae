//! Backups while serving (`handled backup`). The server process owns the store
//! file (redb locks it), so it makes the backup: one consistent export of the
//! store (`Store::export`: the latest commit, so every acknowledged write), plus
//! the state files of the data directory (server key, admin credentials), in the
//! format of `handled_store::backup`. The client pulls it chunk by chunk
//! (`rest/backup.rs`); each chunk is made when it is asked for, on a blocking
//! thread, so a backup costs one chunk of memory and runs no faster than its
//! client reads — the store's writer and readers are never stopped.
//!
//! One backup at a time; one left without a pull for [`IDLE`] is dropped (its
//! read transaction keeps old pages of the store file alive while it lasts).
//!
//! A backup holds the server key and every admin secret, so its id is a
//! secret too: it never reaches a log (lines name the backup by a sequence
//! number), and it is not enough alone: every pull carries the credentials of
//! the administrator who started it (or of a server administrator).

use crate::auth::Identity;
use handled_store::backup::{is_state_file_name, BackupEncoder, StoreExport};
use handled_store::{Backup, Store, StoreError};
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// About this many bytes per chunk.
pub const CHUNK_BYTES: usize = 1 << 20;
/// A backup nobody pulled from for this long is dropped.
pub const IDLE: Duration = Duration::from_secs(60);
/// Largest state file taken from the data directory (keys and credentials are small).
const MAX_STATE_FILE: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    /// Another backup is running, or a chunk of this one is being made.
    #[error("{0}")]
    Busy(String),
    #[error("no backup with this id is running (finished, cancelled, or dropped after {}s without a pull)", IDLE.as_secs())]
    Unknown,
    /// This store is not backed up by `handled backup`.
    #[error("{0}")]
    Unsupported(String),
    #[error("backup failed: {0}")]
    Store(#[from] StoreError),
}

/// What a started backup tells its client.
pub struct Started {
    pub id: String,
    pub manifest: serde_json::Value,
}

/// A chunk of the backup file; `last` on the one with the end frame.
pub struct Chunk {
    pub bytes: Vec<u8>,
    pub last: bool,
}

/// The one running backup, if any.
#[derive(Default, Clone)]
pub struct Backups {
    slot: Arc<Mutex<Option<Running>>>,
    /// Numbers backups for the log, which must not see their ids.
    started: Arc<AtomicU64>,
}

struct Running {
    id: String,
    /// `backup N` in log lines.
    number: u64,
    /// Who started it: the identity its pulls must prove (or a server admin's).
    owner: Identity,
    last_pull: Instant,
    /// Taken while a chunk is being made.
    work: Option<Work>,
}

struct Work {
    export: Box<dyn StoreExport>,
    /// Taken by the end frame.
    encoder: Option<BackupEncoder>,
    /// Magic, manifest and state files: the start of the first chunk.
    head: Vec<u8>,
}

impl Backups {
    /// Begin a backup of `store` and the state files in `data_dir` for `owner`.
    pub async fn start(
        &self,
        store: &Arc<dyn Store>,
        data_dir: &Path,
        owner: Identity,
    ) -> Result<Started, BackupError> {
        // The store says why not, and what to use instead.
        if let Backup::Refused(why) = store.capabilities().backup {
            return Err(BackupError::Unsupported(why.into()));
        }
        if let Some(r) = &*self.slot.lock() {
            if r.last_pull.elapsed() < IDLE {
                return Err(BackupError::Busy(format!(
                    "another backup is running (last pull {}s ago): one at a time",
                    r.last_pull.elapsed().as_secs()
                )));
            }
        }
        let handles = store.count().await?;
        let manifest = serde_json::json!({
            "format": 1,
            "created": SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            "server": crate::build::LONG_VERSION,
            "store": "embedded",
            "handles": handles,
        });
        let store = store.clone();
        let data_dir = data_dir.to_path_buf();
        let man = manifest.clone();
        let work = tokio::task::spawn_blocking(move || -> Result<Work, BackupError> {
            let export = store.export()?;
            let mut head = Vec::new();
            let mut encoder = BackupEncoder::start(&man, &mut head);
            for (name, bytes) in state_files(&data_dir)? {
                encoder.file(&mut head, &name, &bytes);
            }
            Ok(Work { export, encoder: Some(encoder), head })
        })
        .await
        .map_err(|e| BackupError::Store(StoreError::Backend(e.to_string())))??;
        let id = hex::encode(rand::random::<[u8; 16]>());
        let number = self.started.fetch_add(1, Ordering::Relaxed) + 1;
        let by = owner.display();
        {
            let mut slot = self.slot.lock();
            // Checked again: another start may have won while this one exported.
            if slot.as_ref().is_some_and(|r| r.last_pull.elapsed() < IDLE) {
                return Err(BackupError::Busy("another backup started at the same time: one at a time".into()));
            }
            *slot = Some(Running { id: id.clone(), number, owner, last_pull: Instant::now(), work: Some(work) });
        }
        self.drop_when_idle(id.clone());
        tracing::info!(backup = number, by, handles, "backup started");
        Ok(Started { id, manifest })
    }

    /// Who started backup `id`, if it is running.
    pub fn owner(&self, id: &str) -> Option<Identity> {
        self.slot.lock().as_ref().filter(|r| r.id == id).map(|r| r.owner.clone())
    }

    /// The next chunk of backup `id`; after the last one the backup is over.
    /// The caller has checked who may pull (see [`Backups::owner`]).
    pub async fn pull(&self, id: &str) -> Result<Chunk, BackupError> {
        let (number, mut work) = {
            let mut slot = self.slot.lock();
            let r = slot.as_mut().filter(|r| r.id == id).ok_or(BackupError::Unknown)?;
            r.last_pull = Instant::now();
            let work = r.work.take().ok_or_else(|| BackupError::Busy("a chunk of this backup is being made".into()))?;
            (r.number, work)
        };
        let made = tokio::task::spawn_blocking(move || {
            let step = work.step();
            (work, step)
        })
        .await;
        let mut slot = self.slot.lock();
        let mine = |slot: &Option<Running>| slot.as_ref().is_some_and(|r| r.id == id);
        let (work, step) = match made {
            Ok(x) => x,
            Err(e) => {
                if mine(&slot) {
                    *slot = None;
                }
                return Err(BackupError::Store(StoreError::Backend(format!("backup step failed: {e}"))));
            }
        };
        match step {
            Err(e) => {
                tracing::warn!(backup = number, "backup failed: {e}");
                if mine(&slot) {
                    *slot = None;
                }
                Err(e.into())
            }
            Ok(chunk) => {
                if chunk.last {
                    tracing::info!(backup = number, "backup finished");
                    if mine(&slot) {
                        *slot = None;
                    }
                } else if let Some(r) = slot.as_mut().filter(|r| r.id == id) {
                    r.work = Some(work);
                }
                Ok(chunk)
            }
        }
    }

    /// Stop backup `id`; false if it is not running.
    pub fn cancel(&self, id: &str) -> bool {
        let mut slot = self.slot.lock();
        if let Some(r) = slot.as_ref().filter(|r| r.id == id) {
            tracing::info!(backup = r.number, "backup cancelled");
            *slot = None;
            return true;
        }
        false
    }

    /// Drop backup `id` once nobody pulled from it for [`IDLE`].
    fn drop_when_idle(&self, id: String) {
        let slot = Arc::downgrade(&self.slot);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(IDLE / 4).await;
                let Some(slot) = slot.upgrade() else { return };
                let mut slot = slot.lock();
                match &*slot {
                    Some(r) if r.id == id => {
                        if r.last_pull.elapsed() >= IDLE && r.work.is_some() {
                            tracing::warn!(backup = r.number, "backup dropped: no pull for {}s", IDLE.as_secs());
                            *slot = None;
                            return;
                        }
                    }
                    _ => return,
                }
            }
        });
    }
}

impl Work {
    /// Make the next chunk: up to [`CHUNK_BYTES`] of entries, or the end frame.
    fn step(&mut self) -> Result<Chunk, StoreError> {
        let mut bytes = std::mem::take(&mut self.head);
        let encoder = self.encoder.as_mut().ok_or_else(|| StoreError::Backend("backup already finished".into()))?;
        let entries = self.export.next_entries(CHUNK_BYTES.saturating_sub(bytes.len()).max(1))?;
        for e in &entries {
            encoder.entry(&mut bytes, e);
        }
        let last = entries.is_empty();
        if last {
            if let Some(encoder) = self.encoder.take() {
                encoder.finish(&mut bytes);
            }
        }
        Ok(Chunk { bytes, last })
    }
}

/// The state files of a data directory: the server key and the admin
/// credentials `serve` wrote there (the store itself is exported, not copied).
fn state_files(data_dir: &Path) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(data_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(e.into()),
    };
    for entry in entries {
        let entry = entry?;
        let Ok(name) = entry.file_name().into_string() else { continue };
        let wanted = is_state_file_name(&name);
        let meta = entry.metadata()?;
        if !wanted || !meta.is_file() {
            continue;
        }
        if meta.len() > MAX_STATE_FILE {
            return Err(StoreError::Backend(format!(
                "{} is larger than a key or credentials file ({} bytes): not backed up",
                entry.path().display(),
                meta.len()
            )));
        }
        out.push((name, std::fs::read(entry.path())?));
    }
    out.sort();
    Ok(out)
}
