//! A byte for the collection and index that begin an index entry's key (issue
//! 45). Spelled out (`hrls\0\1 URL\0\1`) they took 11–13 bytes of the reverse
//! lookup's ~55-byte keys, two keys a handle. A store whose index was empty when
//! a server of this version opened it gives each (collection, index) pair a code
//! the first time an entry of it is written, and keeps the codes in the index
//! table itself: a backup carries them with the entries, and they are read
//! through the same view (or batch) as the entries, so never out of step.
//!
//! Rows of the index table that begin with 0 (a spelled key never begins with
//! `0 0`, so the first row tells the two kinds of store apart):
//! * `0 0 n`: this store's keys are coded, and codes 1..=n are given;
//! * `0 1 ‖ spelled ‖ code`: the code of a pair (`spelled`: `comp(collection) ‖
//!   comp(index)`, which ends where it is complete, so no other pair's row
//!   begins with it; the `1` keeps these rows apart from the first, since a
//!   spelled name may begin with 0).
//!
//! An entry's key begins with its pair's code, or, once 254 codes are given
//! (index names are data: a value type per index of the reverse lookup), with
//! `0xff ‖ spelled`. A store that already had entries keeps spelling them out.

use std::collections::HashMap;
use std::ops::Bound;

use redb::{Database, ReadableDatabase, ReadableTable};

use super::super::tx::Tx;
use super::super::view::{Items, View};
use super::super::wal::TableId;
use super::super::{map_redb, DOC_INDEX};
use crate::documents::spelled_names;
use crate::StoreError;

const MARK: [u8; 2] = [0, 0];
const LAST_CODE: u8 = 0xfe;
const SPELLED: u8 = 0xff;

/// The first key of the index table at or after a key.
type First<'a> = dyn FnMut(&[u8]) -> Result<Option<Vec<u8>>, StoreError> + 'a;

fn first_of(mut items: Items) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(items.next().transpose()?.map(|(k, _)| k))
}

#[derive(Clone, Copy)]
enum Form {
    Spelled,
    Coded { given: u8 },
}

fn read_form(first: &mut First) -> Result<Form, StoreError> {
    Ok(match first(&MARK)? {
        Some(k) if k.len() == 3 && k.starts_with(&MARK) => Form::Coded { given: k[2] },
        _ => Form::Spelled,
    })
}

fn code_row(spelled: &[u8]) -> Vec<u8> {
    [&[0, 1][..], spelled].concat()
}

fn code_of(first: &mut First, spelled: &[u8]) -> Result<Option<u8>, StoreError> {
    let row = code_row(spelled);
    Ok(match first(&row)? {
        Some(k) if k.len() == row.len() + 1 && k.starts_with(&row) => k.last().copied(),
        _ => None,
    })
}

/// How the keys of `spelled`'s entries begin, when no code is to be given:
/// `None` if it has none (so no entries either).
fn names_with(first: &mut First, form: Form, spelled: Vec<u8>) -> Result<Option<Vec<u8>>, StoreError> {
    Ok(match form {
        Form::Spelled => Some(spelled),
        Form::Coded { given } => match code_of(first, &spelled)? {
            Some(code) => Some(vec![code]),
            None if given == LAST_CODE => Some([&[SPELLED][..], &spelled].concat()),
            None => None,
        },
    })
}

/// For a reader of `view`: how the keys of `collection`'s `index` entries begin
/// (`None`: there are none).
pub(super) fn names_in(view: &View, collection: &str, index: &str) -> Result<Option<Vec<u8>>, StoreError> {
    let mut first = |from: &[u8]| first_of(view.range(TableId::DocIndex, Bound::Included(from))?);
    let form = read_form(&mut first)?;
    names_with(&mut first, form, spelled_names(collection, index))
}

/// For the writer: the names of a batch's entries, each pair asked once a
/// batch. Only what cannot change is kept (a pair's code, the store's form), so
/// that two of these in one batch cannot give one code twice.
#[derive(Default)]
pub(in crate::embedded) struct BatchNames {
    coded: Option<bool>,
    /// collection → index → how its entries' keys begin.
    known: HashMap<String, HashMap<String, Vec<u8>>>,
}

impl BatchNames {
    /// How the keys of `collection`'s `index` entries begin. `give`: give the
    /// pair a code if it has none (in `tx`); without it `None` means the pair
    /// has no entries.
    pub(in crate::embedded) fn names(
        &mut self,
        tx: &mut Tx,
        collection: &str,
        index: &str,
        give: bool,
    ) -> Result<Option<Vec<u8>>, StoreError> {
        if let Some(names) = self.known.get(collection).and_then(|c| c.get(index)) {
            return Ok(Some(names.clone()));
        }
        let spelled = spelled_names(collection, index);
        let mut first = |from: &[u8]| first_of(tx.range(TableId::DocIndex, Bound::Included(from))?);
        let form = match self.coded {
            Some(false) => Form::Spelled,
            _ => read_form(&mut first)?,
        };
        self.coded = Some(matches!(form, Form::Coded { .. }));
        let names = match (names_with(&mut first, form, spelled.clone())?, form) {
            (Some(names), _) => names,
            (None, Form::Coded { given }) if give => {
                let code = given + 1;
                tx.put(TableId::DocIndex, &[MARK[0], MARK[1], given], None)?;
                tx.put(TableId::DocIndex, &[MARK[0], MARK[1], code], Some(&[]))?;
                tx.put(TableId::DocIndex, &[code_row(&spelled), vec![code]].concat(), Some(&[]))?;
                vec![code]
            }
            (None, _) => return Ok(None),
        };
        self.known.entry(collection.to_owned()).or_default().insert(index.to_owned(), names.clone());
        Ok(Some(names))
    }
}

