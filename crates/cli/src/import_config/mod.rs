//! `handled import-config HANDLE_NET_SERVER_DIR`: write the `handled`
//! configuration and keys equivalent to a Handle.Net 9 server directory
//! (config.dct, siteinfo.json, the key files), so an operator can take the
//! site over (docs/migrating.md). The handles themselves come
//! over by replication, not from here.

mod mapping;
mod replication;
mod source;
mod sql;

use anyhow::{bail, Context};
use clap::Args;
use handled_proto::crypto::keyfile::KeyFileError;
use handled_proto::data::PublicKey;
use handled_server::config::Config;
use handled_server::keys::{write_private, RsaSigner};
use mapping::{Mapped, Toml};
use source::Source;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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
    let mut src = Source::open(&args.server_dir, args.passphrase_file.clone())?;
    if args.out.join("handled.toml").exists() && !args.force {
        bail!("{} exists; --force writes over it", args.out.join("handled.toml").display());
    }
    std::fs::create_dir_all(&args.out).with_context(|| format!("cannot create {}", args.out.display()))?;
    let dir = std::path::absolute(&args.out).with_context(|| format!("bad path {}", args.out.display()))?;
    let mut o = Output { dir, m: Mapped::new(known_keys()?), written: Vec::new() };

    o.m.comment(&format!("Made by `handled import-config` from {}", std::path::absolute(&src.dir)?.display()));
    o.m.set("data_dir", Toml::Str(o.dir.join("data").display().to_string()), "new: handled's store");
    mapping::map_top(&mut o.m, &src.dct);
    sql::map(src.server_config(), &mut o)?;
    let this_server_id = src.server_setting("this_server_id").and_then(|v| v.trim().parse().ok()).unwrap_or(1);
    let site = src.site()?;
    match &site {
        Some(site) => mapping::map_site(&mut o.m, site, this_server_id, src.tcp_bind_address().as_deref()),
        None => o.m.skip("siteinfo.json", "neither siteinfo.json nor siteinfo.bin is there"),
    }

    if let Some(key) = src.rsa_key("privkey.bin", &mut o.m)? {
        let site_key = site.as_ref().and_then(|s| {
            let server = s.servers.iter().find(|v| v.server_id == this_server_id).or(s.servers.first())?;
            PublicKey::decode_data(&server.public_key).ok()
        });
        check_site_key(&key, site_key.as_ref(), &mut o.m);
        let path = o.write_private("server_key.pk8", key.pkcs8())?;
        o.m.set("server_key_file", Toml::Str(path.display().to_string()), "privkey.bin");
    }
    if !src.dir.join("privkey.bin").exists() {
        o.m.warn("privkey.bin", MISSING_SERVER_KEY);
    }
    if let Some(key) = src.rsa_key("admpriv.bin", &mut o.m)? {
        o.write_private(ADMIN_KEY_FILE, key.pkcs8())?;
    }
    if args.mirror {
        replication::mirror_of(&src, args.identity.clone(), &mut o)?;
    } else {
        replication::identity(&mut src, &mut o)?;
        replication::source_file(&src, site.as_ref(), &mut o)?;
    }
    if !o.m.has("prefixes") {
        let why = "none: set `prefixes` in handled.toml (handled needs at least one)";
        o.m.skip("server_config.auto_homed_prefixes", why);
    }
    if src.dir.join("bdbje").exists() {
        o.m.skip("bdbje/", "the handles are not copied: a handled mirror pulls them (docs/migrating.md)");
    }
    if src.dir.join("contactdata.dct").exists() {
        o.m.skip("contactdata.dct", "handled's site record carries only `description`");
    }
    // Last, so that a failure above leaves no configuration pointing at missing keys.
    let toml = o.m.toml()?;
    let toml_path = o.write_private("handled.toml", toml.as_bytes())?;
    o.report(&toml_path);
    Ok(())
}

const ADMIN_KEY_FILE: &str = "admin_key.pk8";

/// Without the server key the site record changes under every client that holds it.
const MISSING_SERVER_KEY: &str = "not there: handled makes a new RSA key at first start and \
     publishes a new site record (update the HS_SITE values that point at this site); copy the server's \
     privkey.bin here and run again to keep its key";

/// What is written under --out: handled.toml, keys and copies, all readable by the owner only.
pub struct Output {
    dir: PathBuf,
    m: Mapped,
    written: Vec<PathBuf>,
}

impl Output {
    fn write_private(&mut self, name: &str, bytes: &[u8]) -> anyhow::Result<PathBuf> {
        let path = self.dir.join(name);
        write_private(&path, bytes)?;
        self.written.push(path.clone());
        Ok(path)
    }

    fn copy_in(&mut self, from: &Path, name: &str) -> anyhow::Result<PathBuf> {
        let bytes = std::fs::read(from).with_context(|| format!("cannot read {}", from.display()))?;
        self.write_private(name, &bytes)
    }

    fn report(&self, toml_path: &Path) {
        for path in &self.written {
            println!("wrote {}", path.display());
        }
        println!("not carried over ({}):", self.m.skipped.len());
        for line in &self.m.skipped {
            println!("  {line}");
        }
        for line in &self.m.warnings {
            eprintln!("warning: {line}");
        }
        println!("next: handled serve --config {}", toml_path.display());
        if let Some(key) = self.written.iter().find(|p| p.ends_with(ADMIN_KEY_FILE)) {
            println!(
                "admin commands with admpriv.bin's key: handled list PREFIX --admin INDEX:HANDLE --private-key {}",
                key.display()
            );
        }
    }
}

/// The keys this build's configuration has (so that newer keys become comments).
fn known_keys() -> anyhow::Result<BTreeSet<String>> {
    let value = serde_json::to_value(Config::default()).context("cannot list the configuration keys")?;
    Ok(value.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default())
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
        m.warn("privkey.bin", "not the key siteinfo.json publishes for this server; handled publishes privkey.bin's");
    }
}
