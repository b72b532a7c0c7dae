//! The registry's records: hyperty instances and data objects, stored as store
//! documents whose index entries cover every lookup of the API, plus the rules
//! the original applies to them (required keys, expiry, search matching, clock).

use handled_store::{DocExpect, Document, DocumentStore, IndexEntry, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The two kinds of record, each its own document collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Hyperty,
    DataObject,
}

/// Index names (per collection).
pub const IDX_USER: &str = "user";
pub const IDX_EMAIL: &str = "email";
pub const IDX_GUID: &str = "guid";
pub const IDX_NAME: &str = "name";
pub const IDX_REPORTER: &str = "reporter";
/// When a live record expires: big-endian (order-preserving) epoch second.
pub const IDX_DUE: &str = "due";
/// Records waiting in the change feed (`/registry/updated`).
pub const IDX_FEED: &str = "feed";
/// Disconnected records by when they went (due key), apart for those the
/// change feed has not handed out yet: the purge walks each up to its cut-off.
pub const IDX_GONE: &str = "gone";
pub const IDX_GONE_UNSEEN: &str = "gone_unseen";
/// The client address that created the record (per-peer quota).
pub const IDX_PEER: &str = "peer";

pub const DISCONNECTED: &str = "disconnected";
pub const LIVE: &str = "live";

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::Hyperty, Kind::DataObject];

    pub fn collection(self) -> &'static str {
        match self {
            Kind::Hyperty => "registry.hyperty",
            Kind::DataObject => "registry.dataobject",
        }
    }

    /// Keys a create must carry.
    pub fn required(self) -> &'static [&'static str] {
        match self {
            Kind::Hyperty => &["expires", "dataSchemes", "resources", "runtime", "status", "descriptor"],
            Kind::DataObject => {
                &["schema", "name", "reporter", "resources", "dataSchemes", "status", "expires", "runtime"]
            }
        }
    }

    /// Every key the original's record class has: anything else a client sends is
    /// accepted but not kept (it deserialized bodies into those classes).
    pub fn known(self) -> &'static [&'static str] {
        match self {
            Kind::Hyperty => &[
                "descriptor",
                "resources",
                "dataSchemes",
                "expires",
                "status",
                "runtime",
                "p2pRequester",
                "p2pHandler",
                "guid",
                "startingTime",
                "lastModified",
                "hypertyID",
                "userID",
            ],
            Kind::DataObject => &[
                "name",
                "schema",
                "reporter",
                "resources",
                "dataSchemes",
                "status",
                "expires",
                "runtime",
                "p2pRequester",
                "url",
                "startingTime",
                "lastModified",
            ],
        }
    }

    /// The field holding the record's own id.
    pub fn id_field(self) -> &'static str {
        match self {
            Kind::Hyperty => "hypertyID",
            Kind::DataObject => "url",
        }
    }
}

/// A record as stored: the client-visible object plus what the server needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stored {
    /// The JSON object answered to clients.
    pub obj: Map<String, Value>,
    /// `lastModified` as an epoch second (the string form is in `obj`).
    pub lm: i64,
    /// Waiting in the change feed.
    #[serde(default)]
    pub notify: bool,
    /// When it went `disconnected` (by expiry or delete; none while live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone: Option<i64>,
    /// The client address that created it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer: Option<String>,
}

/// Why a body cannot be stored: answered as a bare 400.
#[derive(Debug)]
pub struct BadBody;

impl Stored {
    /// A new record made at `now` by `peer`.
    pub fn new(obj: Map<String, Value>, now: i64, peer: Option<String>) -> Stored {
        let mut s = Stored { obj, lm: now, notify: false, gone: None, peer };
        s.touch(now);
        s
    }

    pub fn status(&self) -> &str {
        self.obj.get("status").and_then(Value::as_str).unwrap_or("")
    }

    pub fn is_disconnected(&self) -> bool {
        self.status() == DISCONNECTED
    }

    pub fn expires(&self) -> i64 {
        self.obj.get("expires").and_then(Value::as_i64).unwrap_or(0)
    }

    pub fn str_field(&self, k: &str) -> Option<&str> {
        self.obj.get(k).and_then(Value::as_str)
    }

    /// Expired: `now − lastModified > expires`, in whole seconds, and not yet marked.
    pub fn is_due(&self, now: i64) -> bool {
        !self.is_disconnected() && now - self.lm > self.expires()
    }

    pub fn set_status(&mut self, s: &str) {
        self.obj.insert("status".into(), Value::String(s.into()));
    }

    /// Touch: `lastModified` = now (a client's write: the record is not gone).
    pub fn touch(&mut self, now: i64) {
        self.lm = now;
        self.gone = None;
        self.obj.insert("lastModified".into(), Value::String(format_time(now)));
    }

    /// Mark disconnected and queue for the change feed (expiry, delete).
    pub fn disconnect(&mut self, now: i64) {
        self.set_status(DISCONNECTED);
        self.notify = true;
        self.gone = Some(now);
    }

