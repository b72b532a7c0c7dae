//! Registry operations on the store: every write is a per-record compare-and-set
//! of the record's document (its index entries move with it), every lookup goes
//! through an index, and expiry is applied on the way out of every read.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use handled_store::{DocExpect, DocOutcome, DocumentStore, IndexHit, IndexMatch, StoreError};
use serde_json::{Map, Value};

use super::model::{
    due_of_key, email_of, format_time, now_secs, parse_create, sanitize, Kind, Stored, IDX_DUE, IDX_EMAIL, IDX_FEED,
    IDX_GUID, IDX_USER, LIVE,
};
use super::Settings;

/// How an operation failed, before it becomes a status code.
#[derive(Debug)]
pub enum Error {
    NotFound,
    BadRequest,
    /// A new record beyond a quota (why).
    Quota(String),
    Store(StoreError),
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Error::Store(e)
    }
}

/// Records found by a lookup, by id.
pub type Found = BTreeMap<String, Stored>;

const PAGE: usize = 512;

pub struct Registry {
    pub(super) store: Arc<dyn DocumentStore>,
    pub settings: Settings,
    pub(super) hyperties: AtomicU64,
}

impl Registry {
    /// Counts the stored hyperties once (for `/live`) and gives records written
    /// before the purge existed its index entries; fails if the store has no documents.
    pub async fn open(store: Arc<dyn DocumentStore>, settings: Settings) -> Result<Registry, StoreError> {
        let mut hyperties = 0u64;
        for kind in Kind::ALL {
            let mut after: Option<Vec<u8>> = None;
            loop {
                let page = store.doc_scan(kind.collection(), b"", after.as_deref(), 4096).await?;
                if kind == Kind::Hyperty {
                    hyperties += page.len() as u64;
                }
                for (id, doc) in &page {
                    super::model::reindex_if_old(&*store, kind, id, doc).await?;
                }
                match page.into_iter().last() {
                    Some((id, _)) => after = Some(id),
                    None => break,
                }
            }
        }
        Ok(Registry { store, settings, hyperties: AtomicU64::new(hyperties) })
    }

    pub fn hyperties_stored(&self) -> u64 {
        self.hyperties.load(Ordering::Relaxed)
    }

    /// Read-modify-write of one record by compare-and-set, retried on conflict.
    /// `f` sees the current record (already decoded) and the time, and returns the
    /// new record to write (or `None` to write nothing) and its answer.
    async fn modify<T>(
        &self,
        kind: Kind,
        id: &str,
        mut f: impl FnMut(Option<Stored>, i64) -> Result<(Option<Stored>, T), Error>,
    ) -> Result<T, Error> {
        let coll = kind.collection();
        loop {
            let doc = self.store.doc_get(coll, id.as_bytes()).await?;
            let current = doc.as_ref().and_then(Stored::from_document);
            let (new, answer) = f(current, now_secs())?;
            let Some(new) = new else { return Ok(answer) };
            let expect = match doc {
                Some(d) => DocExpect::Present(d),
                None => DocExpect::Absent,
            };
            match self.store.doc_swap(coll, id.as_bytes(), expect, Some(new.to_document(kind))).await? {
                DocOutcome::Done { .. } => return Ok(answer),
                DocOutcome::Conflict { .. } => continue,
            }
        }
    }

    /// One record, with expiry applied (an expired record is marked
    /// `disconnected` and queued for the change feed, durably, before it is answered).
    pub async fn load(&self, kind: Kind, id: &str) -> Result<Option<Stored>, Error> {
        let Some(doc) = self.store.doc_get(kind.collection(), id.as_bytes()).await? else { return Ok(None) };
        let Some(s) = Stored::from_document(&doc) else { return Ok(None) };
        if !s.is_due(now_secs()) {
            return Ok(Some(s));
        }
        self.modify(kind, id, |cur, now| match cur {
            Some(mut c) if c.is_due(now) => {
                c.disconnect(now);
                Ok((Some(c.clone()), Some(c)))
            }
            other => Ok((None, other)),
        })
        .await
    }

