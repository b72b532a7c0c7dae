//! Handle syntax checked before anything travels: a malformed handle would
//! otherwise come back from the server as "That prefix doesn't live here",
//! which says nothing about the typo.

use anyhow::bail;

/// A handle `PREFIX/SUFFIX` (or a prefix handle `0.NA/PREFIX`). An empty
/// suffix is allowed only when the server appends one (`create --mint`).
pub fn check_handle(handle: &str, empty_suffix_ok: bool) -> anyhow::Result<()> {
    if handle.is_empty() {
        bail!("empty handle: a handle is PREFIX/SUFFIX, e.g. TEST/1");
    }
    let Some((prefix, suffix)) = handle.split_once('/') else {
        bail!(
            "{handle:?} has no '/': a handle is PREFIX/SUFFIX, e.g. {handle}/1 \
             (the prefix handle itself is 0.NA/{handle})"
        );
    };
    if prefix.is_empty() {
        bail!("{handle:?} has an empty prefix: a handle is PREFIX/SUFFIX, e.g. TEST{handle}");
    }
    if suffix.is_empty() && !empty_suffix_ok {
        bail!("{handle:?} has an empty suffix: a handle is PREFIX/SUFFIX, e.g. {handle}1");
    }
    check_characters(handle)
}

/// A prefix as `list` takes it: `TEST` or `0.NA/TEST`, never a handle under it.
pub fn check_prefix(prefix: &str) -> anyhow::Result<()> {
    let bare = strip_na(prefix);
    if bare.is_empty() {
        bail!("empty prefix: give a prefix such as TEST (or 0.NA/TEST)");
    }
    if bare.contains('/') {
        bail!("{prefix:?} is a handle, not a prefix: give the prefix alone, e.g. {}", prefix_of(prefix));
    }
    check_characters(prefix)
}

/// The prefix a handle lives under, for messages (`TEST/1` → `TEST`).
pub fn prefix_of(handle: &str) -> &str {
    let bare = strip_na(handle);
    bare.split_once('/').map_or(bare, |(p, _)| p)
}

fn strip_na(text: &str) -> &str {
    match text.get(..5) {
        Some(na) if na.eq_ignore_ascii_case("0.NA/") => &text[5..],
        _ => text,
    }
}

fn check_characters(text: &str) -> anyhow::Result<()> {
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        bail!("{text:?} contains the control character {:?}", c);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_and_prefixes() {
        assert!(check_handle("TEST/1", false).is_ok());
        assert!(check_handle("0.NA/TEST", false).is_ok());
        assert!(check_handle("TEST/", true).is_ok());
        for bad in ["", "noslash", "/x", "TEST/", "TEST/a\nb"] {
            assert!(check_handle(bad, false).is_err(), "{bad:?}");
        }
        assert!(check_prefix("TEST").is_ok() && check_prefix("0.na/TEST").is_ok());
        for bad in ["", "0.NA/", "TEST/x"] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
        assert_eq!(prefix_of("0.NA/TEST"), "TEST");
        assert_eq!(prefix_of("TEST/a/b"), "TEST");
    }
}
