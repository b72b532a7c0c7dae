//! Where a site's servers are, beyond the address in each server entry: the
//! site attributes `alt_addr` / `alt_addr.<server id>` (a second address of
//! the same server, e.g. its IPv6 one: the Java client adds a copy of the
//! site with that address right after it) and `domain.<position>` /
//! `domain` (the host name of a server whose address is all zeros, looked
//! up in DNS when it is asked).

use super::LookupError;
use handled_proto::data::site::{ServerInfo, SiteInfo};
use std::net::IpAddr;
use tokio::time::Instant;

/// Addresses of one `domain` name tried, at most.
const MAX_DOMAIN_ADDRESSES: usize = 4;

/// `sites`, each followed by its alternate site when its attributes name
/// alternate addresses, at most `max` in all.
pub(super) fn with_alt_sites(sites: Vec<SiteInfo>, max: usize) -> Vec<SiteInfo> {
    let mut out = Vec::with_capacity(sites.len());
    for site in sites {
        let alt = alt_site(&site);
        out.push(site);
        out.extend(alt);
    }
    out.truncate(max);
    out
}

/// A copy of `site` whose servers are those its `alt_addr` attributes
/// describe: `alt_addr` for a one-server site, `alt_addr.<id>` for the server
/// with that id, each with the address given. None without such attributes.
/// (Handle.Net's client copies the first server for every `alt_addr.<id>`,
/// whatever the id; for the one-server sites its setup writes, the same.)
/// Only address literals are taken: a name there is not looked up.
fn alt_site(site: &SiteInfo) -> Option<SiteInfo> {
    let mut servers = Vec::new();
    for attribute in &site.attributes {
        let server = if attribute.name == b"alt_addr" {
            match site.servers.as_slice() {
                [only] => only,
                _ => continue,
            }
        } else if let Some(id) = attribute.name.strip_prefix(b"alt_addr.") {
            let id = std::str::from_utf8(id).ok().and_then(|id| id.parse::<i32>().ok());
            match site.servers.iter().find(|s| Some(s.server_id) == id) {
                Some(server) => server,
                None => continue,
            }
        } else {
            continue;
        };
        let Some(ip) = std::str::from_utf8(&attribute.value).ok().and_then(|v| v.trim().parse::<IpAddr>().ok()) else {
            continue;
        };
        servers.push(ServerInfo { address: ServerInfo::address_of(ip), ..server.clone() });
    }
    (!servers.is_empty()).then(|| SiteInfo { servers, ..site.clone() })
}

/// The addresses of the server at `position` in `site`, whose own address is
/// all zeros: its `domain.<position>` attribute (else `domain`) looked up,
/// before `deadline`.
pub(super) async fn by_domain(site: &SiteInfo, position: usize, deadline: Instant) -> Result<Vec<IpAddr>, LookupError> {
    let server_id = site.servers.get(position).map_or(0, |s| s.server_id);
    let named = site.attribute(format!("domain.{position}").as_bytes()).or_else(|| site.attribute(b"domain"));
    let name = named
        .and_then(|n| std::str::from_utf8(n).ok())
        .map(str::trim)
        .filter(|n| !n.is_empty() && n.len() <= 253)
        .ok_or_else(|| {
            LookupError::Unreachable(format!("server {server_id} has no address and no domain attribute"))
        })?;
    let found = tokio::time::timeout_at(deadline, tokio::net::lookup_host((name, 0)))
        .await
        .map_err(|_| LookupError::Unreachable(format!("server {server_id}: no DNS answer for {name} in time")))?
        .map_err(|e| LookupError::Unreachable(format!("server {server_id}: {name}: {e}")))?;
    let mut addresses: Vec<IpAddr> = Vec::new();
    for a in found {
        if !addresses.contains(&a.ip()) && addresses.len() < MAX_DOMAIN_ADDRESSES {
            addresses.push(a.ip());
        }
    }
    if addresses.is_empty() {
        return Err(LookupError::Unreachable(format!("server {server_id}: {name} has no address")));
    }
    Ok(addresses)
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::data::site::SiteAttribute;

    fn attr(name: &str, value: &str) -> SiteAttribute {
        SiteAttribute { name: name.into(), value: value.into() }
    }

    fn site(ids: &[i32], attributes: Vec<SiteAttribute>) -> SiteInfo {
        let mut site = super::super::testing::site(2641, vec![1]);
        let server = site.servers[0].clone();
        site.servers = ids.iter().map(|&server_id| ServerInfo { server_id, ..server.clone() }).collect();
        site.attributes = attributes;
        site
    }

    #[test]
    fn alt_addr_adds_a_copy_of_the_site_after_it() {
        let one = site(&[1], vec![attr("alt_addr.1", "fd00::1")]);
        let plain = site(&[1], vec![]);
        let sites = with_alt_sites(vec![one.clone(), plain.clone()], 16);
        assert_eq!(sites.len(), 3);
        assert_eq!(sites[0], one);
        assert_eq!(sites[1].servers[0].ip_addr(), "fd00::1".parse::<IpAddr>().unwrap());
        assert_eq!(sites[1].servers[0].interfaces, one.servers[0].interfaces, "the same server elsewhere");
        assert_eq!(sites[2], plain);
        // `alt_addr` without an id only for a one-server site; ids that name no server,
        // and values that are not addresses, add nothing.
        let two = site(&[1, 2], vec![attr("alt_addr", "10.0.0.1"), attr("alt_addr.3", "10.0.0.3")]);
        let bad = site(&[1], vec![attr("alt_addr.1", "host.example"), attr("alt_addr.x", "10.0.0.1")]);
        assert_eq!(with_alt_sites(vec![two, bad], 16).len(), 2);
        let second = site(&[1, 2], vec![attr("alt_addr.2", "10.0.0.2")]);
        let sites = with_alt_sites(vec![second], 16);
        assert_eq!((sites[1].servers.len(), sites[1].servers[0].server_id), (1, 2));
        assert_eq!(with_alt_sites(vec![one.clone(), one], 3).len(), 3, "bounded");
    }

    #[tokio::test]
    async fn domain_names_a_server_without_an_address() {
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        let named = site(&[1, 2], vec![attr("domain", "127.0.0.9"), attr("domain.1", "127.0.0.8")]);
        assert_eq!(by_domain(&named, 0, deadline).await.unwrap(), ["127.0.0.9".parse::<IpAddr>().unwrap()]);
        assert_eq!(by_domain(&named, 1, deadline).await.unwrap(), ["127.0.0.8".parse::<IpAddr>().unwrap()]);
        let localhost = site(&[1], vec![attr("domain", "localhost")]);
        let found = by_domain(&localhost, 0, deadline).await.unwrap();
        assert!(found.iter().all(|ip| ip.is_loopback()) && !found.is_empty(), "{found:?}");
        let none = site(&[1], vec![]);
        assert!(by_domain(&none, 0, deadline).await.is_err());
    }
}
