//! What each client asks for. A workload hands a client its next operation;
//! the target (transport) decides how that operation goes on the wire.

use rand::Rng;
use rand_distr::{Distribution, Zipf};

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
            KeySet::Zipf { count, s, .. } => Some(
                Zipf::new(*count as f64, *s)
                    .map_err(|e| format!("zipf over {count} keys with s={s}: {e}"))?,
            ),
            _ => None,
        };
        Ok(KeySampler {
            keys: self.clone(),
            zipf,
        })
    }
}

pub struct KeySampler {
    keys: KeySet,
    zipf: Option<Zipf<f64>>,
}

impl KeySampler {
    pub fn pick(&self, rng: &mut impl Rng) -> Key {
        let (prefix, n) = match &self.keys {
            KeySet::One(h) => {
                return Key {
                    handle: h.clone(),
                    n: 0,
                }
            }
            KeySet::Uniform { prefix, count } => (prefix, rng.random_range(0..*count)),
            KeySet::Zipf { prefix, .. } => {
                let z = self.zipf.as_ref().expect("built with the key set");
                (prefix, z.sample(rng) as u64 - 1)
            }
        };
        Key {
            handle: format!("{prefix}/{n}"),
            n,
        }
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
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self {
            Op::Resolve(_) => "resolve",
            Op::ResolveCertified(_) => "resolve-certified",
            Op::SiteInfo => "site-info",
        }
    }
}

/// An operation kind in a mixed loop; keys come from the workload's key set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Resolve,
    ResolveCertified,
    SiteInfo,
}

impl std::str::FromStr for OpKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "resolve" => Ok(OpKind::Resolve),
            "resolve-certified" => Ok(OpKind::ResolveCertified),
            "site-info" => Ok(OpKind::SiteInfo),
            // Admin operations come with the client's authenticated session API.
            other => Err(format!(
                "unknown operation {other:?} (available: resolve, resolve-certified, site-info)"
            )),
        }
    }
}

/// What every client does in a loop.
///
/// Creation (a session per client, fresh names) and admin operations in the
/// mixed loop plug in here as further `OpKind`s once `handled-client` has
/// authenticated sessions; a client then carries its session in `ClientState`.
#[derive(Debug, Clone)]
pub struct Workload {
    pub keys: KeySet,
    /// The per-client loop; `[Resolve]` for plain resolution.
    pub ops: Vec<OpKind>,
}

impl Workload {
    pub fn resolve(keys: KeySet) -> Workload {
        Workload {
            keys,
            ops: vec![OpKind::Resolve],
        }
    }

    pub fn client(&self) -> Result<ClientState, String> {
        Ok(ClientState {
            sampler: self.keys.sampler()?,
            ops: self.ops.clone(),
            step: 0,
        })
    }
}

/// A client's position in its loop.
pub struct ClientState {
    sampler: KeySampler,
    ops: Vec<OpKind>,
    step: usize,
}

impl ClientState {
    pub fn next(&mut self, rng: &mut impl Rng) -> Op {
        let kind = self.ops[self.step % self.ops.len()];
        self.step += 1;
        match kind {
            OpKind::Resolve => Op::Resolve(self.sampler.pick(rng)),
            OpKind::ResolveCertified => Op::ResolveCertified(self.sampler.pick(rng)),
            OpKind::SiteInfo => Op::SiteInfo,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let s = KeySet::Zipf {
            prefix: "T".into(),
            count: 1000,
            s: 1.0,
        }
        .sampler()
        .unwrap();
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
        let s = KeySet::Uniform {
            prefix: "T".into(),
            count: 10,
        }
        .sampler()
        .unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[s.pick(&mut rng).n as usize] = true;
        }
        assert!(seen.iter().all(|x| *x));
    }

    #[test]
    fn mixed_loop_cycles_in_order() {
        let w = Workload {
            keys: KeySet::One("T/1".into()),
            ops: vec![OpKind::Resolve, OpKind::SiteInfo],
        };
        let mut c = w.client().unwrap();
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        let names: Vec<_> = (0..4).map(|_| c.next(&mut rng).name()).collect();
        assert_eq!(names, ["resolve", "site-info", "resolve", "site-info"]);
        assert!("create".parse::<OpKind>().is_err());
    }
}
