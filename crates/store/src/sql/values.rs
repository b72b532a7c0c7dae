//! Handle values as rows of Handle.Net's `handles` table (Technical Manual
//! §8.1.4): one row per value, `refs` as Handle.Net writes it (`refs.rs`),
//! the permissions as four booleans.
//!
//! The table has no place for the order of a handle's values nor for a
//! handle without values: a record is read back sorted by index, and one
//! that cannot be stored (no values, an index twice, a reference that is not
//! text) is refused before anything is written.

use handled_proto::{HandleValue, TtlType, ValuePermissions};

use super::refs::{decode_refs, encode_refs};
use crate::{HandleRecord, InvalidRecord};

/// One row, column by column, as the default statements read and write it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ValueRow {
    pub idx: i32,
    pub value_type: Vec<u8>,
    pub data: Vec<u8>,
    pub ttl_type: i16,
    pub ttl: i32,
    pub timestamp: i32,
    pub refs: String,
    pub admin_read: bool,
    pub admin_write: bool,
    pub pub_read: bool,
    pub pub_write: bool,
}

/// Columns a row may hold NULL in when another program wrote it: read as
/// empty or zero (Handle.Net's own rows never have NULLs).
#[derive(Debug, Default)]
pub(crate) struct NullableRow {
    pub idx: i32,
    pub value_type: Option<Vec<u8>>,
    pub data: Option<Vec<u8>>,
    pub ttl_type: Option<i16>,
    pub ttl: Option<i32>,
    pub timestamp: Option<i32>,
    pub refs: Option<String>,
    pub admin_read: Option<bool>,
    pub admin_write: Option<bool>,
    pub pub_read: Option<bool>,
    pub pub_write: Option<bool>,
}

impl NullableRow {
    pub fn into_value(self) -> HandleValue {
        let perm = |b: Option<bool>, bit: u8| if b.unwrap_or(false) { bit } else { 0 };
        HandleValue {
            index: self.idx,
            timestamp: self.timestamp.unwrap_or(0),
            ttl_type: if self.ttl_type == Some(1) { TtlType::Absolute } else { TtlType::Relative },
            ttl: self.ttl.unwrap_or(0),
            permissions: ValuePermissions(
                perm(self.admin_read, ValuePermissions::ADMIN_READ)
                    | perm(self.admin_write, ValuePermissions::ADMIN_WRITE)
                    | perm(self.pub_read, ValuePermissions::PUBLIC_READ)
                    | perm(self.pub_write, ValuePermissions::PUBLIC_WRITE),
            ),
            value_type: self.value_type.unwrap_or_default(),
            data: self.data.unwrap_or_default(),
            references: decode_refs(self.refs.as_deref().unwrap_or("")),
        }
    }
}

/// The rows of a record to write, or why it cannot be stored in this schema.
pub(crate) fn rows_of(record: &HandleRecord) -> Result<Vec<ValueRow>, InvalidRecord> {
    record.validate()?;
    if record.values.is_empty() {
        return Err(InvalidRecord("SQL storage cannot hold a handle without values (it would have no row)".into()));
    }
    let mut seen = std::collections::HashSet::new();
    let mut rows = Vec::with_capacity(record.values.len());
    for v in &record.values {
        if !seen.insert(v.index) {
            return Err(InvalidRecord(format!(
                "index {} twice (SQL storage keys values by handle and index)",
                v.index
            )));
        }
        rows.push(ValueRow {
            idx: v.index,
            value_type: v.value_type.clone(),
            data: v.data.clone(),
            ttl_type: match v.ttl_type {
                TtlType::Relative => 0,
                TtlType::Absolute => 1,
            },
            ttl: v.ttl,
            timestamp: v.timestamp,
            refs: encode_refs(&v.references)?,
            admin_read: v.permissions.admin_read(),
            admin_write: v.permissions.admin_write(),
            pub_read: v.permissions.public_read(),
            pub_write: v.permissions.public_write(),
        });
    }
    Ok(rows)
}

/// The record the rows make, in index order (the order a read gives).
pub(crate) fn canonical(record: &HandleRecord) -> Vec<HandleValue> {
    let mut values = record.values.clone();
    values.sort_by_key(|v| v.index);
    values
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance::rich_record;
    use handled_proto::ValueReference;

    fn row_value(row: ValueRow) -> HandleValue {
        NullableRow {
            idx: row.idx,
            value_type: Some(row.value_type),
            data: Some(row.data),
            ttl_type: Some(row.ttl_type),
            ttl: Some(row.ttl),
            timestamp: Some(row.timestamp),
            refs: Some(row.refs),
            admin_read: Some(row.admin_read),
            admin_write: Some(row.admin_write),
            pub_read: Some(row.pub_read),
            pub_write: Some(row.pub_write),
        }
        .into_value()
    }

    #[test]
    fn rows_round_trip_in_index_order() {
        let mut r = rich_record(3);
        r.values.reverse();
        let mut back: Vec<HandleValue> = rows_of(&r).unwrap().into_iter().map(row_value).collect();
        back.sort_by_key(|v| v.index);
        assert_eq!(back, canonical(&r));
        assert_eq!(canonical(&r), rich_record(3).values, "index order");
        assert_ne!(canonical(&r), r.values);
    }

    #[test]
    fn unstorable_records_are_refused() {
        assert!(rows_of(&HandleRecord::default()).unwrap_err().0.contains("without values"));
        let twice = HandleRecord::new(vec![HandleValue::new(1, "URL", "a"), HandleValue::new(1, "URL", "b")]);
        assert!(rows_of(&twice).unwrap_err().0.contains("twice"));
        let mut v = HandleValue::new(1, "URL", "a");
        v.references.push(ValueReference { handle: vec![0xff], index: 1 });
        assert!(rows_of(&HandleRecord::new(vec![v])).unwrap_err().0.contains("UTF-8"));
    }

    #[test]
    fn nulls_from_other_writers_read_as_empty() {
        let v = NullableRow { idx: 7, ..NullableRow::default() }.into_value();
        assert_eq!(v.index, 7);
        assert!(v.data.is_empty() && v.value_type.is_empty() && v.references.is_empty());
        assert_eq!(v.permissions, ValuePermissions(0));
        assert_eq!(v.ttl_type, TtlType::Relative);
    }
}
