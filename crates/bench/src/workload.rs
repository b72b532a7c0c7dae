//! What each client asks for. A workload hands a client its next operation;
//! the target (transport) decides how that operation goes on the wire.

use rand::Rng;
use rand_distr::{Distribution, Zipf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Which handles are resolved.
#[derive(Debug, Clone)]
pub enum KeySet {
    /// Always the same handle (the hot-handle case).
    One(String),
    /// Uniformly random over `prefix/0 .. prefix/(count-1)`.
    Uniform { prefix: String, count: u64 },
    /// Zipf-distributed over the same names: rank k (from 0) drawn with
    /// probability ∝ 1/(k+1)^s, so a few handles are hot and most are cold.
    Zipf { prefix: String, count: u64, s: f64 },
}

/// A key picked for one request: the handle and its index in the key set.
#[derive(Debug, Clone, PartialEq)]
pub struct Key {
    pub handle: String,
    pub n: u64,
}

impl KeySet {
    pub fn sampler(&self) -> Result<KeySampler, String> {
        let zipf = match self {
            KeySet::Zipf { count, s, .. } => {
                Some(Zipf::new(*count as f64, *s).map_err(|e| format!("zipf over {count} keys with s={s}: {e}"))?)
            }
            _ => None,
        };
        Ok(KeySampler { keys: self.clone(), zipf })
    }
}

pub struct KeySampler {
    keys: KeySet,
    zipf: Option<Zipf<f64>>,
}

impl KeySampler {
    pub fn pick(&self, rng: &mut impl Rng) -> Key {
        let (prefix, n) = match &self.keys {
            KeySet::One(h) => return Key { handle: h.clone(), n: 0 },
            KeySet::Uniform { prefix, count } => (prefix, rng.random_range(0..*count)),
            KeySet::Zipf { prefix, .. } => {
                let z = self.zipf.as_ref().expect("built with the key set");
                (prefix, z.sample(rng) as u64 - 1)
            }
        };
        Key { handle: format!("{prefix}/{n}"), n }
    }
}

/// One operation of a workload.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Resolve a handle (native resolution, or GET of the URL template).
    Resolve(Key),
    /// Resolve with CT set: the server signs every answer (native and tunnel only).
    ResolveCertified(Key),
    /// GET_SITE_INFO (native and tunnel only).
    SiteInfo,
    /// Authenticated: create this fresh handle with one URL value (index 1).
    Create(String),
    /// Authenticated: replace the URL value (index 1) of the handle.
    Modify(String),
    /// Authenticated: add an EMAIL value at index 2.
    AddValue(String),
    /// Authenticated: remove the value at index 2.
    RemoveValue(String),
    /// Authenticated: delete the handle.
    Delete(String),
}

impl Op {
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    pub fn kind(&self) -> OpKind {
        match self {
            Op::Resolve(_) => OpKind::Resolve,
            Op::ResolveCertified(_) => OpKind::ResolveCertified,
            Op::SiteInfo => OpKind::SiteInfo,
            Op::Create(_) => OpKind::Create,
            Op::Modify(_) => OpKind::Modify,
            Op::AddValue(_) => OpKind::AddValue,
            Op::RemoveValue(_) => OpKind::RemoveValue,
            Op::Delete(_) => OpKind::Delete,
        }
    }
}

/// An operation kind in a mixed loop. Resolutions take their keys from the
/// workload's key set, or the client's last created handle when the loop
/// creates; the admin kinds work on the client's last created handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Resolve,
    ResolveCertified,
    SiteInfo,
    Create,
    Modify,
    AddValue,
    RemoveValue,
    Delete,
}

const OP_NAMES: [(OpKind, &str); 8] = [
    (OpKind::Resolve, "resolve"),
    (OpKind::ResolveCertified, "resolve-certified"),
    (OpKind::SiteInfo, "site-info"),
    (OpKind::Create, "create"),
    (OpKind::Modify, "modify"),
    (OpKind::AddValue, "add-value"),
    (OpKind::RemoveValue, "remove-value"),
    (OpKind::Delete, "delete"),
];

/// The mixed loop of issue 6: a handle's whole life, per client.
pub const MIXED_LOOP: [OpKind; 6] =
    [OpKind::Create, OpKind::Resolve, OpKind::Modify, OpKind::AddValue, OpKind::RemoveValue, OpKind::Delete];

