//! `handled import-config HANDLE_NET_SERVER_DIR`: write the `handled`
//! configuration and keys equivalent to a Handle.Net 9 server directory
//! (config.dct, siteinfo.json, the key files), so an operator can take the
//! site over (README: Migrating from Handle.Net). The handles themselves come
//! over by replication, not from here.

mod mapping;
mod streamtable;

use anyhow::{bail, Context};
use clap::Args;
use handled_proto::crypto::keyfile::{self, KeyFileError, PrivateKey};
use handled_proto::data::{PublicKey, SiteInfo};
use handled_server::config::Config;
use handled_server::keys::{write_private, RsaSigner};
use mapping::{Mapped, Toml};
use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use streamtable::Dict;

#[derive(Args)]
pub struct ImportConfigArgs {
    /// The Handle.Net server directory (the one holding config.dct).
    server_dir: PathBuf,
    /// Where to write handled.toml, the key files and the data directory.
    #[arg(long, default_value = "handled-import")]
    out: PathBuf,
    /// File whose first line is the passphrase of encrypted key files (else HANDLED_KEY_PASSPHRASE, else asked on a terminal).
    #[arg(long)]
    passphrase_file: Option<PathBuf>,
    /// Write over an existing handled.toml and key files in --out.
    #[arg(long)]
    force: bool,
    /// Configure a mirror of this Handle.Net server (the first step of a takeover): its site
    /// record as replication_source, admpriv.bin's key as the replication identity.
    #[arg(long)]
    mirror: bool,
    /// With --mirror: the INDEX:HANDLE at which admpriv.bin's public key is published
    /// (default: the first replication_admins entry, else the first server_admins entry).
    #[arg(long, requires = "mirror")]
    identity: Option<String>,
}

/// Exit code for a key that does not decrypt (README: 4 = authentication).
const EXIT_WRONG_PASSPHRASE: u8 = 4;

pub async fn run(args: ImportConfigArgs) -> anyhow::Result<ExitCode> {
    match import(&args) {
        Err(e) if e.downcast_ref::<KeyFileError>() == Some(&KeyFileError::WrongPassphrase) => {
            eprintln!("error: {}", crate::one_line(&e));
            Ok(ExitCode::from(EXIT_WRONG_PASSPHRASE))
        }
        Err(e) => Err(e),
        Ok(()) => Ok(ExitCode::SUCCESS),
    }
}

