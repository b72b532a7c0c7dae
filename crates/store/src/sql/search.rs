//! Reverse lookup (`/hrls`) on Handle.Net's tables: handles by the data of
//! a value, read from `handles` through an index on its `data` column, as the
//! EUDAT reverse-lookup servlet reads a Handle.Net database. PostgreSQL's
//! tables have one (§8.2's `dataindex`); the manual's MySQL tables have none,
//! and without one each search would read the whole table: then searches are
//! declined, saying how to add one (`value_index`, or the DBA's own
//! `create index`). Nothing is kept beside the rows, so rows another program
//! writes are found at once.

use super::db::{on_pool, Dialect, Pool, Sql};
use super::error::backend;
use super::layout::{prefix_end, Col, Layout};
use super::SqlCore;
use crate::{IndexHit, IndexMatch, StoreError, MAX_SEARCHED_LEN};

/// The index `value_index` creates where there is none.
const INDEX_NAME: &str = "handled_dataindex";

/// Whether searches by value can run here, decided at open.
#[derive(Debug)]
pub(crate) enum ValueSearch {
    Indexed,
    /// Why not (shown to whoever searched).
    Declined(String),
}

impl ValueSearch {
    /// Look for an index on `handles.data` (its first column); with
    /// `create`, make one when there is none. `view`: the store reads through
    /// custom statements, and there may be no `handles` table at all.
    pub(crate) async fn prepare(pool: &Pool, create: bool, view: bool) -> Result<ValueSearch, StoreError> {
        if view {
            return Ok(ValueSearch::Declined(
                "sql: this server reads through custom statements (get_handle_stmt): there is no handles table to \
                 search by value"
                    .into(),
            ));
        }
        if has_data_index(pool).await? {
            return Ok(ValueSearch::Indexed);
        }
        let statement = match pool.dialect() {
            Dialect::Postgres => format!("create index {INDEX_NAME} on handles ( data )"),
            // A blob is indexed by a prefix of it.
            Dialect::MySql => format!("create index {INDEX_NAME} on handles ( data(255) )"),
        };
        if !create {
            return Ok(ValueSearch::Declined(format!(
                "sql: searching by value (/hrls) needs an index on handles.data, and this database has none: \
                 set value_index = true in [sql] (not with read_only), or have `{statement}` run"
            )));
        }
        on_pool!(pool, p => sqlx::query(&statement).execute(p).await.map(drop)).map_err(backend)?;
        tracing::info!("sql: created index {INDEX_NAME} on handles.data for searches by value (value_index)");
        Ok(ValueSearch::Indexed)
    }
}

/// Is there an index whose first column is `handles.data`?
const HAS_DATA_INDEX: Sql = Sql {
    pg: "select count(*) from pg_index i join pg_class t on t.oid = i.indrelid \
         join pg_attribute a on a.attrelid = t.oid and a.attnum = i.indkey[0] \
         where t.relname = 'handles' and a.attname = 'data' and pg_table_is_visible(t.oid)",
    my: "select count(*) from information_schema.statistics where table_schema = database() \
         and table_name = 'handles' and column_name = 'data' and seq_in_index = 1",
};

async fn has_data_index(pool: &Pool) -> Result<bool, StoreError> {
    let sql = pool.dialect().sql(&HAS_DATA_INDEX);
    let count: i64 = on_pool!(pool, p => sqlx::query_scalar(sql).fetch_one(p).await).map_err(backend)?;
    Ok(count > 0)
}

/// The statement of one search and the bytes it binds, in order (MariaDB's
/// `?` are positional: a value named twice is bound twice).
fn statement(
    d: Dialect,
    l: Layout,
    value_type: &[u8],
    data: IndexMatch<'_>,
    after: Option<&IndexHit>,
) -> (String, Vec<Vec<u8>>) {
    let mut binds: Vec<Vec<u8>> = Vec::new();
    let mut param = |bytes: &[u8]| {
        binds.push(bytes.to_vec());
        d.param(binds.len())
    };
    let handle = l.bytes(d, Col::Handle);
    // Longer values are never found (nor held in a batch): a constant, not a bind.
    let mut sql = format!(
        "select data, {handle} as h from handles where {} = {} and length(data) <= {MAX_SEARCHED_LEN}",
        l.bytes(d, Col::Type),
        param(value_type)
    );
    match data {
        IndexMatch::Exact(v) => sql.push_str(&format!(" and data = {}", param(v))),
        IndexMatch::Prefix(p) => {
            sql.push_str(&format!(" and data >= {}", param(p)));
            if let Some(end) = prefix_end(p) {
                sql.push_str(&format!(" and data < {}", param(&end)));
            }
        }
    }
    if let Some(after) = after {
        // `data >= k` first, so that the index bounds the scan.
        let (k1, k2, k3) = (param(&after.key), param(&after.key), param(&after.key));
        let id = param(&after.id);
        sql.push_str(&format!(" and data >= {k1} and (data > {k2} or (data = {k3} and {handle} > {id}))"));
    }
    let limit = d.param(binds.len() + 1);
    sql.push_str(&format!(" order by data, {handle} limit {limit}"));
    (sql, binds)
}

impl SqlCore {
    pub(super) async fn find_values(
        &self,
        value_type: &[u8],
        data: IndexMatch<'_>,
        start_after: Option<&IndexHit>,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        self.check_open()?;
        if let ValueSearch::Declined(why) = &self.value_search {
            return Err(StoreError::Unsupported(why.clone()));
        }
        if limit == 0 {
            return Ok(Vec::new());
        }
        let (sql, binds) = statement(self.pool.dialect(), self.options.layout, value_type, data, start_after);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows: Vec<(Vec<u8>, Vec<u8>)> = on_pool!(&self.pool, p => {
            let mut q = sqlx::query_as(&sql);
            for b in &binds {
                q = q.bind(b.as_slice());
            }
            q.bind(limit).fetch_all(p).await
        })
        .map_err(backend)?;
        Ok(rows.into_iter().map(|(key, id)| IndexHit { key, id }).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_search_is_a_range_on_the_index_then_pages() {
        let after = IndexHit { key: b"https://x/2".to_vec(), id: b"T/2".to_vec() };
        let (sql, binds) =
            statement(Dialect::Postgres, Layout::default(), b"URL", IndexMatch::Prefix(b"https://x/"), Some(&after));
        assert_eq!(
            sql,
            "select data, handle as h from handles where type = $1 and length(data) <= 2048 and data >= $2 \
             and data < $3 and data >= $4 and (data > $5 or (data = $6 and handle > $7)) order by data, handle limit $8"
        );
        assert_eq!(binds.len(), 7);
        assert_eq!(binds[2], b"https://x0");
        let (sql, binds) = statement(Dialect::MySql, Layout::default(), b"URL", IndexMatch::Exact(b"a"), None);
        assert_eq!(
            sql,
            "select data, cast(handle as binary) as h from handles where cast(type as binary) = ? \
             and length(data) <= 2048 and data = ? order by data, cast(handle as binary) limit ?"
        );
        assert_eq!(binds, vec![b"URL".to_vec(), b"a".to_vec()]);
    }
}