impl OpKind {
    pub fn name(self) -> &'static str {
        OP_NAMES.iter().find(|(k, _)| *k == self).map_or("?", |(_, n)| n)
    }

    /// Needs an authenticated administrator (a session, or Basic on the JSON API).
    pub fn is_admin(self) -> bool {
        matches!(self, OpKind::Create | OpKind::Modify | OpKind::AddValue | OpKind::RemoveValue | OpKind::Delete)
    }

    /// `mixed` is the whole loop (create, resolve, modify, add-value, remove-value, delete).
    pub fn parse_list(text: &str) -> Result<Vec<OpKind>, String> {
        let mut out = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            if part == "mixed" {
                out.extend(MIXED_LOOP);
            } else {
                out.push(part.parse()?);
            }
        }
        if out.is_empty() {
            return Err("no operations given".into());
        }
        Ok(out)
    }
}

impl std::str::FromStr for OpKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        OP_NAMES.iter().find(|(_, n)| *n == s).map(|(k, _)| *k).ok_or_else(|| {
            let names: Vec<&str> = OP_NAMES.iter().map(|(_, n)| *n).collect();
            format!("unknown operation {s:?} (available: {}, or mixed)", names.join(", "))
        })
    }
}

/// Fresh handle names for creation: `PREFIX/bench-RUN-CLIENT-N`. RUN is
/// unique per bench process (time and randomness), CLIENT unique within it
/// (handed out by a counter shared by every clone), so reruns and several
/// bench processes against one server never collide.
#[derive(Debug, Clone)]
pub struct FreshNames {
    pub prefix: String,
    pub run_id: String,
    next_client: Arc<AtomicU64>,
}

impl FreshNames {
    pub fn new(prefix: &str) -> FreshNames {
        let ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
        FreshNames::with_run_id(prefix, &format!("{ms:x}{:04x}", rand::random::<u16>()))
    }

    pub fn with_run_id(prefix: &str, run_id: &str) -> FreshNames {
        FreshNames {
            prefix: prefix.trim_end_matches('/').to_string(),
            run_id: run_id.to_string(),
            next_client: Arc::default(),
        }
    }

    pub fn name(&self, client: u64, n: u64) -> String {
        format!("{}/bench-{}-{client}-{n}", self.prefix, self.run_id)
    }
}

/// What every client does in a loop.
#[derive(Debug, Clone)]
pub struct Workload {
    pub keys: KeySet,
    /// The per-client loop; `[Resolve]` for plain resolution.
    pub ops: Vec<OpKind>,
    /// Where `create` puts its handles; needed when the loop creates.
    pub fresh: Option<FreshNames>,
}

impl Workload {
    pub fn resolve(keys: KeySet) -> Workload {
        Workload { keys, ops: vec![OpKind::Resolve], fresh: None }
    }

    /// A loop of `ops` creating fresh handles under `prefix`.
    pub fn admin(prefix: &str, ops: Vec<OpKind>) -> Workload {
        Workload { keys: KeySet::One(format!("{prefix}/ADMIN")), ops, fresh: Some(FreshNames::new(prefix)) }
    }

    /// Checks the loop can run: a create before any op that needs its handle.
    pub fn validate(&self) -> Result<(), String> {
        if self.ops.is_empty() {
            return Err("the workload has no operations".into());
        }
        let first_create = self.ops.iter().position(|k| *k == OpKind::Create);
        if first_create.is_some() && self.fresh.is_none() {
            return Err("create needs a prefix for fresh handle names".into());
        }
        if let Some((i, k)) = self.ops.iter().enumerate().find(|(_, k)| k.is_admin() && **k != OpKind::Create) {
            if first_create.is_none_or(|c| c > i) {
                return Err(format!(
                    "{} works on the client's last created handle: put create before it in --ops",
                    k.name()
                ));
            }
        }
        Ok(())
    }

    pub fn client(&self) -> Result<ClientState, String> {
        self.validate()?;
        let id = self.fresh.as_ref().map_or(0, |f| f.next_client.fetch_add(1, Ordering::Relaxed));
        Ok(ClientState {
            sampler: self.keys.sampler()?,
            ops: self.ops.clone(),
            step: 0,
            fresh: self.fresh.clone(),
            id,
            created: 0,
            current: None,
        })
    }
}

