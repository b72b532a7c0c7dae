use super::*;
use crate::embedded::META;

fn record(seq: u64, entries: &[u8]) -> Vec<u8> {
    let mut payload = seq.to_le_bytes().to_vec();
    payload.extend_from_slice(entries);
    let mut out = (payload.len() as u32).to_le_bytes().to_vec();
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

fn seqs(log: &[u8], checkpoint: u64) -> Result<(Vec<u64>, LogEnd), Damage> {
    valid_records(log, checkpoint).map(|(r, end)| (r.into_iter().map(|r| r.0).collect(), end))
}

#[test]
fn replay_drops_a_torn_tail_only() {
    let log = [record(4, b"old"), record(5, b"a"), record(6, b"b")].concat();
    assert_eq!(seqs(&log, 4).unwrap(), (vec![5, 6], LogEnd::Clean), "records the checkpoint covers are skipped");
    // A write cut short anywhere in the last record: the records before it replay.
    let two = [record(1, b"a"), record(2, b"bb")].concat();
    let first = record(1, b"a").len();
    for cut in 0..two.len() {
        let (got, end) = seqs(&two[..cut], 0).unwrap();
        let whole = if cut >= first { vec![1] } else { vec![] };
        assert_eq!(got, whole, "cut at {cut}");
        let torn = cut != 0 && cut != first;
        assert_eq!(end == LogEnd::Clean, !torn, "cut at {cut}");
    }
    // Damage in the last record cannot be told from a torn write: dropped.
    let mut last_bad = two.clone();
    *last_bad.last_mut().unwrap() ^= 1;
    assert_eq!(seqs(&last_bad, 0).unwrap(), (vec![1], LogEnd::TornTail { offset: first }));
}

/// F11: one flipped byte in the middle of the log (header or payload of any
/// record but the last), or a break in the sequence, is damage naming the offset.
#[test]
fn damage_before_intact_records_is_refused() {
    let log = [record(1, b"first"), record(2, b"second"), record(3, b"third")].concat();
    let second = record(1, b"first").len();
    let third = second + record(2, b"second").len();
    for at in 0..third {
        let mut bad = log.clone();
        bad[at] ^= 0x10;
        let d = seqs(&bad, 0).unwrap_err();
        let (offset, seq) = if at < second { (0, 1) } else { (second, 2) };
        assert_eq!((d.offset, d.seq), (offset, seq), "flip at {at}");
        assert!(d.next_intact > d.offset && d.next_intact <= third, "flip at {at}: {d:?}");
        let m = d.message(Path::new("/data/handles.redb.wal"));
        assert!(m.contains("/data/handles.redb.wal") && m.contains(&format!("offset {offset}")), "{m}");
        assert!(m.contains("backup") && m.contains("truncate"), "{m}");
    }
    let skipped = [record(1, b"a"), record(3, b"c"), record(4, b"d")].concat();
    assert_eq!(seqs(&skipped, 0).unwrap_err().reason, "out of sequence");
}

/// Records after the checkpoint replay from both files in sequence order,
/// whichever file holds the older ones; records a checkpoint covers are skipped.
#[test]
fn both_log_files_replay_in_sequence() {
    let entry = |i: u64| {
        let mut r = Redo::default();
        r.record(TableId::Meta, format!("k{i}").as_bytes(), Some(format!("v{i}").as_bytes()));
        r.entries
    };
    let log = |seqs: std::ops::RangeInclusive<u64>| seqs.map(|i| record(i, &entry(i))).collect::<Vec<_>>().concat();
    // (checkpoint, first file, second file, replayed)
    let cases = [
        (0, log(4..=5), log(1..=3), 5),
        (0, log(1..=3), log(4..=5), 5),
        (3, log(1..=3), log(4..=5), 2),
        (3, log(4..=5), Vec::new(), 2),
        (5, log(1..=3), log(4..=5), 0),
    ];
    for (n, (checkpoint, first, second, replayed)) in cases.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let db_path = dir.path().join("t.redb");
        let db = Database::create(&db_path).unwrap();
        super::super::ensure_tables(&db).unwrap();
        let txn = db.begin_write().unwrap();
        set_checkpoint(&txn, checkpoint).unwrap();
        txn.commit().unwrap();
        let [a, b] = Wal::paths_for(&db_path);
        std::fs::write(&a, &first).unwrap();
        std::fs::write(&b, &second).unwrap();
        let (wal, n_replayed) = Wal::open(&db, &db_path, &mut |_, _, _| Ok(())).unwrap();
        assert_eq!(n_replayed, replayed, "case {n}");
        assert_eq!(wal.last_seq(), 5, "case {n}");
        assert_eq!((std::fs::metadata(&a).unwrap().len(), std::fs::metadata(&b).unwrap().len()), (0, 0));
        let read = db.begin_read().unwrap();
        let meta = read.open_table(META).unwrap();
        for i in (checkpoint + 1)..=5 {
            assert_eq!(meta.get(format!("k{i}").as_str()).unwrap().unwrap().value(), format!("v{i}").as_bytes());
        }
    }
}

#[test]
fn redo_entries_decode() {
    let mut redo = Redo::default();
    redo.record(TableId::Handles, b"k", Some(b"v"));
    redo.record(TableId::DocIndex, b"i", Some(b""));
    redo.record(TableId::Meta, b"m", None);
    let dir = tempfile::tempdir().unwrap();
    let db = Database::create(dir.path().join("t.redb")).unwrap();
    super::super::ensure_tables(&db).unwrap();
    let txn = db.begin_write().unwrap();
    replay(&txn, &redo.entries, &mut HandleEntries::new()).unwrap();
    assert!(replay(&txn, &redo.entries[..redo.entries.len() - 1], &mut HandleEntries::new()).is_err());
    assert!(replay(&txn, &[9, 0, 0, 0, 0, 0], &mut HandleEntries::new()).is_err());
}
