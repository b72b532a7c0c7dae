//! Our own HS_SITE record (§2.7, §6.3): the one GET_SITE_INFO answers and the
//! one placed in each homed prefix handle, so global and local views agree.

use crate::config::Config;
use handled_proto::codec::Codec;
use handled_proto::data::site::{Interface, InterfaceKind, ServerInfo, SiteAttribute, SiteInfo, TransportProtocol};
use handled_proto::envelope::Version;
use std::net::IpAddr;

/// The protocol version we speak and announce (§1.7 recommends 2.10).
/// Index conventions of the handles bootstrap creates.
pub const ADMIN_INDEX: i32 = 100;
pub const SITE_INDEX: i32 = 1;
pub const SECKEY_INDEX: i32 = 300;
pub const PUBKEY_INDEX: i32 = 301;

pub const OUR_VERSION: Version = Version::V2_10;

/// Build the site record for this server. `serial` is bumped by the caller
/// whenever the encoded record changes. `primary`: not a mirror (clients send
/// administration to primary sites only).
pub fn build_site(config: &Config, public_key: Vec<u8>, serial: u16, primary: bool) -> SiteInfo {
    let address = match config.public_address() {
        IpAddr::V4(v4) => ServerInfo::ipv4(v4.octets()),
        IpAddr::V6(v6) => v6.octets(),
    };
    let interface = |kind, protocol, port: u16| Interface { kind, protocol, port: port as i32 };
    SiteInfo {
        data_version: 1,
        protocol_major: OUR_VERSION.major,
        protocol_minor: OUR_VERSION.minor,
        serial,
        primary,
        multi_primary: primary && config.replication.multi_primary,
        hash_option: 2, // by whole handle, as typical Handle.Net records say
        hash_filter: Vec::new(),
        attributes: vec![SiteAttribute { name: b"desc".to_vec(), value: config.description.clone().into_bytes() }],
        servers: vec![ServerInfo {
            server_id: 1,
            address,
            public_key,
            interfaces: vec![
                interface(InterfaceKind::AdminAndQuery, TransportProtocol::Tcp, config.port),
                interface(InterfaceKind::Query, TransportProtocol::Udp, config.port),
                interface(InterfaceKind::AdminAndQuery, TransportProtocol::Http, config.http_port),
            ],
        }],
    }
}

/// The encoded record with everything but the serial, to detect changes.
pub fn fingerprint(site: &SiteInfo) -> Vec<u8> {
    let mut s = site.clone();
    s.serial = 0;
    s.to_bytes()
}