/// A client's position in its loop.
pub struct ClientState {
    sampler: KeySampler,
    ops: Vec<OpKind>,
    step: usize,
    fresh: Option<FreshNames>,
    /// This client's number in its fresh names.
    id: u64,
    created: u64,
    /// The handle this client created last.
    current: Option<Key>,
}

impl ClientState {
    pub fn next(&mut self, rng: &mut impl Rng) -> Op {
        let kind = self.ops[self.step % self.ops.len()];
        self.step += 1;
        let key = match &self.current {
            Some(k) => k.clone(),
            None => self.sampler.pick(rng),
        };
        match kind {
            OpKind::Resolve => Op::Resolve(key),
            OpKind::ResolveCertified => Op::ResolveCertified(key),
            OpKind::SiteInfo => Op::SiteInfo,
            OpKind::Create => {
                let fresh = self.fresh.as_ref().expect("validated: create has fresh names");
                let key = Key { handle: fresh.name(self.id, self.created), n: self.created };
                self.created += 1;
                self.current = Some(key.clone());
                Op::Create(key.handle)
            }
            OpKind::Modify => Op::Modify(key.handle),
            OpKind::AddValue => Op::AddValue(key.handle),
            OpKind::RemoveValue => Op::RemoveValue(key.handle),
            OpKind::Delete => Op::Delete(key.handle),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let s = KeySet::Zipf { prefix: "T".into(), count: 1000, s: 1.0 }.sampler().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            let k = s.pick(&mut rng);
            assert_eq!(k.handle, format!("T/{}", k.n));
            counts[k.n as usize] += 1;
        }
        // P(rank 0) = 1/H(1000) ≈ 13.4 %; rank 1 about half of that.
        assert!((12_000..15_000).contains(&counts[0]), "{}", counts[0]);
        assert!(counts[1] * 2 > counts[0] * 8 / 10 && counts[1] * 2 < counts[0] * 12 / 10);
        assert!(counts[999] < 50);
    }

    #[test]
    fn uniform_covers_the_key_set() {
        let s = KeySet::Uniform { prefix: "T".into(), count: 10 }.sampler().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[s.pick(&mut rng).n as usize] = true;
        }
        assert!(seen.iter().all(|x| *x));
    }

    #[test]
    fn mixed_loop_cycles_in_order() {
        let w = Workload { keys: KeySet::One("T/1".into()), ops: vec![OpKind::Resolve, OpKind::SiteInfo], fresh: None };
        let mut c = w.client().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let names: Vec<_> = (0..4).map(|_| c.next(&mut rng).name()).collect();
        assert_eq!(names, ["resolve", "site-info", "resolve", "site-info"]);
        assert!("frobnicate".parse::<OpKind>().is_err());
    }

    #[test]
    fn mixed_loop_works_on_each_clients_fresh_handle() {
        let mut w = Workload::admin("T", OpKind::parse_list("mixed").unwrap());
        w.fresh = Some(FreshNames::with_run_id("T", "r1"));
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let (mut a, mut b) = (w.client().unwrap(), w.clone().client().unwrap());
        let ops: Vec<Op> = (0..7).map(|_| a.next(&mut rng)).collect();
        assert_eq!(ops[0], Op::Create("T/bench-r1-0-0".into()));
        assert_eq!(ops[1], Op::Resolve(Key { handle: "T/bench-r1-0-0".into(), n: 0 }));
        assert_eq!(ops[5], Op::Delete("T/bench-r1-0-0".into()));
        assert_eq!(ops[6], Op::Create("T/bench-r1-0-1".into()));
        // Clones share the client counter: no two clients share names.
        assert_eq!(b.next(&mut rng), Op::Create("T/bench-r1-1-0".into()));
        let names: Vec<&str> = ops[..6].iter().map(Op::name).collect();
        assert_eq!(names, ["create", "resolve", "modify", "add-value", "remove-value", "delete"]);
    }

    #[test]
    fn loops_that_cannot_run_are_refused() {
        let w = Workload {
            keys: KeySet::One("T/1".into()),
            ops: vec![OpKind::Modify, OpKind::Create],
            fresh: Some(FreshNames::new("T")),
        };
        assert!(w.validate().unwrap_err().contains("put create before it"));
        let w = Workload { keys: KeySet::One("T/1".into()), ops: vec![OpKind::Create], fresh: None };
        assert!(w.validate().is_err());
        assert!(OpKind::parse_list("").is_err());
        assert_eq!(OpKind::parse_list("resolve,mixed").unwrap().len(), 7);
    }
}
