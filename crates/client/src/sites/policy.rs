//! Which addresses a walk may send requests to. Whoever controls a prefix's
//! HS_SITE names the addresses asked, so without a rule a resolver (or a
//! remote identity check) would connect wherever a site record says:
//! loopback services, the private network, a cloud's metadata address. As
//! Unbound's `do-not-query-localhost` / `do-not-query-address`, an address is
//! asked only when it is globally routable, when it lies in the same class
//! of network as one of the root sites (a private Handle System whose root is
//! on 10.x or 127.x keeps working), or when the operator allows its network;
//! the operator's deny list comes before all of these.

use handled_proto::data::site::SiteInfo;
use ipnet::IpNet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The operator's lists (`[resolver] allow_upstream`, `deny_upstream`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpstreamPolicy {
    /// Networks asked whatever their class.
    pub allow: Vec<IpNet>,
    /// Networks never asked, the root sites' and the allowed ones' included.
    pub deny: Vec<IpNet>,
}

/// Kinds of network an address lies in, by the IANA special-purpose
/// registries. Global addresses are asked by default; each other class only
/// when a root site is in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetworkClass {
    Global,
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// RFC 1918, shared address space (100.64.0.0/10), unique local (fc00::/7).
    Private,
    /// 169.254.0.0/16, fe80::/10.
    LinkLocal,
    /// Anything else not globally routable: "this network", documentation,
    /// benchmarking, multicast, broadcast, unallocated IPv6.
    Reserved,
}

/// The policy with the classes its root sites imply, as a walk applies it.
#[derive(Debug, Clone, Default)]
pub(super) struct AddressRules {
    policy: UpstreamPolicy,
    /// Classes (other than global and reserved) of the root sites' addresses.
    root_classes: Vec<NetworkClass>,
    /// The root sites' own addresses, asked whatever their class.
    root_addresses: Vec<IpAddr>,
}

impl AddressRules {
    pub(super) fn new(policy: UpstreamPolicy, root: &[SiteInfo]) -> Self {
        let root_addresses: Vec<IpAddr> = root
            .iter()
            .flat_map(|site| site.servers.iter().map(|s| canonical(s.ip_addr())))
            .filter(|ip| !ip.is_unspecified())
            .collect();
        let mut root_classes: Vec<NetworkClass> = root_addresses
            .iter()
            .map(|ip| class_of(*ip))
            .filter(|c| !matches!(c, NetworkClass::Global | NetworkClass::Reserved))
            .collect();
        root_classes.dedup();
        AddressRules { policy, root_classes, root_addresses }
    }

    /// May a request go to `ip`? Err says why not, for the log and the error.
    pub(super) fn check(&self, ip: IpAddr) -> Result<(), String> {
        let ip = canonical(ip);
        if self.policy.deny.iter().any(|net| net.contains(&ip)) {
            return Err(format!("{ip} is in deny_upstream"));
        }
        if self.policy.allow.iter().any(|net| net.contains(&ip)) || self.root_addresses.contains(&ip) {
            return Ok(());
        }
        match class_of(ip) {
            NetworkClass::Global => Ok(()),
            class if self.root_classes.contains(&class) => Ok(()),
            class => Err(format!(
                "{ip} is not globally routable ({class:?}) and neither the root sites nor allow_upstream are there"
            )),
        }
    }
}

/// An IPv4 address written as IPv6 (mapped, NAT64, 6to4) is the IPv4 one:
/// it reaches the same host.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        // NAT64's well-known prefix (RFC 6052).
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        // 6to4 (RFC 3056): the IPv4 address follows 2002::/16.
        [0x2002, a, b, ..] => Some(Ipv4Addr::new((a >> 8) as u8, a as u8, (b >> 8) as u8, b as u8)),
        _ => None,
    }
}

/// The class of network `ip` lies in.
pub fn class_of(ip: IpAddr) -> NetworkClass {
    match canonical(ip) {
        IpAddr::V4(v4) => class_of_v4(v4),
        IpAddr::V6(v6) => class_of_v6(v6),
    }
}

fn class_of_v4(ip: Ipv4Addr) -> NetworkClass {
    let [a, b, c, _] = ip.octets();
    match (a, b, c) {
        (127, ..) => NetworkClass::Loopback,
        (10, ..) | (172, 16..=31, _) | (192, 168, _) | (100, 64..=127, _) => NetworkClass::Private,
        (169, 254, _) => NetworkClass::LinkLocal,
        (0, ..) | (192, 0, 0) | (192, 0, 2) | (198, 18..=19, _) | (198, 51, 100) | (203, 0, 113) | (224..=255, ..) => {
            NetworkClass::Reserved
        }
        _ => NetworkClass::Global,
    }
}

