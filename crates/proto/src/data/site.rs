//! HS_SITE site records (§2.7): which servers serve a site and how to reach them.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::codec::{put_bytes, put_i32, put_list, put_u16, put_u8, Codec, DecodeResult, Reader};

/// Flag bits of the site record.
pub const FLAG_PRIMARY: u8 = 0x80;
pub const FLAG_MULTI_PRIMARY: u8 = 0x40;

pub use crate::data::hash::{HASH_BY_ALL, HASH_BY_PREFIX, HASH_BY_SUFFIX};

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SiteInfo {
    pub data_version: u16,
    pub protocol_major: u8,
    pub protocol_minor: u8,
    pub serial: u16,
    pub primary: bool,
    pub multi_primary: bool,
    pub hash_option: u8,
    pub hash_filter: Vec<u8>,
    pub attributes: Vec<SiteAttribute>,
    pub servers: Vec<ServerInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SiteAttribute {
    pub name: Vec<u8>,
    pub value: Vec<u8>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ServerInfo {
    pub server_id: i32,
    /// IPv6, or IPv4 as 12 zero bytes + 4; all zeros = use the `domain` attribute.
    pub address: [u8; 16],
    /// Raw HS_PUBKEY-encoded bytes (see [`crate::data::pubkey::PublicKey`]).
    pub public_key: Vec<u8>,
    pub interfaces: Vec<Interface>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Interface {
    pub kind: InterfaceKind,
    pub protocol: TransportProtocol,
    pub port: i32,
}

/// Interface type. Unknown codes are kept (not rejected) so a foreign site
/// record with a future code still decodes and re-encodes unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InterfaceKind {
    OutOfService,
    Admin,
    Query,
    AdminAndQuery,
    Unknown(u8),
}

/// Interface protocol; unknown codes are kept like [`InterfaceKind::Unknown`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransportProtocol {
    Udp,
    Tcp,
    Http,
    Https,
    Unknown(u8),
}

impl InterfaceKind {
    pub fn code(self) -> u8 {
        match self {
            InterfaceKind::OutOfService => 0,
            InterfaceKind::Admin => 1,
            InterfaceKind::Query => 2,
            InterfaceKind::AdminAndQuery => 3,
            InterfaceKind::Unknown(c) => c,
        }
    }

    pub fn from_code(code: u8) -> Self {
        match code {
            0 => InterfaceKind::OutOfService,
            1 => InterfaceKind::Admin,
            2 => InterfaceKind::Query,
            3 => InterfaceKind::AdminAndQuery,
            c => InterfaceKind::Unknown(c),
        }
    }

    /// Built from the JSON booleans.
    pub fn from_flags(query: bool, admin: bool) -> Self {
        Self::from_code(u8::from(query) << 1 | u8::from(admin))
    }

    /// Java tests bit 0x02 for query and 0x01 for admin, also on unknown codes.
    pub fn query(self) -> bool {
        self.code() & 0x02 != 0
    }

    pub fn admin(self) -> bool {
        self.code() & 0x01 != 0
    }
}

impl TransportProtocol {
    pub fn code(self) -> u8 {
        match self {
            TransportProtocol::Udp => 0,
            TransportProtocol::Tcp => 1,
            TransportProtocol::Http => 2,
            TransportProtocol::Https => 3,
            TransportProtocol::Unknown(c) => c,
        }
    }

    pub fn from_code(code: u8) -> Self {
        match code {
            0 => TransportProtocol::Udp,
            1 => TransportProtocol::Tcp,
            2 => TransportProtocol::Http,
            3 => TransportProtocol::Https,
            c => TransportProtocol::Unknown(c),
        }
    }

    /// The JSON name, for known protocols.
    pub fn name(self) -> Option<&'static str> {
        match self {
            TransportProtocol::Udp => Some("UDP"),
            TransportProtocol::Tcp => Some("TCP"),
            TransportProtocol::Http => Some("HTTP"),
            TransportProtocol::Https => Some("HTTPS"),
            TransportProtocol::Unknown(_) => None,
        }
    }

    /// Inverse of [`name`](Self::name); case-sensitive like Java.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "UDP" => Some(TransportProtocol::Udp),
            "TCP" => Some(TransportProtocol::Tcp),
            "HTTP" => Some(TransportProtocol::Http),
            "HTTPS" => Some(TransportProtocol::Https),
            _ => None,
        }
    }
}