    pub(super) async fn lookup(&self, kind: Kind, index: &str, key: IndexMatch<'_>) -> Result<Vec<IndexHit>, Error> {
        let mut out = Vec::new();
        loop {
            let page = self.store.doc_lookup(kind.collection(), index, key, out.last(), PAGE).await?;
            let done = page.len() < PAGE;
            out.extend(page);
            if done {
                return Ok(out);
            }
        }
    }

    async fn load_hits(&self, kind: Kind, hits: Vec<IndexHit>) -> Result<Found, Error> {
        let mut found = Found::new();
        for h in hits {
            let id = String::from_utf8_lossy(&h.id).into_owned();
            if let Some(s) = self.load(kind, &id).await? {
                found.insert(id, s);
            }
        }
        Ok(found)
    }

    /// Records of `kind` under one exact index key.
    pub async fn by_index(&self, kind: Kind, index: &str, key: &str) -> Result<Found, Error> {
        let hits = self.lookup(kind, index, IndexMatch::Exact(key.as_bytes())).await?;
        self.load_hits(kind, hits).await
    }

    /// `PUT /hyperty/user/{user}/{id}` from `peer`: create (within the quotas),
    /// or replace the same user's record (keeping `startingTime`); another
    /// user's record is not touched (404).
    pub async fn put_hyperty(&self, peer: IpAddr, user: &str, id: &str, body: &[u8]) -> Result<(), Error> {
        let obj = parse_create(Kind::Hyperty, body, self.settings.expires_max).map_err(|_| Error::BadRequest)?;
        self.check_quota(Kind::Hyperty, id, Some(user), peer).await?;
        let created = self
            .modify(Kind::Hyperty, id, |cur, now| {
                if cur.as_ref().is_some_and(|c| c.str_field("userID") != Some(user)) {
                    return Err(Error::NotFound);
                }
                let mut o = obj.clone();
                let started = cur.as_ref().and_then(|c| c.obj.get("startingTime").cloned());
                o.insert("startingTime".into(), started.unwrap_or_else(|| Value::String(format_time(now))));
                o.insert("hypertyID".into(), Value::String(id.into()));
                o.insert("userID".into(), Value::String(user.into()));
                // The creator stays the creator across replacements.
                let creator = cur.as_ref().map_or(Some(peer.to_string()), |c| c.peer.clone());
                Ok((Some(Stored::new(o, now, creator)), cur.is_none()))
            })
            .await?;
        if created {
            self.hyperties.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// `DELETE /hyperty/user/{user}/{id}`: soft delete, queued for the change feed.
    pub async fn delete_hyperty(&self, user: &str, id: &str) -> Result<(), Error> {
        self.modify(Kind::Hyperty, id, |cur, now| match cur {
            Some(mut c) if c.str_field("userID") == Some(user) => {
                c.disconnect(now);
                Ok((Some(c), ()))
            }
            _ => Err(Error::NotFound),
        })
        .await
    }

    /// Hyperties of every user that some hyperty with this guid belongs to.
    pub async fn by_guid(&self, guid: &str) -> Result<Found, Error> {
        let mut users: Vec<String> = Vec::new();
        for s in self.by_index(Kind::Hyperty, IDX_GUID, guid).await?.into_values() {
            if let Some(u) = s.str_field("userID") {
                if !users.iter().any(|x| x == u) {
                    users.push(u.to_owned());
                }
            }
        }
        let mut found = Found::new();
        for u in users {
            found.extend(self.by_index(Kind::Hyperty, IDX_USER, &u).await?);
        }
        Ok(found)
    }

    /// Hyperties of every user whose id ends in `/{email}`.
    pub async fn by_email(&self, email: &str) -> Result<Found, Error> {
        let mut found = self.by_index(Kind::Hyperty, IDX_EMAIL, email_of(email)).await?;
        let suffix = format!("/{email}");
        found.retain(|_, s| s.str_field("userID").is_some_and(|u| u.ends_with(&suffix)));
        Ok(found)
    }

    /// `PUT …/url/{id}`: keep-alive when the raw body is exactly `{}`, else a
    /// shallow merge. Either way `lastModified` = now and the record leaves the
    /// change feed. Returns whether the status changed (an expired record counts
    /// as `disconnected` before).
    pub async fn touch(&self, kind: Kind, id: &str, body: &[u8]) -> Result<bool, Error> {
        let patch = if body == b"{}" {
            None
        } else {
            let Ok(Value::Object(mut p)) = serde_json::from_slice::<Value>(body) else { return Err(Error::BadRequest) };
            sanitize(kind, &mut p, self.settings.expires_max).map_err(|_| Error::BadRequest)?;
            Some(p)
        };
        self.modify(kind, id, |cur, now| {
            let Some(mut c) = cur else { return Err(Error::NotFound) };
            let before = if c.is_due(now) { super::model::DISCONNECTED.to_owned() } else { c.status().to_owned() };
            match &patch {
                None => c.set_status(LIVE),
                Some(p) => {
                    for (k, v) in p {
                        c.obj.insert(k.clone(), v.clone());
                    }
                    c.obj.insert(kind.id_field().into(), Value::String(id.into()));
                }
            }
            c.touch(now);
            c.notify = false;
            let changed = c.status() != before;
            Ok((Some(c), changed))
        })
        .await
    }

    /// `PUT /hyperty/dataobject/{url}` from `peer`: create (within the quotas)
    /// or full replace (keeps `startingTime`).
    pub async fn put_data_object(&self, peer: IpAddr, url: &str, body: &[u8]) -> Result<(), Error> {
        let obj = parse_create(Kind::DataObject, body, self.settings.expires_max).map_err(|_| Error::BadRequest)?;
        self.check_quota(Kind::DataObject, url, None, peer).await?;
        self.modify(Kind::DataObject, url, |cur, now| {
            let mut o = obj.clone();
            let started = cur.as_ref().and_then(|c| c.obj.get("startingTime").cloned());
            o.insert("startingTime".into(), started.unwrap_or_else(|| Value::String(format_time(now))));
            o.insert("url".into(), Value::String(url.into()));
            let creator = cur.as_ref().map_or(Some(peer.to_string()), |c| c.peer.clone());
            Ok((Some(Stored::new(o, now, creator)), ()))
        })
        .await
    }

    /// `GET /registry/updated`: what went to `disconnected` since the last call;
    /// taking a record out of the feed is a compare-and-set, so concurrent readers
    /// never both get it.
    pub async fn take_feed(&self) -> Result<Map<String, Value>, Error> {
        let mut out = Map::new();
        for kind in Kind::ALL {
            for h in self.lookup(kind, IDX_FEED, IndexMatch::Exact(b"")).await? {
                let id = String::from_utf8_lossy(&h.id).into_owned();
                let taken = self
                    .modify(kind, &id, |cur, _| match cur {
                        Some(mut c) if c.notify => {
                            c.notify = false;
                            Ok((Some(c.clone()), Some(c)))
                        }
                        _ => Ok((None, None)),
                    })
                    .await?;
                if let Some(c) = taken {
                    out.insert(id, Value::Object(c.obj));
                }
            }
        }
        Ok(out)
    }

    /// Mark every record whose deadline has passed (walks the deadline index up
    /// to now: the cost is the number of expired records, not of all records).
    pub async fn sweep(&self) -> Result<usize, Error> {
        let now = now_secs();
        let mut marked = 0;
        for kind in Kind::ALL {
            let mut after: Option<IndexHit> = None;
            'pages: loop {
                let page = self
                    .store
                    .doc_lookup(kind.collection(), IDX_DUE, IndexMatch::Prefix(b""), after.as_ref(), PAGE)
                    .await?;
                let full = page.len() == PAGE;
                for h in &page {
                    if due_of_key(&h.key).is_none_or(|due| due > now) {
                        break 'pages;
                    }
                    let id = String::from_utf8_lossy(&h.id);
                    if self.load(kind, &id).await?.is_some_and(|s| s.is_disconnected()) {
                        marked += 1;
                    }
                }
                after = page.last().cloned();
                if !full {
                    break;
                }
            }
        }
        Ok(marked)
    }
}