    /// When it went: for a record a client set `disconnected` itself, its last write.
    pub fn gone_at(&self) -> i64 {
        self.gone.unwrap_or(self.lm)
    }

    /// The store document: body plus the index entries of every lookup.
    pub fn to_document(&self, kind: Kind) -> Document {
        let mut index = Vec::new();
        let mut add = |name: &str, v: Option<&str>| {
            if let Some(v) = v {
                index.push(IndexEntry::new(name, v.as_bytes()));
            }
        };
        match kind {
            Kind::Hyperty => {
                let user = self.str_field("userID");
                add(IDX_USER, user);
                add(IDX_EMAIL, user.map(email_of));
                add(IDX_GUID, self.str_field("guid").filter(|g| !g.is_empty()));
            }
            Kind::DataObject => {
                add(IDX_NAME, self.str_field("name"));
                add(IDX_REPORTER, self.str_field("reporter"));
            }
        }
        add(IDX_PEER, self.peer.as_deref());
        if !self.is_disconnected() {
            // First second at which `now − lm > expires` holds.
            let due = self.lm.saturating_add(self.expires()).saturating_add(1);
            index.push(IndexEntry::new(IDX_DUE, due_key(due).to_vec()));
        }
        if self.notify {
            index.push(IndexEntry::new(IDX_FEED, Vec::new()));
        }
        if self.is_disconnected() {
            let gone = if self.notify { IDX_GONE_UNSEEN } else { IDX_GONE };
            index.push(IndexEntry::new(gone, due_key(self.gone_at()).to_vec()));
        }
        let body = serde_json::to_vec(self).expect("a JSON map always serializes");
        Document::new(body, index)
    }

    pub fn from_document(d: &Document) -> Option<Stored> {
        match serde_json::from_slice(&d.body) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!("undecodable registry record: {e}");
                None
            }
        }
    }
}

/// Order-preserving key of a signed epoch second.
pub fn due_key(t: i64) -> [u8; 8] {
    ((t as u64) ^ (1 << 63)).to_be_bytes()
}

pub fn due_of_key(k: &[u8]) -> Option<i64> {
    Some((u64::from_be_bytes(k.try_into().ok()?) ^ (1 << 63)) as i64)
}

/// The user's "email": the last `/`-segment of the user id.
pub fn email_of(user: &str) -> &str {
    user.rsplit('/').next().unwrap_or(user)
}

/// Keep only the record class's keys; normalize `expires` to an integer clamped
/// to `max` (the original's Gson also read numeric strings as ints).
pub fn sanitize(kind: Kind, obj: &mut Map<String, Value>, expires_max: i64) -> Result<(), BadBody> {
    obj.retain(|k, _| kind.known().contains(&k.as_str()));
    if let Some(v) = obj.get("expires") {
        let n = match v {
            Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
            Value::String(s) => s.trim().parse::<i64>().ok(),
            Value::Null => Some(0),
            _ => None,
        };
        let n = n.ok_or(BadBody)?.min(expires_max);
        obj.insert("expires".into(), Value::from(n));
    }
    for list in ["resources", "dataSchemes"] {
        if !matches!(obj.get(list), None | Some(Value::Array(_)) | Some(Value::Null)) {
            return Err(BadBody);
        }
    }
    Ok(())
}

/// A create body: a JSON object carrying every required key.
pub fn parse_create(kind: Kind, body: &[u8], expires_max: i64) -> Result<Map<String, Value>, BadBody> {
    let Ok(Value::Object(mut obj)) = serde_json::from_slice::<Value>(body) else { return Err(BadBody) };
    if kind.required().iter().any(|k| !obj.contains_key(*k)) {
        return Err(BadBody);
    }
    sanitize(kind, &mut obj, expires_max)?;
    Ok(obj)
}

/// A search: the lists a candidate's `resources` and `dataSchemes` must contain.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Search {
    pub resources: Option<Vec<String>>,
    pub data_schemes: Option<Vec<String>>,
}

impl Search {
    /// From decoded query parameters: exactly `resources`, `dataSchemes`, or both;
    /// anything else is no search (the original answers 404).
    pub fn from_params(params: &[(String, String)]) -> Option<Search> {
        let mut s = Search::default();
        for (k, v) in params {
            // Comma-separated, as Java's split: trailing empty parts dropped.
            let mut list: Vec<String> = v.split(',').map(str::to_owned).collect();
            while list.len() > 1 && list.last().is_some_and(String::is_empty) {
                list.pop();
            }
            match k.as_str() {
                "resources" => s.resources = Some(list),
                "dataSchemes" => s.data_schemes = Some(list),
                _ => return None,
            }
        }
        (s.resources.is_some() || s.data_schemes.is_some()).then_some(s)
    }

