//! The replication settings of a Handle.Net mirror directory, or (`--mirror`)
//! those that make `handled` a mirror of the imported server.

use super::mapping::{self, Toml};
use super::source::{read_site_file, Source};
use super::Output;
use anyhow::{bail, Context};
use handled_proto::data::SiteInfo;

/// `replication_authentication` with its key (replpriv.bin) or secret (replsec.bin).
pub fn identity(src: &mut Source, o: &mut Output) -> anyhow::Result<()> {
    let Some(auth) = src.server_setting("replication_authentication").map(str::to_string) else { return Ok(()) };
    let missing = |name: &str| format!("replication_authentication is {auth:?}, but there is no {name}");
    if auth.starts_with("privatekey:") {
        if !src.dir.join("replpriv.bin").exists() {
            bail!(missing("replpriv.bin"));
        }
        if let Some(key) = src.rsa_key("replpriv.bin", &mut o.m)? {
            let path = o.write_private("replication_key.pk8", key.pkcs8())?;
            o.m.set("replication_private_key", Toml::Str(path.display().to_string()), "replpriv.bin");
        }
    } else if auth.starts_with("secretkey:") {
        let path = src.dir.join("replsec.bin");
        let bytes = std::fs::read(&path).with_context(|| missing("readable replsec.bin"))?;
        let secret =
            String::from_utf8(bytes).with_context(|| format!("{}: the secret is not UTF-8 text", path.display()))?;
        o.m.set("replication_secret", Toml::Str(secret), "replsec.bin (handled.toml is readable by its owner only)");
    }
    Ok(())
}

/// A mirror's single source (txnsrcsv.json / .bin), copied beside handled.toml.
pub fn source_file(src: &Source, site: Option<&SiteInfo>, o: &mut Output) -> anyhow::Result<()> {
    for name in ["txnsrcsv.json", "txnsrcsv.bin"] {
        let path = src.dir.join(name);
        if read_site_file(&path)?.is_none() {
            continue;
        }
        if o.m.has("replication_source") {
            o.m.skip(name, "replication_site_handle_value names the source already");
            return Ok(());
        }
        let ext = if name.ends_with("json") { "json" } else { "bin" };
        let target = o.copy_in(&path, &format!("replication-source-siteinfo.{ext}"))?;
        o.m.set("replication_source", Toml::Str(target.display().to_string()), name);
        return Ok(());
    }
    if site.is_some_and(|s| !s.primary) && !o.m.has("replication_source") {
        o.m.skip("siteinfo.json primarySite", "false, but no replication source is named: set `replication_source`");
    }
    Ok(())
}

/// `--mirror`: pull from the server this directory runs, as admpriv.bin's identity.
pub fn mirror_of(src: &Source, identity: Option<String>, o: &mut Output) -> anyhow::Result<()> {
    if src.server_setting("replication_authentication").is_some() {
        bail!("--mirror: this Handle.Net server is a mirror itself; import it without --mirror");
    }
    let Some(key) = o.written.iter().find(|p| p.ends_with(super::ADMIN_KEY_FILE)).cloned() else {
        bail!("--mirror needs an RSA admpriv.bin as the replication identity (handled's mirror signs with RSA)");
    };
    let first = |name: &str| {
        src.server_config().and_then(|sc| sc.get(name)).and_then(mapping::strings).and_then(|l| l.into_iter().next())
    };
    let identity = identity
        .or_else(|| first("replication_admins"))
        .or_else(|| first("server_admins"))
        .context("--mirror: no replication_admins or server_admins to take the identity from; give --identity")?;
    check_identity(&identity)?;
    let (name, ext) =
        if src.dir.join("siteinfo.json").exists() { ("siteinfo.json", "json") } else { ("siteinfo.bin", "bin") };
    let target = o.copy_in(&src.dir.join(name), &format!("replication-source-siteinfo.{ext}"))?;
    o.m.comment("A mirror of the Handle.Net server (docs/migrating.md); it must list");
    o.m.comment(&format!("{identity} in its replication_admins or server_admins."));
    o.m.set("replication_source", Toml::Str(target.display().to_string()), &format!("--mirror: {name}"));
    let auth = Toml::Str(format!("privatekey:{identity}"));
    o.m.set("replication_authentication", auth, "--mirror: admpriv.bin's identity");
    o.m.set("replication_private_key", Toml::Str(key.display().to_string()), "--mirror: admpriv.bin");
    Ok(())
}

/// An identity read from config.dct (or given) must be `index:handle`: it is
/// written into handled.toml and names who the mirror signs as.
fn check_identity(identity: &str) -> anyhow::Result<()> {
    let shown = crate::printable::printable(identity);
    let (index, handle) = identity
        .split_once(':')
        .with_context(|| format!("--mirror: the replication identity {shown:?} is not index:handle"))?;
    let fine = index.parse::<i32>().is_ok_and(|i| i > 0)
        && handle.contains('/')
        && !handle.chars().any(|c| c.is_control() || c.is_whitespace());
    if !fine {
        bail!("--mirror: the replication identity {shown:?} is not index:handle (a positive index, a handle with no spaces or control characters)");
    }
    Ok(())
}