fn class_of_v6(ip: Ipv6Addr) -> NetworkClass {
    let s = ip.segments();
    if ip.is_loopback() {
        NetworkClass::Loopback
    } else if s[0] & 0xfe00 == 0xfc00 || (s[0], s[1], s[2]) == (0x64, 0xff9b, 1) {
        NetworkClass::Private
    } else if s[0] & 0xffc0 == 0xfe80 {
        NetworkClass::LinkLocal
    } else if s[0] & 0xe000 != 0x2000
        || (s[0], s[1]) == (0x2001, 0xdb8)
        || (s[0], s[1]) == (0x2001, 0)
        || (s[0], s[1], s[2]) == (0x2001, 2, 0)
        || s[0] & 0xfff0 == 0x3ff0
    {
        // Outside 2000::/3 (unallocated, multicast, site-local), documentation,
        // Teredo (its IPv4 server cannot be checked), benchmarking.
        NetworkClass::Reserved
    } else {
        NetworkClass::Global
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::data::site::ServerInfo;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn root_at(address: &str) -> Vec<SiteInfo> {
        let mut site = super::super::testing::site(2641, vec![]);
        site.servers[0].address = ServerInfo::address_of(ip(address));
        vec![site]
    }

    #[test]
    fn classes_of_special_purpose_addresses() {
        for (a, class) in [
            ("8.8.8.8", NetworkClass::Global),
            ("2a00:1450::1", NetworkClass::Global),
            ("127.0.0.2", NetworkClass::Loopback),
            ("::1", NetworkClass::Loopback),
            ("::ffff:127.0.0.1", NetworkClass::Loopback),
            ("64:ff9b::a00:1", NetworkClass::Private),
            ("2002:c0a8:101::1", NetworkClass::Private),
            ("10.1.2.3", NetworkClass::Private),
            ("172.31.0.1", NetworkClass::Private),
            ("192.168.1.1", NetworkClass::Private),
            ("100.64.0.1", NetworkClass::Private),
            ("fd00::1", NetworkClass::Private),
            ("169.254.169.254", NetworkClass::LinkLocal),
            ("fe80::1", NetworkClass::LinkLocal),
            ("0.0.0.0", NetworkClass::Reserved),
            ("192.0.2.1", NetworkClass::Reserved),
            ("224.0.0.1", NetworkClass::Reserved),
            ("255.255.255.255", NetworkClass::Reserved),
            ("2001:db8::1", NetworkClass::Reserved),
            ("ff02::1", NetworkClass::Reserved),
            ("::", NetworkClass::Reserved),
        ] {
            assert_eq!(class_of(ip(a)), class, "{a}");
        }
    }

    #[test]
    fn the_root_sites_class_and_the_operators_lists_decide() {
        let global_root = AddressRules::new(UpstreamPolicy::default(), &root_at("192.0.2.7"));
        assert!(global_root.check(ip("8.8.8.8")).is_ok());
        assert!(global_root.check(ip("192.0.2.7")).is_ok(), "the root itself");
        for refused in ["127.0.0.1", "::ffff:127.0.0.1", "10.0.0.1", "169.254.169.254", "192.0.2.8", "fe80::1"] {
            let why = global_root.check(ip(refused)).unwrap_err();
            assert!(why.contains("not globally routable"), "{refused}: {why}");
        }
        let loopback_root = AddressRules::new(UpstreamPolicy::default(), &root_at("127.0.0.1"));
        assert!(loopback_root.check(ip("127.0.0.9")).is_ok() && loopback_root.check(ip("::1")).is_ok());
        assert!(loopback_root.check(ip("10.0.0.1")).is_err(), "loopback does not imply private");
        let private_root = AddressRules::new(UpstreamPolicy::default(), &root_at("10.0.0.1"));
        assert!(private_root.check(ip("192.168.3.4")).is_ok() && private_root.check(ip("127.0.0.1")).is_err());

        let policy = UpstreamPolicy {
            allow: vec!["10.9.0.0/16".parse().unwrap()],
            deny: vec!["8.8.4.0/24".parse().unwrap(), "127.0.0.1/32".parse().unwrap()],
        };
        let listed = AddressRules::new(policy, &root_at("127.0.0.1"));
        assert!(listed.check(ip("10.9.1.1")).is_ok() && listed.check(ip("10.8.1.1")).is_err());
        assert!(listed.check(ip("8.8.4.4")).unwrap_err().contains("deny_upstream"));
        assert!(listed.check(ip("127.0.0.1")).is_err(), "deny wins over the root's own address");
    }
}
