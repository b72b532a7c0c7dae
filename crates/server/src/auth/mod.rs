//! Authentication (§5), independent of how a request arrived: who an
//! [`Identity`] is, pending challenges, the proof workers, signatures and
//! identities held on other servers. Checking a proof and deciding what an
//! identity may do use the server's state: [`crate::access`].

pub mod challenge;
pub mod remote;
pub mod signature;
pub mod work;

use handled_proto::handle::admin_ref_matches;

/// An authenticated administrator: a handle and the index of the key that
/// proved it (§5.5).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Identity {
    pub handle: Vec<u8>,
    pub index: i32,
    /// For a public-key identity claimed as index 0: the index of the HS_PUBKEY
    /// that verified; the caller then also counts as that index.
    pub key_index: Option<i32>,
}

impl Identity {
    pub fn new(handle: impl Into<Vec<u8>>, index: i32) -> Self {
        Identity { handle: handle.into(), index, key_index: None }
    }

    /// Does this identity match the admin reference `(handle, index)` (§5.6)?
    pub fn matches(&self, handle: &[u8], index: i32) -> bool {
        admin_ref_matches(&self.handle, self.index, handle, index)
            || self.key_index.is_some_and(|k| admin_ref_matches(&self.handle, k, handle, index))
    }

    /// `index:handle`, the usual way to write an identity.
    pub fn display(&self) -> String {
        format!("{}:{}", self.index, String::from_utf8_lossy(&self.handle))
    }
}

/// Who is asking: nobody in particular, or a proven identity.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    Anonymous,
    Authenticated(Identity),
}

impl Caller {
    pub fn identity(&self) -> Option<&Identity> {
        match self {
            Caller::Anonymous => None,
            Caller::Authenticated(i) => Some(i),
        }
    }
}

/// For unit tests: a golden vector made by the Java client library, read from
/// the in-repo copy in the proto crate (`crates/proto/tests/vectors/`).
#[cfg(test)]
pub(crate) fn test_vector(name: &str) -> serde_json::Value {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/tests/vectors").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_matching_with_key_index() {
        let mut id = Identity::new(b"TEST/ADMIN".to_vec(), 0);
        assert!(id.matches(b"test/ADMIN", 0));
        assert!(!id.matches(b"TEST/ADMIN", 301));
        id.key_index = Some(301);
        assert!(id.matches(b"TEST/ADMIN", 301));
        assert!(!id.matches(b"TEST/admin", 301), "suffixes compare exactly");
    }
}