impl ServerInfo {
    /// The 16-byte form of an IPv4 address: 12 zero bytes, then the address
    /// (not `::ffff:`-mapped).
    pub fn ipv4(addr: [u8; 4]) -> [u8; 16] {
        let mut out = [0u8; 16];
        out[12..].copy_from_slice(&addr);
        out
    }

    /// The 16-byte form of any address (IPv4 as in [`ipv4`](Self::ipv4)).
    pub fn address_of(ip: IpAddr) -> [u8; 16] {
        match ip {
            IpAddr::V4(v4) => Self::ipv4(v4.octets()),
            IpAddr::V6(v6) => v6.octets(),
        }
    }

    /// The address as Java reads it: IPv4 when the first 12 bytes are zero
    /// (so all zeros is `0.0.0.0`, "use the domain attribute"), also for
    /// `::ffff:`-mapped addresses; IPv6 otherwise.
    pub fn ip_addr(&self) -> IpAddr {
        if self.address[..12].iter().all(|&b| b == 0) {
            let [a, b, c, d] = [self.address[12], self.address[13], self.address[14], self.address[15]];
            return IpAddr::V4(Ipv4Addr::new(a, b, c, d));
        }
        let v6 = Ipv6Addr::from(self.address);
        match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        }
    }

    /// The first interface with this protocol that accepts queries or admin requests.
    pub fn interface(&self, protocol: TransportProtocol, admin: bool) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.protocol == protocol && if admin { i.kind.admin() } else { i.kind.query() })
    }
}

impl SiteInfo {
    /// Decode HS_SITE value data (trailing bytes are an error).
    pub fn decode_data(data: &[u8]) -> DecodeResult<Self> {
        Self::from_bytes(data)
    }

    /// Value of the first attribute with this exact name.
    pub fn attribute(&self, name: &[u8]) -> Option<&[u8]> {
        self.attributes.iter().find(|a| a.name == name).map(|a| a.value.as_slice())
    }

    /// Index of the server responsible for `handle` (§2.7).
    pub fn server_index(&self, handle: &[u8]) -> usize {
        crate::data::hash::server_index(handle, self.hash_option, self.servers.len())
    }
}

impl Codec for SiteAttribute {
    fn encode(&self, out: &mut Vec<u8>) {
        put_bytes(out, &self.name);
        put_bytes(out, &self.value);
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let name = r.bytes("site attribute name")?.to_vec();
        let value = r.bytes("site attribute value")?.to_vec();
        Ok(SiteAttribute { name, value })
    }
}

impl Codec for Interface {
    fn encode(&self, out: &mut Vec<u8>) {
        put_u8(out, self.kind.code());
        put_u8(out, self.protocol.code());
        put_i32(out, self.port);
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let kind = InterfaceKind::from_code(r.u8("interface type")?);
        let protocol = TransportProtocol::from_code(r.u8("interface protocol")?);
        let port = r.i32("interface port")?;
        Ok(Interface { kind, protocol, port })
    }
}

impl Codec for ServerInfo {
    fn encode(&self, out: &mut Vec<u8>) {
        put_i32(out, self.server_id);
        out.extend_from_slice(&self.address);
        put_bytes(out, &self.public_key);
        put_list(out, &self.interfaces, |o, i| i.encode(o));
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let server_id = r.i32("server id")?;
        let mut address = [0u8; 16];
        address.copy_from_slice(r.take(16, "server address")?);
        let public_key = r.bytes("server public key")?.to_vec();
        let interfaces = r.list("server interfaces", 6, Interface::read)?;
        Ok(ServerInfo { server_id, address, public_key, interfaces })
    }
}

impl Codec for SiteInfo {
    fn encode(&self, out: &mut Vec<u8>) {
        put_u16(out, self.data_version);
        put_u8(out, self.protocol_major);
        put_u8(out, self.protocol_minor);
        put_u16(out, self.serial);
        let flags =
            if self.primary { FLAG_PRIMARY } else { 0 } | if self.multi_primary { FLAG_MULTI_PRIMARY } else { 0 };
        put_u8(out, flags);
        put_u8(out, self.hash_option);
        put_bytes(out, &self.hash_filter);
        put_list(out, &self.attributes, |o, a| a.encode(o));
        put_list(out, &self.servers, |o, s| s.encode(o));
    }

