//! The check before an import ([`check`]): every line parsed (on every CPU)
//! and checked against the options' rules, nothing written, and what was
//! parsed kept for [`super::load`] ([`Parsed`]), so that each line is parsed
//! once.

use super::{parse_line, runs, spill_error, ImportError, ImportOptions, Keyed, SORT_GROUP};
use crate::state::homed_in;
use handled_proto::handle;
use handled_store::{HandleRecord, RecordStore};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::Path;

/// What [`check`] found in the input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checked {
    /// Records in the input.
    pub records: u64,
    /// Handles that exist already (with `replace`: to be overwritten).
    pub existing: u64,
    /// Records per prefix not homed here (without `strict`).
    pub not_homed: BTreeMap<String, u64>,
}

/// What [`check`] parsed, kept for [`super::load`].
pub enum Parsed {
    /// Every record, in one in-memory sort group (not sorted yet).
    Group(Vec<Keyed>),
    /// More than one group, sorted through runs on disk.
    Runs(runs::Runs),
    /// More than one group and no directory to sort in: [`super::load`] reads the
    /// input again ([`super::import`]).
    Reread,
}

/// Read all of `input` and write nothing: every line must parse, and the
/// options' rules hold. What it parsed is kept for [`super::load`]: up to one sort
/// group in memory, more sorted through runs in `spill_dir` (about the
/// records' encoded size, ~160 bytes for a two-value handle, held until the
/// load ends). `progress` gets the bytes read so far.
pub async fn check(
    store: &dyn RecordStore,
    input: impl BufRead,
    options: &ImportOptions,
    spill_dir: Option<&Path>,
    progress: impl FnMut(u64),
) -> Result<(Checked, Parsed), ImportError> {
    check_in_groups(store, input, options, spill_dir, SORT_GROUP, progress).await
}

/// [`check`] with sort groups of `group_size` records.
async fn check_in_groups(
    store: &dyn RecordStore,
    input: impl BufRead,
    options: &ImportOptions,
    spill_dir: Option<&Path>,
    group_size: usize,
    mut progress: impl FnMut(u64),
) -> Result<(Checked, Parsed), ImportError> {
    let now = handled_store::clock::now_secs_i32();
    let mut checked = Checked::default();
    let mut kept = Kept { group: Vec::new(), group_size, runs: None, spill_dir, reread: false };
    let mut batch = Vec::with_capacity(PARSE_BATCH);
    let mut bytes = 0u64;
    for line in super::lines(input) {
        let (n, line) = line?;
        bytes += line.len() as u64 + 1;
        if n.is_multiple_of(4096) {
            progress(bytes);
        }
        if line.trim().is_empty() {
            continue;
        }
        batch.push((n, line));
        if batch.len() == PARSE_BATCH {
            check_batch(store, &mut batch, now, options, &mut checked, &mut kept).await?;
        }
    }
    check_batch(store, &mut batch, now, options, &mut checked, &mut kept).await?;
    progress(bytes);
    Ok((checked, kept.finish()?))
}

/// Lines parsed at once, on every CPU.
const PARSE_BATCH: usize = 16_384;

/// Parse `batch` (numbered lines) and check each record in order; empties it.
async fn check_batch(
    store: &dyn RecordStore,
    batch: &mut Vec<(u64, String)>,
    now: i32,
    options: &ImportOptions,
    checked: &mut Checked,
    kept: &mut Kept<'_>,
) -> Result<(), ImportError> {
    let parsed = parse_on_every_cpu(batch, now);
    for ((n, _), parsed) in batch.drain(..).zip(parsed) {
        let at = |message: String| ImportError::Line { line: n, message };
        let (h, record) = parsed.map_err(at)?;
        checked.records += 1;
        if !homed_in(&options.homed, &h) {
            let prefix = String::from_utf8_lossy(handle::split(&h).0).into_owned();
            if options.strict {
                return Err(at(format!("prefix {prefix} is not homed here (--strict)")));
            }
            *checked.not_homed.entry(prefix).or_insert(0) += 1;
        }
        let key = handle::normalize(&h, options.case_sensitive);
        if store.get(&key).await?.is_some() {
            if !options.replace {
                let name = String::from_utf8_lossy(&h);
                return Err(at(format!("{name} exists (--replace overwrites existing handles)")));
            }
            checked.existing += 1;
        }
        let record = HandleRecord::named(record.values, &h, &key);
        kept.push(key, record)?;
    }
    Ok(())
}

