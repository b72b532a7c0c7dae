//! Counts in words, one spelling for every subcommand ("1 handle", "2 handles").

/// `n what`, with an `s` unless `n` is 1.
pub fn plural(n: u64, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}
