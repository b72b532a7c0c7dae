//! What only MariaDB/MySQL needs: bulk inserts and deletes as statements
//! with a list of parameters (no arrays), and no lock of its own.
//!
//! Writers of one handle are serialised by InnoDB itself: the locking read of
//! a write (`select … where handle in (…) … for update`, read_batch.rs and
//! write_batch.rs) takes next-key locks on the primary key's range for each
//! of its handles under
//! REPEATABLE READ (set on every connection, options.rs), rows or no rows, so
//! a second writer, or Handle.Net, or an application's own `insert` into that
//! range, waits. Two creators of an absent handle may both hold the gap and
//! then deadlock on their inserts: InnoDB rolls one back at once (1213) and
//! the write is tried again, seeing the winner's rows. `GET_LOCK` is not used:
//! it belongs to the session, not the transaction, so a write abandoned
//! mid-way would leave it held on a pooled connection, and it would not stop
//! writers that do not take it.

use sqlx::MySqlConnection;

use super::values::ValueRow;

/// Rows per `insert` (12 parameters each; MariaDB allows 65535 per statement).
const INSERT_ROWS: usize = 1000;
/// Keys per `delete` (two parameters each).
const DELETE_KEYS: usize = 1000;

pub(crate) async fn delete_keys(conn: &mut MySqlConnection, keys: &[&[u8]]) -> Result<(), sqlx::Error> {
    for part in keys.chunks(DELETE_KEYS) {
        let list = vec!["?"; part.len()].join(", ");
        // The index finds the rows by collation, the bytes decide (db.rs, key_binds).
        let sql = format!("delete from handles where handle in ({list}) and cast(handle as binary) in ({list})");
        let mut q = sqlx::query(&sql);
        for k in part.iter().chain(part.iter()) {
            q = q.bind(*k);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}

/// Insert `rows` of each key (keys and rows side by side).
pub(crate) async fn insert(conn: &mut MySqlConnection, rows: &[(&[u8], &ValueRow)]) -> Result<(), sqlx::Error> {
    for part in rows.chunks(INSERT_ROWS) {
        let sql = format!(
            "insert into handles (handle, idx, type, data, ttl_type, ttl, timestamp, refs, admin_read, \
             admin_write, pub_read, pub_write) values {}",
            vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"; part.len()].join(", ")
        );
        let mut q = sqlx::query(&sql);
        for (key, r) in part {
            q = q
                .bind(*key)
                .bind(r.idx)
                .bind(r.value_type.as_slice())
                .bind(r.data.as_slice())
                .bind(r.ttl_type)
                .bind(r.ttl)
                .bind(r.timestamp)
                // `refs` is a `blob` in Handle.Net's MariaDB schema: its text's bytes.
                .bind(r.refs.as_bytes())
                .bind(r.admin_read)
                .bind(r.admin_write)
                .bind(r.pub_read)
                .bind(r.pub_write);
        }
        q.execute(&mut *conn).await?;
    }
    Ok(())
}
