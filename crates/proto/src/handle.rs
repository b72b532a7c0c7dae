//! Handle text rules (§2.1, §5.6, §7.2, §7.3). Handles are bytes; all case
//! folding is ASCII-only, as in Java (`Util.upperCase`), never Unicode.

use std::borrow::Cow;

/// Longest handle the reference decoder accepts in responses (§1.8).
pub const MAX_HANDLE_LEN: usize = 2048;

/// The naming-authority prefix: prefix handles are `0.NA/<prefix>`.
pub const NA_PREFIX: &[u8] = b"0.NA";
/// `0.NA/`, what a prefix handle starts with.
pub const NA_HANDLE_PREFIX: &[u8] = b"0.NA/";
/// The root prefix handle.
pub const ROOT_HANDLE: &[u8] = b"0.NA/0.NA";
/// Handles starting with this (byte-exact, as in Java) are global: wholly
/// case-insensitive.
pub const GLOBAL_PREFIX: &[u8] = b"0.";

/// Split at the first `/` into prefix and suffix. A handle without `/` is all
/// prefix and has no suffix.
pub fn split(handle: &[u8]) -> (&[u8], Option<&[u8]>) {
    match handle.iter().position(|&b| b == b'/') {
        Some(i) => (&handle[..i], Some(&handle[i + 1..])),
        None => (handle, None),
    }
}

/// Is this a global handle (`0.` prefix), compared case-insensitively as a whole?
pub fn is_global(handle: &[u8]) -> bool {
    handle.starts_with(GLOBAL_PREFIX)
}

/// The handle a server works with: a slash-less handle `h` is the prefix
/// handle `0.NA/h` (§2.1); others are returned unchanged. The caller's
/// spelling is kept (use [`normalize`] for lookups).
pub fn canonical(handle: &[u8]) -> Cow<'_, [u8]> {
    if handle.contains(&b'/') {
        Cow::Borrowed(handle)
    } else {
        let mut out = Vec::with_capacity(NA_HANDLE_PREFIX.len() + handle.len());
        out.extend_from_slice(NA_HANDLE_PREFIX);
        out.extend_from_slice(handle);
        Cow::Owned(out)
    }
}

/// Is `handle` (read via [`canonical`]) a prefix handle `0.NA/...`?
pub fn is_prefix_handle(handle: &[u8]) -> bool {
    split(&canonical(handle)).0.eq_ignore_ascii_case(NA_PREFIX)
}

/// The prefix handle `0.NA/<PREFIX>` that governs `handle`, upper-cased (Java
/// `getZeroNAHandle`). Slash-less handles are read as `0.NA/<h>`, so they
/// (and all prefix handles) are governed by the root `0.NA/0.NA`.
pub fn prefix_handle(handle: &[u8]) -> Vec<u8> {
    let canonical = canonical(handle);
    let (prefix, _) = split(&canonical);
    let mut out = Vec::with_capacity(NA_HANDLE_PREFIX.len() + prefix.len());
    out.extend_from_slice(NA_HANDLE_PREFIX);
    out.extend(prefix.iter().map(u8::to_ascii_uppercase));
    out
}

/// Storage key of a handle (§7.3): the prefix is always ASCII-upper-cased, the
/// suffix too unless `case_sensitive_suffix`; `0.`-prefixed handles are
/// upper-cased whole. Does not apply [`canonical`]; callers do that first.
pub fn normalize(handle: &[u8], case_sensitive_suffix: bool) -> Vec<u8> {
    if !case_sensitive_suffix || is_global(handle) {
        return handle.to_ascii_uppercase();
    }
    let mut out = handle.to_vec();
    let end = handle.iter().position(|&b| b == b'/').unwrap_or(handle.len());
    out[..end].make_ascii_uppercase();
    out
}

/// Java `equalsPrefixCI`: equal with the prefix compared ASCII-case-insensitively
/// and the suffix byte-exactly; global (`0.`) handles wholly case-insensitively.
pub fn eq_prefix_ci(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    if is_global(a) || is_global(b) {
        return a.eq_ignore_ascii_case(b);
    }
    let ((pa, sa), (pb, sb)) = (split(a), split(b));
    pa.eq_ignore_ascii_case(pb) && sa == sb
}

/// Does identity `(identity_handle, identity_index)` match the admin reference
/// `(admin_handle, admin_index)` (§5.6)? Handle per [`eq_prefix_ci`] (the
/// suffix is exact even on a case-insensitive server); index 0 in the
/// reference matches any index.
pub fn admin_ref_matches(identity_handle: &[u8], identity_index: i32, admin_handle: &[u8], admin_index: i32) -> bool {
    (admin_index == 0 || admin_index == identity_index) && eq_prefix_ci(identity_handle, admin_handle)
}

/// The prefix handles from which a (normalized) prefix handle `0.NA/a.b.c`
/// derives, shortest first and including itself: `0.NA/a`, `0.NA/a.b`,
/// `0.NA/a.b.c` (§7.2). A handle without `/` is returned alone.
pub fn ancestors(prefix_handle: &[u8]) -> Vec<Vec<u8>> {
    let Some(slash) = prefix_handle.iter().position(|&b| b == b'/') else {
        return vec![prefix_handle.to_vec()];
    };
    let mut out: Vec<Vec<u8>> = prefix_handle[slash + 1..]
        .iter()
        .enumerate()
        // A dot right after the slash would give an empty prefix: skip it.
        .filter(|&(i, &b)| b == b'.' && i > 0)
        .map(|(i, _)| prefix_handle[..slash + 1 + i].to_vec())
        .collect();
    out.push(prefix_handle.to_vec());
    out
}

