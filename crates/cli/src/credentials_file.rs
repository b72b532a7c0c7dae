//! Which credentials file the client commands read when `--credentials` (or
//! `HANDLED_CREDENTIALS`) is not given: `serve` writes `data/admin-PREFIX.json`
//! for each prefix it homes, so the file of the prefix acted on, else the only
//! such file in `data/`, else the one of `serve`'s default prefix.

use std::path::{Path, PathBuf};

/// Where `serve` keeps its data when run without `--data-dir`.
const DATA_DIR: &str = "data";
/// `serve`'s default prefix, whose file is assumed when nothing else tells.
const DEFAULT_PREFIX: &str = "TEST";

/// A credentials file to read, and whether it was chosen by default (the
/// error then says what the default assumed).
pub struct CredentialsFile {
    pub path: PathBuf,
    pub defaulted: bool,
}

impl CredentialsFile {
    /// `given`, or the default for `prefix` (the prefix acted on, if one is).
    pub fn choose(given: Option<&Path>, prefix: Option<&str>) -> CredentialsFile {
        match given {
            Some(path) => CredentialsFile { path: path.to_path_buf(), defaulted: false },
            None => CredentialsFile { path: default_in(Path::new(DATA_DIR), prefix), defaulted: true },
        }
    }

    /// The file's credentials, or an error saying where they were looked for
    /// and how to point elsewhere (`or_else`: the other way in).
    pub fn load(
        &self,
        choice: handled_client::KeyChoice,
        or_else: &str,
    ) -> anyhow::Result<handled_client::Credentials> {
        handled_client::Credentials::load(&self.path, choice).map_err(|cause| {
            let absolute = std::path::absolute(&self.path).unwrap_or_else(|_| self.path.clone());
            let assumed = match absolute.parent().filter(|_| self.defaulted) {
                Some(data) => format!(
                    " (the default assumes the data directory {} of a `handled serve` run from this directory)",
                    data.display()
                ),
                None => String::new(),
            };
            anyhow::anyhow!(
                "no usable credentials at {}{assumed}: {cause}; give the file `serve` wrote with --credentials \
                 FILE (or HANDLED_CREDENTIALS=FILE), or use {or_else}",
                absolute.display()
            )
        })
    }
}

/// The default file in `data`: `admin-PREFIX.json` when it is there (the
/// prefix as given, then upper-cased as `serve` usually spells it), else the
/// only `admin-*.json`, else `admin-PREFIX.json` (or `admin-TEST.json`).
fn default_in(data: &Path, prefix: Option<&str>) -> PathBuf {
    let prefix = prefix.map(|p| p.strip_prefix("0.NA/").unwrap_or(p));
    let named = |p: &str| data.join(format!("admin-{p}.json"));
    if let Some(p) = prefix {
        if let Some(found) = [named(p), named(&p.to_ascii_uppercase())].into_iter().find(|f| f.is_file()) {
            return found;
        }
    }
    let mut all: Vec<PathBuf> = std::fs::read_dir(data)
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("admin-") && n.ends_with(".json"))
        })
        .collect();
    if all.len() == 1 {
        return all.remove(0);
    }
    named(prefix.unwrap_or(DEFAULT_PREFIX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_prefix_then_the_only_file() {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path();
        assert_eq!(default_in(data, None), data.join("admin-TEST.json"), "nothing there: serve's default");
        assert_eq!(default_in(data, Some("0.NA/10.5072")), data.join("admin-10.5072.json"));

        std::fs::write(data.join("admin-10.5072.json"), "{}").unwrap();
        assert_eq!(default_in(data, None), data.join("admin-10.5072.json"), "the only file");
        assert_eq!(default_in(data, Some("OTHER")), data.join("admin-10.5072.json"), "the only file");

        std::fs::write(data.join("admin-DEMO.json"), "{}").unwrap();
        assert_eq!(default_in(data, Some("demo")), data.join("admin-DEMO.json"), "serve's spelling");
        assert_eq!(default_in(data, Some("10.5072")), data.join("admin-10.5072.json"));
        assert_eq!(default_in(data, None), data.join("admin-TEST.json"), "two files, no prefix: no guess");
    }
}