/// A restore's index rows, in key order, as the restored store keeps them: a
/// backup of a store with spelled-out keys is given codes on the way in (so
/// that a backup and a restore convert a store made before them), one with
/// codes is written as it is.
#[derive(Default)]
pub(in crate::embedded) struct Recoder {
    /// `None` until the first row; then whether the backup spelled its names out.
    spelled: Option<bool>,
    codes: HashMap<Vec<u8>, u8>,
    given: u8,
}

impl Recoder {
    /// The rows to write for the backup's row `key`.
    pub(in crate::embedded) fn rows(&mut self, key: Vec<u8>) -> Result<Vec<Vec<u8>>, StoreError> {
        let spelled = *self.spelled.get_or_insert(!(key.len() == 3 && key.starts_with(&MARK)));
        if !spelled {
            return Ok(vec![key]);
        }
        let n = crate::documents::spelled_names_len(&key)
            .ok_or_else(|| StoreError::Corrupt("backup: an index entry's key has no collection and index".into()))?;
        let (names, rest) = key.split_at(n);
        if let Some(&code) = self.codes.get(names) {
            return Ok(vec![[&[code][..], rest].concat()]);
        }
        if self.given == LAST_CODE {
            return Ok(vec![[&[SPELLED][..], &key].concat()]);
        }
        self.given += 1;
        let code = self.given;
        self.codes.insert(names.to_vec(), code);
        Ok(vec![[code_row(names), vec![code]].concat(), [&[code][..], rest].concat()])
    }

    /// The row to write last: the mark of a store whose keys are coded, where
    /// the backup's were spelled out.
    pub(in crate::embedded) fn last_row(&self) -> Option<Vec<u8>> {
        (self.spelled == Some(true)).then(|| vec![MARK[0], MARK[1], self.given])
    }
}

/// A store whose index is empty gives its pairs codes from now on; called at
/// open, after the log's replay (whose entries are in the form they had).
pub(in crate::embedded) fn code_if_empty(db: &Database) -> Result<(), StoreError> {
    let r = |e: redb::Error| map_redb(e);
    let empty = {
        let txn = db.begin_read().map_err(|e| r(e.into()))?;
        let table = txn.open_table(DOC_INDEX).map_err(|e| r(e.into()))?;
        let first = table.first().map_err(|e| r(e.into()))?;
        first.is_none()
    };
    if empty {
        let txn = db.begin_write().map_err(|e| r(e.into()))?;
        txn.open_table(DOC_INDEX).map_err(|e| r(e.into()))?.insert(&[0u8, 0, 0][..], ()).map_err(|e| r(e.into()))?;
        txn.commit().map_err(|e| r(e.into()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use redb::{Database, ReadableDatabase, ReadableTable};

    use super::super::super::{ensure_tables, DOC_INDEX};
    use super::*;

    /// Two askers in one batch (a swap's and an import's) give two pairs two
    /// codes: what one gave is read by the other through the batch.
    #[test]
    fn two_askers_in_a_batch_never_give_one_code_twice() {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::create(dir.path().join("t.redb")).unwrap();
        ensure_tables(&db).unwrap();
        code_if_empty(&db).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut tx = Tx::direct(&txn, None).unwrap();
            let (mut a, mut b) = (BatchNames::default(), BatchNames::default());
            assert_eq!(a.names(&mut tx, "c", "x", false).unwrap(), None, "no code, no entries");
            assert_eq!(a.names(&mut tx, "c", "x", true).unwrap(), Some(vec![1]));
            assert_eq!(b.names(&mut tx, "c", "y", true).unwrap(), Some(vec![2]));
            assert_eq!(a.names(&mut tx, "c", "z", true).unwrap(), Some(vec![3]));
            assert_eq!(b.names(&mut tx, "c", "x", false).unwrap(), Some(vec![1]));
            tx.into_handles().unwrap();
        }
        txn.commit().unwrap();
        let read = db.begin_read().unwrap();
        let rows: Vec<Vec<u8>> =
            read.open_table(DOC_INDEX).unwrap().iter().unwrap().map(|e| e.unwrap().0.value().to_vec()).collect();
        assert_eq!(rows[0], [0, 0, 3]);
        assert_eq!(rows.len(), 4);
    }
}