fn import(args: &ImportConfigArgs) -> anyhow::Result<()> {
    let dir = &args.server_dir;
    let dct_path = dir.join("config.dct");
    let dct = read_dct(&dct_path)?;
    let toml_path = args.out.join("handled.toml");
    if toml_path.exists() && !args.force {
        bail!("{} exists; --force writes over it", toml_path.display());
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let out = std::path::absolute(&args.out).with_context(|| format!("bad path {}", args.out.display()))?;
    let toml_path = out.join("handled.toml");
    let mut passphrase = Passphrase { file: args.passphrase_file.clone(), cached: None };

    let mut m = Mapped::new(known_keys()?);
    m.comment(&format!("Made by `handled import-config` from {}", std::path::absolute(dir)?.display()));
    m.set("data_dir", Toml::Str(out.join("data").display().to_string()), "new: handled's store");
    mapping::map_top(&mut m, &dct);
    let this_server_id = server_config(&dct)
        .and_then(|sc| sc.get("this_server_id"))
        .and_then(|v| v.as_str())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(1);
    let site = read_site(dir)?;
    let listen = tcp_bind_address(&dct);
    match &site {
        Some(site) => mapping::map_site(&mut m, site, this_server_id, listen.as_deref()),
        None => m.skip("siteinfo.json", "neither siteinfo.json nor siteinfo.bin is there"),
    }

    let mut written = vec![toml_path.clone()];
    let site_key = site.as_ref().and_then(|s| {
        let server = s.servers.iter().find(|v| v.server_id == this_server_id).or(s.servers.first())?;
        PublicKey::decode_data(&server.public_key).ok()
    });
    if let Some(key) = convert_key(dir, "privkey.bin", &mut passphrase, &mut m)? {
        check_site_key(&key, site_key.as_ref(), &mut m);
        let path = out.join("server_key.pk8");
        write_private(&path, key.pkcs8())?;
        m.set("server_key_file", Toml::Str(path.display().to_string()), "privkey.bin");
        written.push(path);
    }
    let mut admin_key = None;
    if let Some(key) = convert_key(dir, "admpriv.bin", &mut passphrase, &mut m)? {
        let path = out.join("admin_key.pk8");
        write_private(&path, key.pkcs8())?;
        written.push(path.clone());
        admin_key = Some(path);
    }
    if args.mirror {
        mirror_of_this_server(args, dir, &dct, &out, admin_key.as_deref(), &mut m, &mut written)?;
    } else {
        replication_identity(dir, &dct, &out, &mut passphrase, &mut m, &mut written)?;
        replication_source(dir, &out, site.as_ref(), &mut m, &mut written)?;
    }
    if !m.has("prefixes") {
        m.skip(
            "server_config.auto_homed_prefixes",
            "none: set `prefixes` in handled.toml (handled needs at least one)",
        );
    }
    if dir.join("bdbje").exists() {
        m.skip("bdbje/", "the handles are not copied: a handled mirror pulls them (README: Migrating from Handle.Net)");
    }
    if dir.join("contactdata.dct").exists() {
        m.skip("contactdata.dct", "handled's site record carries only `description`");
    }

    write_private(&toml_path, m.toml().as_bytes())?;
    for path in &written {
        println!("wrote {}", path.display());
    }
    println!("not carried over ({}):", m.skipped.len());
    for line in &m.skipped {
        println!("  {line}");
    }
    println!("next: handled serve --config {}", toml_path.display());
    if written.iter().any(|p| p.ends_with("admin_key.pk8")) {
        println!(
            "admin commands with admpriv.bin's key: handled list PREFIX --admin INDEX:HANDLE --private-key {}",
            out.join("admin_key.pk8").display()
        );
    }
    Ok(())
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

fn server_config(dct: &Dict) -> Option<&Dict> {
    match dct.get("server_config") {
        Some(streamtable::Value::Dict(d)) => Some(d),
        _ => None,
    }
}

fn tcp_bind_address(dct: &Dict) -> Option<String> {
    match dct.get("hdl_tcp_config") {
        Some(streamtable::Value::Dict(d)) => d.get("bind_address").and_then(|v| v.as_str()).map(str::to_string),
        _ => None,
    }
}

/// The keys this build's configuration has (so that newer keys become comments).
fn known_keys() -> anyhow::Result<BTreeSet<String>> {
    let value = serde_json::to_value(Config::default()).context("cannot list the configuration keys")?;
    Ok(value.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default())
}

fn read_site(dir: &Path) -> anyhow::Result<Option<SiteInfo>> {
    match read_site_file(&dir.join("siteinfo.json"))? {
        Some(site) => Ok(Some(site)),
        None => read_site_file(&dir.join("siteinfo.bin")),
    }
}

/// A site record file, JSON or Handle.Net's binary form; None when absent.
fn read_site_file(path: &Path) -> anyhow::Result<Option<SiteInfo>> {
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

/// A Handle.Net key file as an RSA signer; None (with a note) when absent or not RSA.
fn convert_key(
    dir: &Path,
    name: &str,
    passphrase: &mut Passphrase,
    m: &mut Mapped,
) -> anyhow::Result<Option<RsaSigner>> {
    let path = dir.join(name);
    let Ok(bytes) = std::fs::read(&path) else { return Ok(None) };
    let key = read_key_file(&path, &bytes, passphrase)?;
    match key {
        PrivateKey::Rsa { .. } => {
            let signer = RsaSigner::from_pkcs8(&key.to_pkcs8_der(), &path.display().to_string())?;
            Ok(Some(signer))
        }
        PrivateKey::Dsa { .. } => {
            let why = match name {
                "privkey.bin" => "a DSA server key: handled signs with RSA only, so it makes a new RSA key at first start and publishes a new site record (update the HS_SITE values that point at this site)",
                _ => "a DSA key: handled verifies DSA admin signatures, but its own admin commands sign with RSA only",
            };
            m.skip(name, why);
            Ok(None)
        }
    }
}

fn read_key_file(path: &Path, bytes: &[u8], passphrase: &mut Passphrase) -> anyhow::Result<PrivateKey> {
    let context = || path.display().to_string();
    let phrase = if keyfile::is_encrypted(bytes).with_context(context)? { Some(passphrase.get(path)?) } else { None };
    keyfile::decode_private_key(bytes, phrase.as_deref().map(str::as_bytes)).with_context(context)
}

/// Warn when the server key is not the one siteinfo.json publishes.
fn check_site_key(key: &RsaSigner, published: Option<&PublicKey>, m: &mut Mapped) {
    let strip = |b: &[u8]| b.iter().skip_while(|&&x| x == 0).copied().collect::<Vec<u8>>();
    let ours = key.public_key();
    let same = match (published, &ours) {
        (Some(PublicKey::Rsa { modulus: a, exponent: x }), PublicKey::Rsa { modulus: b, exponent: y }) => {
            strip(a) == strip(b) && strip(x) == strip(y)
        }
        _ => false,
    };
    if !same {
        m.skip(
            "privkey.bin",
            "WARNING: not the key siteinfo.json publishes for this server; handled publishes privkey.bin's",
        );
    }
}

/// `replication_authentication` with its key (replpriv.bin) or secret (replsec.bin).
fn replication_identity(
    dir: &Path,
    dct: &Dict,
    out: &Path,
    passphrase: &mut Passphrase,
    m: &mut Mapped,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let Some(auth) = server_config(dct).and_then(|sc| sc.get("replication_authentication")).and_then(|v| v.as_str())
    else {
        return Ok(());
    };
    if auth.starts_with("privatekey:") {
        let path = dir.join("replpriv.bin");
        let bytes = std::fs::read(&path)
            .with_context(|| format!("replication_authentication is {auth:?}: cannot read {}", path.display()))?;
        match read_key_file(&path, &bytes, passphrase)? {
            key @ PrivateKey::Rsa { .. } => {
                let pkcs8 = key.to_pkcs8_der();
                RsaSigner::from_pkcs8(&pkcs8, &path.display().to_string())?;
                let target = out.join("replication_key.pk8");
                write_private(&target, &pkcs8)?;
                m.set("replication_private_key", Toml::Str(target.display().to_string()), "replpriv.bin");
                written.push(target);
            }
            PrivateKey::Dsa { .. } => m.skip(
                "replpriv.bin",
                "a DSA key: handled's mirror signs with RSA only; give the mirror an RSA identity",
            ),
        }
    } else if auth.starts_with("secretkey:") {
        let path = dir.join("replsec.bin");
        let bytes = std::fs::read(&path)
            .with_context(|| format!("replication_authentication is {auth:?}: cannot read {}", path.display()))?;
        let secret =
            String::from_utf8(bytes).with_context(|| format!("{}: the secret is not UTF-8 text", path.display()))?;
        m.set("replication_secret", Toml::Str(secret), "replsec.bin (handled.toml is readable by its owner only)");
    }
    Ok(())
}

/// `--mirror`: pull from the server this directory runs, as admpriv.bin's identity.
fn mirror_of_this_server(
    args: &ImportConfigArgs,
    dir: &Path,
    dct: &Dict,
    out: &Path,
    admin_key: Option<&Path>,
    m: &mut Mapped,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    let sc = server_config(dct);
    if sc.is_some_and(|sc| sc.get("replication_authentication").is_some()) {
        bail!("--mirror: this Handle.Net server is a mirror itself; import it without --mirror");
    }
    let Some(key) = admin_key else {
        bail!("--mirror needs an RSA admpriv.bin as the replication identity (handled's mirror signs with RSA)");
    };
    let first =
        |name: &str| sc.and_then(|sc| sc.get(name)).and_then(mapping::strings).and_then(|l| l.into_iter().next());
    let identity = args
        .identity
        .clone()
        .or_else(|| first("replication_admins"))
        .or_else(|| first("server_admins"))
        .context("--mirror: no replication_admins or server_admins to take the identity from; give --identity")?;
    let (name, ext) =
        if dir.join("siteinfo.json").exists() { ("siteinfo.json", "json") } else { ("siteinfo.bin", "bin") };
    let target = out.join(format!("replication-source-siteinfo.{ext}"));
    std::fs::copy(dir.join(name), &target).with_context(|| format!("cannot copy {} of {}", name, dir.display()))?;
    written.push(target.clone());
    m.comment("A mirror of the Handle.Net server (README: Migrating from Handle.Net); it must list");
    m.comment(&format!("{identity} in its replication_admins or server_admins."));
    m.set("replication_source", Toml::Str(target.display().to_string()), &format!("--mirror: {name}"));
    m.set(
        "replication_authentication",
        Toml::Str(format!("privatekey:{identity}")),
        "--mirror: admpriv.bin's identity",
    );
    m.set("replication_private_key", Toml::Str(key.display().to_string()), "--mirror: admpriv.bin");
    Ok(())
}

/// A mirror's single source (txnsrcsv.json / .bin), copied beside handled.toml.
fn replication_source(
    dir: &Path,
    out: &Path,
    site: Option<&SiteInfo>,
    m: &mut Mapped,
    written: &mut Vec<PathBuf>,
) -> anyhow::Result<()> {
    for name in ["txnsrcsv.json", "txnsrcsv.bin"] {
        let path = dir.join(name);
        if read_site_file(&path)?.is_none() {
            continue;
        }
        if m.has("replication_source") {
            m.skip(name, "replication_site_handle_value names the source already");
            return Ok(());
        }
        let ext = if name.ends_with("json") { "json" } else { "bin" };
        let target = out.join(format!("replication-source-siteinfo.{ext}"));
        std::fs::copy(&path, &target)
            .with_context(|| format!("cannot copy {} to {}", path.display(), target.display()))?;
        m.set("replication_source", Toml::Str(target.display().to_string()), name);
        written.push(target);
        return Ok(());
    }
    if site.is_some_and(|s| !s.primary) && !m.has("replication_source") {
        m.skip("siteinfo.json primarySite", "false, but no replication source is named: set `replication_source`");
    }
    Ok(())
}
