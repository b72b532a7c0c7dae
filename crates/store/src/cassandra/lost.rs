//! Compare-and-sets whose answer was lost (a timeout, a coordinator cut off or
//! paused mid-transaction), and how an operation learns how they ended.
//!
//! A lost compare-and-set may still take effect later: its proposal can sit
//! accepted on one replica, and the next Paxos round whose quorum meets it
//! there completes it (Cassandra repairs in-progress proposals). So neither a
//! SERIAL read that does not see it nor our own next compare-and-set failing
//! proves it did not apply: that next round may have completed it. Taking
//! "not seen yet" for "not applied" made an operation retry, find its own
//! write and answer as if another writer's were there (a delete answering
//! "not found", a create "already exists": the Cassandra partition test,
//! docs/cluster.md). An operation therefore keeps its lost attempts until a
//! read shows how they ended:
//! * one of them applied (the row carries its version and body): that
//!   attempt's answer;
//! * the row still has the version they all expected: not yet; the operation
//!   decides again, and the next commit on the row (ours or another's, at a
//!   higher ballot) makes Cassandra drop the stale proposal for good. Ballots
//!   are dated by the coordinators' clocks, so "later" means "higher" only
//!   while the Cassandra nodes' clocks agree: a stale proposal dated ahead
//!   outranks the commits made within the skew after it, and is completed
//!   over them (docs/cluster.md, "Clock skew"); not something a client can
//!   prevent, as a lightweight transaction takes no timestamp of ours;
//! * the row moved to a state none of them made, or the one every delete of
//!   that version makes: unknown, as ours may have applied before it moved.

use super::rows::{ObjectRow, Partition, RowWrite};

/// How one lost compare-and-set ended, judged from its first row.
#[derive(Debug, PartialEq, Eq)]
enum Settled {
    Applied,
    NotYet,
    Unknown,
}

/// Our version with our body is ours, but for a deletion's: every delete of
/// one version leaves the same row (the next version, no body), so another
/// writer's delete looks like ours, and taking it for ours acknowledged two
/// deletes of one handle (found by the Cassandra partition test, docs/cluster.md).
fn settle(now: &ObjectRow, first: &RowWrite) -> Settled {
    if now.version() == first.new_version() && now.body() == first.new_body.as_deref() && first.new_body.is_some() {
        Settled::Applied
    } else if now.version() == first.old.version() {
        Settled::NotYet
    } else {
        Settled::Unknown
    }
}

/// A lost attempt: its writes, and what the operation answers if it applied.
pub struct LostAttempt<T, A> {
    pub writes: Vec<RowWrite>,
    pub done: T,
    pub action: A,
    /// The error that lost its answer, for the message if the outcome stays unknown.
    pub error: String,
    /// The operation's round that made it.
    pub round: u32,
}

/// What a read of the partition says about an operation's lost attempts.
pub enum Verdict<T, A> {
    /// None was lost, or none applied yet: decide again.
    Open,
    Applied(LostAttempt<T, A>),
    /// The error of the last lost attempt.
    Unknown(String),
}

/// The lost attempts of one operation (every one expected the same version of
/// its first row: a new attempt is only decided while the row still has it).
pub struct LostAttempts<T, A>(Vec<LostAttempt<T, A>>);

impl<T, A> LostAttempts<T, A> {
    pub fn new() -> Self {
        LostAttempts(Vec::new())
    }

    pub fn push(&mut self, attempt: LostAttempt<T, A>) {
        self.0.push(attempt);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// How the lost attempts ended, as `partition` (read at SERIAL) shows.
    pub fn judge(&mut self, partition: &Partition) -> Verdict<T, A> {
        let mut unknown = false;
        for (i, a) in self.0.iter().enumerate() {
            let first = &a.writes[0];
            match settle(&partition.row(&first.coll), first) {
                Settled::Applied => return Verdict::Applied(self.0.swap_remove(i)),
                Settled::Unknown => unknown = true,
                Settled::NotYet => {}
            }
        }
        match self.0.last() {
            Some(last) if unknown => Verdict::Unknown(last.error.clone()),
            _ => Verdict::Open,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(body: Option<&[u8]>, version: i64) -> ObjectRow {
        ObjectRow::read(body.map(<[u8]>::to_vec), Some(version))
    }

    #[test]
    fn a_lost_answer_is_ours_only_when_no_other_writer_leaves_the_same_row() {
        let put = RowWrite { coll: "\0TEST/x".into(), old: row(Some(b"a"), 3), new_body: Some(b"b".to_vec()) };
        assert_eq!(settle(&row(Some(b"b"), 4), &put), Settled::Applied);
        assert_eq!(settle(&row(Some(b"a"), 3), &put), Settled::NotYet);
        assert_eq!(settle(&row(Some(b"c"), 4), &put), Settled::Unknown, "another writer's version 4");
        assert_eq!(settle(&row(None, 5), &put), Settled::Unknown);
        // Two deletes of version 3: whichever applied, the row reads (4, no body).
        let delete = RowWrite { new_body: None, ..put };
        assert_eq!(settle(&row(None, 4), &delete), Settled::Unknown, "maybe another writer's delete");
        assert_eq!(settle(&row(Some(b"a"), 3), &delete), Settled::NotYet);
        let create = RowWrite { coll: "\0TEST/x".into(), old: ObjectRow::default(), new_body: Some(b"v".to_vec()) };
        assert_eq!(settle(&row(Some(b"v"), 1), &create), Settled::Applied);
        assert_eq!(settle(&ObjectRow::default(), &create), Settled::NotYet);
    }

    fn partition(body: Option<&[u8]>, version: i64) -> Partition {
        Partition::of([("\0TEST/x".to_string(), row(body, version))])
    }

    fn attempt(body: &[u8], done: &'static str) -> LostAttempt<&'static str, ()> {
        let write = RowWrite { coll: "\0TEST/x".into(), old: row(Some(b"a"), 3), new_body: Some(body.to_vec()) };
        LostAttempt { writes: vec![write], done, action: (), error: format!("timeout of {done}"), round: 0 }
    }

    /// The partition test's finding: a lost write not seen by the first read
    /// back, then completed by the operation's own retry, must be answered as
    /// ours, not as another writer's.
    #[test]
    fn a_lost_attempt_stays_open_until_a_read_shows_how_it_ended() {
        let mut lost = LostAttempts::new();
        assert!(matches!(lost.judge(&partition(Some(b"a"), 3)), Verdict::Open), "nothing lost");
        lost.push(attempt(b"b", "first"));
        assert!(matches!(lost.judge(&partition(Some(b"a"), 3)), Verdict::Open), "not applied yet");
        lost.push(attempt(b"c", "second"));
        // The retry's round completed the first attempt's proposal.
        match lost.judge(&partition(Some(b"b"), 4)) {
            Verdict::Applied(a) => assert_eq!(a.done, "first"),
            _ => panic!("the first attempt applied"),
        }
        let mut lost = LostAttempts::new();
        lost.push(attempt(b"b", "first"));
        match lost.judge(&partition(Some(b"z"), 4)) {
            Verdict::Unknown(e) => assert_eq!(e, "timeout of first"),
            _ => panic!("another writer moved the row: ours may have applied before"),
        }
    }
}