/// A line's handle (as written) and record, or why it is refused.
type ParsedLine = Result<(Vec<u8>, HandleRecord), String>;

/// [`parse_line`] of each line, in order, the lines split among this
/// machine's CPUs (parsing is most of a check's time, and the store's writer
/// is idle until the check ends).
fn parse_on_every_cpu(batch: &[(u64, String)], now: i32) -> Vec<ParsedLine> {
    let parse = |part: &[(u64, String)]| part.iter().map(|(_, l)| parse_line(l, now)).collect::<Vec<_>>();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus == 1 || batch.len() < 1024 {
        return parse(batch);
    }
    let part = batch.len().div_ceil(cpus);
    std::thread::scope(|scope| {
        let others: Vec<_> = batch[part..].chunks(part).map(|p| scope.spawn(move || parse(p))).collect();
        let mut all = parse(&batch[..part]);
        for other in others {
            all.extend(other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
        }
        all
    })
}

/// The records [`check`] keeps, within one sort group of memory.
struct Kept<'a> {
    group: Vec<Keyed>,
    group_size: usize,
    runs: Option<runs::Runs>,
    spill_dir: Option<&'a Path>,
    reread: bool,
}

impl Kept<'_> {
    fn push(&mut self, key: Vec<u8>, record: HandleRecord) -> Result<(), ImportError> {
        if self.reread {
            return Ok(());
        }
        // A full group is spilled when one more record comes: an input of
        // exactly one group stays in memory.
        if self.group.len() == self.group_size {
            if self.spill_dir.is_none() {
                self.group = Vec::new();
                self.reread = true;
                return Ok(());
            }
            self.spill()?;
        }
        self.group.push((key, record));
        Ok(())
    }

    /// The group sorted into a run (the first one made in `spill_dir`).
    fn spill(&mut self) -> Result<(), ImportError> {
        let Some(dir) = self.spill_dir else { return Ok(()) };
        let runs = match &mut self.runs {
            Some(r) => r,
            None => self.runs.insert(runs::Runs::new(dir).map_err(|e| spill_error(dir, e))?),
        };
        runs.spill(&mut self.group).map_err(|e| spill_error(dir, e))
    }

    fn finish(mut self) -> Result<Parsed, ImportError> {
        if self.reread {
            return Ok(Parsed::Reread);
        }
        if self.runs.is_none() {
            return Ok(Parsed::Group(self.group));
        }
        self.spill()?;
        Ok(Parsed::Runs(self.runs.expect("spilled before")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::load;

    fn line(handle: &str, data: &str) -> String {
        format!(r#"{{"handle":"{handle}","values":[{{"index":1,"type":"URL","data":"{data}"}}]}}"#)
    }

    /// `check` keeps what it parsed, in memory or sorted on disk or not at
    /// all (read again), and `load` stores it: every handle once, the later
    /// of two lines of one handle winning, whichever way.
    #[tokio::test]
    async fn what_check_keeps_loads_alike_in_memory_in_runs_and_read_again() {
        let mut input: Vec<String> = (0..10).rev().map(|i| line(&format!("T/{i}"), "first")).collect();
        input.insert(3, line("T/5", "earlier"));
        input.push(line("T/5", "later"));
        let text = input.join("\n");
        let spill = tempfile::tempdir().unwrap();
        let options = ImportOptions { homed: [b"0.NA/T".to_vec()].into(), ..ImportOptions::default() };
        for (group_size, spill_dir, kind) in
            [(100, None, "group"), (3, Some(spill.path()), "runs"), (3, None, "reread")]
        {
            let store = handled_store::MemoryStore::new();
            let (checked, parsed) =
                check_in_groups(&store, text.as_bytes(), &options, spill_dir, group_size, |_| {}).await.unwrap();
            assert_eq!(checked.records, 12, "{kind}");
            let got = match &parsed {
                Parsed::Group(_) => "group",
                Parsed::Runs(_) => "runs",
                Parsed::Reread => "reread",
            };
            assert_eq!(got, kind);
            let loaded = load(&store, parsed, || Ok(text.as_bytes()), false, |_| {}).await.unwrap();
            assert_eq!(loaded, 12, "{kind}");
            assert_eq!(store.count().await.unwrap(), 10, "{kind}");
            let five = store.get(b"T/5").await.unwrap().unwrap();
            assert_eq!(five.values[0].data, b"later", "{kind}");
        }
        assert_eq!(std::fs::read_dir(spill.path()).unwrap().count(), 0, "the runs are gone after the load");
    }
}