/// The most specific of `prefix_handle`'s [`ancestors`] (itself first) for
/// which `is_homed` holds, if any.
pub fn homed_by(prefix_handle: &[u8], mut is_homed: impl FnMut(&[u8]) -> bool) -> Option<Vec<u8>> {
    ancestors(prefix_handle).into_iter().rev().find(|a| is_homed(a))
}

/// Parent of a derived prefix handle (`0.NA/a.b` → `0.NA/a`), the handle whose
/// HS_ADMIN governs creating it (§5.6); `None` for a non-derived one.
pub fn parent_prefix_handle(prefix_handle: &[u8]) -> Option<Vec<u8>> {
    let mut all = ancestors(prefix_handle);
    all.pop();
    all.pop()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_and_canonical() {
        assert_eq!(split(b"20.5000/a/b"), (&b"20.5000"[..], Some(&b"a/b"[..])));
        assert_eq!(split(b"20.5000"), (&b"20.5000"[..], None));
        assert_eq!(split(b"20.5000/"), (&b"20.5000"[..], Some(&b""[..])));
        assert_eq!(&*canonical(b"20.5000"), b"0.NA/20.5000");
        assert!(matches!(canonical(b"20.5000/x"), Cow::Borrowed(_)));
        assert!(is_prefix_handle(b"0.na/20.5000"));
        assert!(is_prefix_handle(b"20.5000"));
        assert!(!is_prefix_handle(b"20.5000/0.NA"));
    }

    #[test]
    fn prefix_handles() {
        assert_eq!(prefix_handle(b"20.5000/test"), b"0.NA/20.5000");
        assert_eq!(prefix_handle(b"abc.Def/x/y"), b"0.NA/ABC.DEF");
        assert_eq!(prefix_handle(b"0.NA/20.5000"), ROOT_HANDLE);
        assert_eq!(prefix_handle(b"20.5000"), ROOT_HANDLE);
        assert_eq!(prefix_handle(b"/x"), b"0.NA/");
    }

    #[test]
    fn normalization() {
        assert_eq!(normalize(b"abc.def/MiXed", false), b"ABC.DEF/MIXED");
        assert_eq!(normalize(b"abc.def/MiXed", true), b"ABC.DEF/MiXed");
        assert_eq!(normalize(b"0.na/abc", true), b"0.NA/ABC");
        assert_eq!(normalize(b"0.na/abc", false), b"0.NA/ABC");
        assert_eq!(normalize(b"abc", true), b"ABC");
        // ASCII only: non-ASCII bytes pass through untouched.
        assert_eq!(normalize("pré/é".as_bytes(), false), "PRé/é".as_bytes());
        assert_eq!(normalize(b"a/b/c", true), b"A/b/c");
    }

    #[test]
    fn admin_matching() {
        assert!(admin_ref_matches(b"20.5000/ADMIN", 300, b"20.5000/ADMIN", 300));
        assert!(admin_ref_matches(b"20.5000/ADMIN", 300, b"20.5000/ADMIN", 0));
        assert!(!admin_ref_matches(b"20.5000/ADMIN", 300, b"20.5000/ADMIN", 301));
        // Identity index 0 only matches references with index 0.
        assert!(!admin_ref_matches(b"20.5000/ADMIN", 0, b"20.5000/ADMIN", 300));
        assert!(admin_ref_matches(b"abc.Def/ADMIN", 1, b"ABC.DEF/ADMIN", 1));
        assert!(!admin_ref_matches(b"20.5000/admin", 1, b"20.5000/ADMIN", 1));
        assert!(admin_ref_matches(b"0.NA/abc", 1, b"0.na/ABC", 1));
        assert!(!admin_ref_matches(b"20.5000/ADMIN", 1, b"20.5000/ADMIN2", 1));
        assert!(!admin_ref_matches(b"20.5000", 1, b"20.5000/", 1));
    }

    #[test]
    fn ancestry() {
        let a = ancestors(b"0.NA/A.B.C");
        assert_eq!(a, vec![b"0.NA/A".to_vec(), b"0.NA/A.B".to_vec(), b"0.NA/A.B.C".to_vec()]);
        assert_eq!(ancestors(b"0.NA/20"), vec![b"0.NA/20".to_vec()]);
        assert_eq!(ancestors(b"0.NA/.X"), vec![b"0.NA/.X".to_vec()]);
        assert_eq!(ancestors(b"noslash"), vec![b"noslash".to_vec()]);
        assert_eq!(parent_prefix_handle(b"0.NA/A.B.C"), Some(b"0.NA/A.B".to_vec()));
        assert_eq!(parent_prefix_handle(b"0.NA/A"), None);
        let homed = [b"0.NA/A".to_vec(), b"0.NA/A.B".to_vec()];
        assert_eq!(homed_by(b"0.NA/A.B.C", |h| homed.iter().any(|x| x == h)), Some(b"0.NA/A.B".to_vec()));
        assert_eq!(homed_by(b"0.NA/AB", |h| homed.iter().any(|x| x == h)), None);
    }
}
