//! Server choice inside a multi-server site (§2.7, Java `SiteInfo.determineServerNum`).

use md5::{Digest, Md5};

/// Hash options of a site record (§2.7): which part of a handle picks the server.
pub const HASH_BY_PREFIX: u8 = 0;
pub const HASH_BY_SUFFIX: u8 = 1;
pub const HASH_BY_ALL: u8 = 2;

/// The part of `handle` the hash option names: prefix (`0.NA` for slash-less
/// handles), suffix (the whole handle when slash-less) or the whole handle.
/// Unknown options hash the whole handle (Java throws instead).
pub fn hash_part(handle: &[u8], hash_option: u8) -> &[u8] {
    let slash = handle.iter().position(|&b| b == b'/');
    match (hash_option, slash) {
        (HASH_BY_PREFIX, Some(i)) => &handle[..i],
        (HASH_BY_PREFIX, None) => b"0.NA",
        (HASH_BY_SUFFIX, Some(i)) => &handle[i + 1..],
        _ => handle,
    }
}

/// MD5 of the ASCII-upper-cased hash part, last four digest bytes as a signed
/// big-endian int, then Java `Math.abs` (so `i32::MIN` stays negative): the
/// value **[vec: handle_hash]** lists as `by_*_hash`.
pub fn handle_hash(handle: &[u8], hash_option: u8) -> i32 {
    let part = hash_part(handle, hash_option).to_ascii_uppercase();
    let digest = Md5::digest(&part);
    i32::from_be_bytes([digest[12], digest[13], digest[14], digest[15]]).wrapping_abs()
}

/// Index of the responsible server among `server_count` servers: Java's
/// `handle_hash % n`. For a hash of `i32::MIN` Java gets a negative index and
/// fails; we take the magnitude (2^31) instead. Zero servers → 0.
pub fn server_index(handle: &[u8], hash_option: u8, server_count: usize) -> usize {
    if server_count == 0 {
        return 0;
    }
    let hash = i64::from(handle_hash(handle, hash_option)).unsigned_abs();
    (hash % server_count as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts() {
        assert_eq!(hash_part(b"20.5000/test-1", 0), b"20.5000");
        assert_eq!(hash_part(b"20.5000/test-1", 1), b"test-1");
        assert_eq!(hash_part(b"20.5000/test-1", 2), b"20.5000/test-1");
        assert_eq!(hash_part(b"noslash", 0), b"0.NA");
        assert_eq!(hash_part(b"noslash", 1), b"noslash");
        assert_eq!(hash_part(b"a/b/c", 1), b"b/c");
        assert_eq!(hash_part(b"x/y", 9), b"x/y");
    }

    #[test]
    fn first_vector_case() {
        assert_eq!(handle_hash(b"20.5000/test-1", 0), 2003448609);
        assert_eq!(server_index(b"20.5000/test-1", 1, 3), 2);
        assert_eq!(server_index(b"20.5000/test-1", 1, 0), 0);
        assert_eq!(server_index(b"20.5000/test-1", 1, 1), 0);
    }
}
