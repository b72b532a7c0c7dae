//! Reading the Handle.Net server directory: config.dct, the site record and
//! the key files (asking for a passphrase once when one is encrypted).

use super::mapping::Mapped;
use anyhow::{bail, Context};
use handled_proto::crypto::keyfile::{self, PrivateKey};
use handled_proto::data::SiteInfo;
use handled_proto::streamtable::{self, Dict, Value};
use handled_server::keys::RsaSigner;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

/// The server directory being imported.
pub struct Source {
    pub dir: PathBuf,
    pub dct: Dict,
    passphrase: Passphrase,
}

impl Source {
    pub fn open(dir: &Path, passphrase_file: Option<PathBuf>) -> anyhow::Result<Self> {
        let dct = read_dct(&dir.join("config.dct"))?;
        Ok(Source { dir: dir.to_path_buf(), dct, passphrase: Passphrase { file: passphrase_file, cached: None } })
    }

    pub fn server_config(&self) -> Option<&Dict> {
        match self.dct.get("server_config") {
            Some(Value::Dict(d)) => Some(d),
            _ => None,
        }
    }

    /// A string in `server_config`.
    pub fn server_setting(&self, key: &str) -> Option<&str> {
        self.server_config()?.get(key)?.as_str()
    }

    pub fn tcp_bind_address(&self) -> Option<String> {
        match self.dct.get("hdl_tcp_config") {
            Some(Value::Dict(d)) => d.get("bind_address").and_then(|v| v.as_str()).map(str::to_string),
            _ => None,
        }
    }

    /// siteinfo.json, else siteinfo.bin.
    pub fn site(&self) -> anyhow::Result<Option<SiteInfo>> {
        match read_site_file(&self.dir.join("siteinfo.json"))? {
            Some(site) => Ok(Some(site)),
            None => read_site_file(&self.dir.join("siteinfo.bin")),
        }
    }

    /// A key file of the directory; None when it is not there.
    pub fn private_key(&mut self, name: &str) -> anyhow::Result<Option<PrivateKey>> {
        let path = self.dir.join(name);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let context = || path.display().to_string();
        let phrase =
            if keyfile::is_encrypted(&bytes).with_context(context)? { Some(self.passphrase.get(&path)?) } else { None };
        let key = keyfile::decode_private_key(&bytes, phrase.as_deref().map(str::as_bytes)).with_context(context)?;
        Ok(Some(key))
    }

    /// A key file as an RSA signer; None when absent, or DSA (then with a note why).
    pub fn rsa_key(&mut self, name: &str, m: &mut Mapped) -> anyhow::Result<Option<RsaSigner>> {
        match self.private_key(name)? {
            None => Ok(None),
            Some(key @ PrivateKey::Rsa { .. }) => {
                Ok(Some(RsaSigner::from_pkcs8(&key.to_pkcs8_der(), &self.dir.join(name).display().to_string())?))
            }
            Some(PrivateKey::Dsa { .. }) => {
                let why = match name {
                    "privkey.bin" => "a DSA server key: handled signs with RSA only, so it makes a new RSA key at first start and publishes a new site record (update the HS_SITE values that point at this site)",
                    "replpriv.bin" => "a DSA key: handled's mirror signs with RSA only; give the mirror an RSA identity",
                    _ => "a DSA key: handled verifies DSA admin signatures, but its own admin commands sign with RSA only",
                };
                // A new server key means a new site record under the clients.
                if name == "privkey.bin" {
                    m.warn(name, why);
                } else {
                    m.skip(name, why);
                }
                Ok(None)
            }
        }
    }
}

fn read_dct(path: &Path) -> anyhow::Result<Dict> {
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    if meta.len() > streamtable::MAX_FILE_BYTES as u64 {
        bail!("{}: {} bytes is too large for a config.dct", path.display(), meta.len());
    }
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let text = String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", path.display()))?;
    streamtable::parse(&text).with_context(|| path.display().to_string())
}

/// A site record file, JSON or Handle.Net's binary form; None when absent.
pub fn read_site_file(path: &Path) -> anyhow::Result<Option<SiteInfo>> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let site = if path.extension().is_some_and(|e| e == "json") {
        let json: serde_json::Value =
            serde_json::from_slice(&bytes).with_context(|| format!("{}: not JSON", path.display()))?;
        handled_proto::json::site_from_json(&json).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
    } else {
        SiteInfo::decode_data(&bytes).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
    };
    Ok(Some(site))
}

/// The passphrase of encrypted key files, asked for once.
struct Passphrase {
    file: Option<PathBuf>,
    cached: Option<String>,
}

impl Passphrase {
    fn get(&mut self, for_file: &Path) -> anyhow::Result<String> {
        if let Some(p) = &self.cached {
            return Ok(p.clone());
        }
        let text = if let Some(path) = &self.file {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
            text.lines().next().unwrap_or_default().to_string()
        } else if let Ok(p) = std::env::var("HANDLED_KEY_PASSPHRASE") {
            p
        } else if std::io::stdin().is_terminal() {
            eprint!("passphrase of {} (shown as typed, as Handle.Net's tools do): ", for_file.display());
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            line.trim_end_matches(['\r', '\n']).to_string()
        } else {
            bail!(
                "{} is encrypted with a passphrase: give it with --passphrase-file or HANDLED_KEY_PASSPHRASE",
                for_file.display()
            );
        };
        self.cached = Some(text.clone());
        Ok(text)
    }
}