    fn read(r: &mut Reader<'_>) -> DecodeResult<Self> {
        let data_version = r.u16("site data version")?;
        let protocol_major = r.u8("site protocol major")?;
        let protocol_minor = r.u8("site protocol minor")?;
        let serial = r.u16("site serial")?;
        // Other flag bits have no meaning and are dropped, as in Java.
        let flags = r.u8("site flags")?;
        let hash_option = r.u8("site hash option")?;
        let hash_filter = r.bytes("site hash filter")?.to_vec();
        let attributes = r.list("site attributes", 8, SiteAttribute::read)?;
        // Server: id 4 + address 16 + key length 4 + interface count 4.
        let servers = r.list("site servers", 28, ServerInfo::read)?;
        Ok(SiteInfo {
            data_version,
            protocol_major,
            protocol_minor,
            serial,
            primary: flags & FLAG_PRIMARY != 0,
            multi_primary: flags & FLAG_MULTI_PRIMARY != 0,
            hash_option,
            hash_filter,
            attributes,
            servers,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::DecodeError;

    pub(crate) fn sample() -> SiteInfo {
        SiteInfo {
            data_version: 1,
            protocol_major: 2,
            protocol_minor: 10,
            serial: 7,
            primary: true,
            multi_primary: true,
            hash_option: HASH_BY_PREFIX,
            hash_filter: Vec::new(),
            attributes: vec![SiteAttribute { name: b"desc".to_vec(), value: b"test".to_vec() }],
            servers: vec![ServerInfo {
                server_id: 1,
                address: ServerInfo::ipv4([192, 0, 2, 10]),
                public_key: vec![1, 2, 3],
                interfaces: vec![
                    Interface { kind: InterfaceKind::AdminAndQuery, protocol: TransportProtocol::Tcp, port: 2641 },
                    Interface { kind: InterfaceKind::Unknown(9), protocol: TransportProtocol::Unknown(7), port: 1 },
                ],
            }],
        }
    }

    #[test]
    fn round_trip() {
        let b = sample().to_bytes();
        assert_eq!(SiteInfo::decode_data(&b).unwrap(), sample());
        assert_eq!(sample().attribute(b"desc"), Some(&b"test"[..]));
        assert_eq!(sample().server_index(b"20.5000/x"), 0);
    }

    #[test]
    fn errors() {
        let b = sample().to_bytes();
        for cut in 0..b.len() {
            assert!(SiteInfo::decode_data(&b[..cut]).is_err(), "cut {cut}");
        }
        let mut t = b.clone();
        t.push(0);
        assert!(matches!(SiteInfo::decode_data(&t), Err(DecodeError::TrailingBytes { count: 1, .. })));
        // Lying server count.
        let mut lie = b.clone();
        let servers_at = 2 + 1 + 1 + 2 + 1 + 1 + 4 + 4 + (4 + 4) + (4 + 4);
        lie[servers_at..servers_at + 4].copy_from_slice(&1000u32.to_be_bytes());
        assert!(matches!(SiteInfo::decode_data(&lie), Err(DecodeError::Truncated { .. })));
        // Lying public key length.
        let mut lie = b.clone();
        let key_at = servers_at + 4 + 4 + 16;
        lie[key_at..key_at + 4].copy_from_slice(&0x8000_0000u32.to_be_bytes());
        assert!(matches!(SiteInfo::decode_data(&lie), Err(DecodeError::BadLength { .. })));
    }

    #[test]
    fn addresses() {
        let mut s = sample().servers.remove(0);
        assert_eq!(s.ip_addr(), "192.0.2.10".parse::<IpAddr>().unwrap());
        s.address = [0; 16];
        assert_eq!(s.ip_addr(), IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        s.address = "::ffff:10.0.0.1".parse::<Ipv6Addr>().unwrap().octets();
        assert_eq!(s.ip_addr(), "10.0.0.1".parse::<IpAddr>().unwrap());
        s.address = ServerInfo::address_of("2001:db8::1".parse().unwrap());
        assert_eq!(s.ip_addr(), "2001:db8::1".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn interface_kinds() {
        assert_eq!(InterfaceKind::from_flags(true, true), InterfaceKind::AdminAndQuery);
        assert_eq!(InterfaceKind::from_flags(true, false), InterfaceKind::Query);
        assert_eq!(InterfaceKind::from_flags(false, true), InterfaceKind::Admin);
        assert_eq!(InterfaceKind::from_flags(false, false), InterfaceKind::OutOfService);
        assert!(InterfaceKind::Unknown(7).query() && InterfaceKind::Unknown(7).admin());
        let s = sample().servers.remove(0);
        assert_eq!(s.interface(TransportProtocol::Tcp, true).map(|i| i.port), Some(2641));
        assert!(s.interface(TransportProtocol::Udp, false).is_none());
    }
}