    /// Candidate's lists ⊇ the requested ones (set semantics).
    pub fn matches(&self, obj: &Map<String, Value>) -> bool {
        let has_all = |field: &str, want: &Option<Vec<String>>| {
            let Some(want) = want else { return true };
            let have: Vec<&str> = match obj.get(field) {
                Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            want.iter().all(|w| have.contains(&w.as_str()))
        };
        has_all("resources", &self.resources) && has_all("dataSchemes", &self.data_schemes)
    }
}

pub fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0)
}

/// `yyyy-MM-dd'T'HH:mm:ss'Z'` at one-second resolution. The original printed JVM
/// local time with a literal `Z`; we print UTC, which is what that is on the
/// usual UTC-clocked server.
pub fn format_time(t: i64) -> String {
    let (days, secs) = (t.div_euclid(86_400), t.rem_euclid(86_400));
    // Civil-from-days (H. Hinnant).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

/// A record stored before the purge existed has no "gone" index entry, so it
/// would never be removed: rewrite its document with the entries it has now (a
/// compare-and-set; a record changed meanwhile already has them).
pub(super) async fn reindex_if_old(
    store: &dyn DocumentStore,
    kind: Kind,
    id: &[u8],
    doc: &Document,
) -> Result<(), StoreError> {
    let Some(s) = Stored::from_document(doc) else { return Ok(()) };
    let current = s.to_document(kind);
    if current.index == doc.index {
        return Ok(());
    }
    store.doc_swap(kind.collection(), id, DocExpect::Present(doc.clone()), Some(current)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn time_format() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_time(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(format_time(4_102_444_799), "2099-12-31T23:59:59Z");
    }

    #[test]
    fn due_keys_sort_like_numbers() {
        let mut ts = [-5i64, 0, 3, 1_700_000_000, i64::MAX, i64::MIN];
        let mut ks: Vec<_> = ts.iter().map(|t| due_key(*t)).collect();
        ks.sort();
        ts.sort();
        assert_eq!(ks, ts.iter().map(|t| due_key(*t)).collect::<Vec<_>>());
        assert_eq!(due_of_key(&due_key(-5)), Some(-5));
    }

    #[test]
    fn search_params_and_matching() {
        let p = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();
        assert_eq!(Search::from_params(&p(&[])), None);
        assert_eq!(Search::from_params(&p(&[("resources", "a"), ("x", "1")])), None);
        let s = Search::from_params(&p(&[("resources", "chat,voice,chat"), ("dataSchemes", "comm")])).unwrap();
        let o = json!({"resources": ["voice", "chat", "video"], "dataSchemes": ["comm"]});
        assert!(s.matches(o.as_object().unwrap()));
        let o = json!({"resources": ["chat"], "dataSchemes": ["comm"]});
        assert!(!s.matches(o.as_object().unwrap()));
        let s = Search::from_params(&p(&[("dataSchemes", "comm")])).unwrap();
        assert!(!s.matches(json!({"dataSchemes": ["x"]}).as_object().unwrap()));
    }

    #[test]
    fn create_needs_required_keys_and_drops_unknown_ones() {
        let body = br#"{"descriptor":"d","resources":["chat"],"dataSchemes":["comm"],"expires":"99999","status":"live","runtime":"r","extra":1}"#;
        let o = parse_create(Kind::Hyperty, body, 3600).unwrap();
        assert_eq!(o["expires"], json!(3600));
        assert!(!o.contains_key("extra"));
        assert!(parse_create(Kind::Hyperty, br#"{"descriptor":"d"}"#, 3600).is_err());
        assert!(parse_create(Kind::Hyperty, b"", 3600).is_err());
        assert!(parse_create(Kind::Hyperty, b"[]", 3600).is_err());
    }

    #[test]
    fn index_entries_follow_the_record() {
        let mut s = Stored::new(Map::new(), 100, None);
        s.obj.insert("userID".into(), json!("user://g.com/a@b.c"));
        s.obj.insert("expires".into(), json!(10));
        s.obj.insert("status".into(), json!("live"));
        let d = s.to_document(Kind::Hyperty);
        let names: Vec<&str> = d.index.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["due", "email", "user"]);
        assert!(d.index.contains(&IndexEntry::new("email", "a@b.c")));
        assert!(d.index.contains(&IndexEntry::new("due", due_key(111).to_vec())));
        assert!(!s.is_due(110) && s.is_due(111));
        s.disconnect(120);
        let d = s.to_document(Kind::Hyperty);
        let names: Vec<&str> = d.index.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["email", "feed", "gone_unseen", "user"]);
        assert!(d.index.contains(&IndexEntry::new("gone_unseen", due_key(120).to_vec())));
        s.notify = false; // the change feed has handed it out
        s.peer = Some("127.0.0.1".into());
        let names: Vec<String> = s.to_document(Kind::Hyperty).index.into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["email", "gone", "peer", "user"]);
        s.touch(130);
        assert_eq!((s.gone, s.gone_at()), (None, 130), "a client's write: not gone any more");
    }
}
