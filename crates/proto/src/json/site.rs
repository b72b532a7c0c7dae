//! Site records in their siteinfo.json form (§2.7), as Java's
//! `SiteInfoGsonTypeAdapter` / `ServerInfoGsonTypeAdapter` write and read them.

use std::net::{IpAddr, Ipv6Addr};

use base64::Engine as _;
use serde_json::{json, Map, Value};

use super::key::java_jwk;
use super::{as_bool, as_byte, as_i32, as_object, as_text, data_from_json, decode_hex, err, field, lossy, require};
use super::{JResult, JsonValueError};
use crate::data::pubkey::PublicKey;
use crate::data::site::{
    Interface, InterfaceKind, ServerInfo, SiteAttribute, SiteInfo, TransportProtocol, HASH_BY_ALL,
};

/// The siteinfo.json form (§2.7) **[vec: site_info_value]**.
pub fn site_to_json(site: &SiteInfo) -> Value {
    let mut o = Map::new();
    o.insert("version".into(), site.data_version.into());
    // Java prints the version bytes (and hash option) as signed bytes.
    o.insert("protocolVersion".into(), format!("{}.{}", site.protocol_major as i8, site.protocol_minor as i8).into());
    o.insert("serialNumber".into(), site.serial.into());
    o.insert("primarySite".into(), site.primary.into());
    o.insert("multiPrimary".into(), site.multi_primary.into());
    if site.hash_option != HASH_BY_ALL {
        o.insert("hashOption".into(), (site.hash_option as i8).into());
    }
    if !site.hash_filter.is_empty() {
        o.insert("hashFilter".into(), lossy(&site.hash_filter).into());
    }
    let attributes = site.attributes.iter().map(|a| json!({ "name": lossy(&a.name), "value": lossy(&a.value) }));
    o.insert("attributes".into(), Value::Array(attributes.collect()));
    o.insert("servers".into(), Value::Array(site.servers.iter().map(server_to_json).collect()));
    Value::Object(o)
}

fn server_to_json(s: &ServerInfo) -> Value {
    let key = PublicKey::decode_data(&s.public_key).ok().and_then(|k| java_jwk(&k));
    let public_key = match key {
        Some(jwk) => json!({ "format": "key", "value": jwk }),
        None => json!({ "format": "base64", "value": base64::engine::general_purpose::STANDARD.encode(&s.public_key) }),
    };
    let interfaces = s.interfaces.iter().map(|i| {
        let protocol = match i.protocol.name() {
            Some(n) => Value::from(n),
            None => Value::from(i.protocol.code() as i8),
        };
        json!({ "query": i.kind.query(), "admin": i.kind.admin(), "protocol": protocol, "port": i.port })
    });
    json!({
        "serverId": s.server_id,
        "address": java_address_string(&s.address),
        "publicKey": public_key,
        "interfaces": interfaces.collect::<Vec<_>>(),
    })
}

/// A server address as Java prints it: dotted IPv4 for 12-zero-prefixed and
/// `::ffff:`-mapped addresses, otherwise Java's IPv6 shortening (which, unlike
/// RFC 5952, never shortens a zero run at the very end).
pub fn java_address_string(address: &[u8; 16]) -> String {
    let server = ServerInfo { server_id: 0, address: *address, public_key: Vec::new(), interfaces: Vec::new() };
    let words = match server.ip_addr() {
        IpAddr::V4(v4) => return v4.to_string(),
        IpAddr::V6(v6) => v6.segments(),
    };
    let (mut cur_start, mut cur, mut best_start, mut best) = (0usize, 0usize, None, 0usize);
    for (i, &w) in words.iter().enumerate() {
        if w == 0 {
            if cur == 0 {
                cur_start = i;
            }
            cur += 1;
        } else {
            if cur > best {
                best_start = Some(cur_start);
                best = cur;
            }
            cur = 0;
        }
    }
    if best == 1 {
        best_start = None;
    }
    let mut out = String::new();
    let mut i = 0;
    while i < 8 {
        if Some(i) == best_start {
            if i == 0 {
                out.push(':');
            }
            out.push(':');
            i += best;
        } else {
            out.push_str(&format!("{:x}", words[i]));
            if i < 7 {
                out.push(':');
            }
            i += 1;
        }
    }
    out
}

/// Java's `lowerCaseIfNeeded`: old site JSON used capitalised keys.
fn legacy_keys(o: &Map<String, Value>) -> Option<Map<String, Value>> {
    if !["ServerList", "Address", "Port"].iter().any(|k| o.contains_key(*k)) {
        return None;
    }
    let lower = |k: &String| {
        let mut c = k.chars();
        c.next().map(|f| f.to_lowercase().chain(c).collect()).unwrap_or_default()
    };
    Some(o.iter().map(|(k, v)| (lower(k), v.clone())).collect())
}

/// A site record from its siteinfo.json form. Missing fields take Java's
/// defaults (version 1, protocol 2.10, hash option 2, no servers).
pub fn site_from_json(j: &Value) -> JResult<SiteInfo> {
    let orig = as_object(j, "site")?;
    let fixed = legacy_keys(orig);
    let o = fixed.as_ref().unwrap_or(orig);
    let mut site = SiteInfo {
        data_version: 1,
        protocol_major: 2,
        protocol_minor: 10,
        serial: 0,
        primary: false,
        multi_primary: false,
        hash_option: HASH_BY_ALL,
        hash_filter: Vec::new(),
        attributes: Vec::new(),
        servers: Vec::new(),
    };
    if let Some(v) = field(o, "version") {
        site.data_version = as_i32(v, "site version")? as u16;
    }
    if let Some(v) = field(o, "protocolVersion") {
        let text = as_text(v, "protocolVersion")?;
        let (major, minor) = text
            .split_once('.')
            .ok_or_else(|| JsonValueError::new(format!("protocolVersion {text:?} is not major.minor")))?;
        site.protocol_major = as_byte(&Value::from(major), "protocol major version")?;
        site.protocol_minor = as_byte(&Value::from(minor), "protocol minor version")?;
    }
    if let Some(v) = field(o, "serialNumber") {
        site.serial = as_i32(v, "serialNumber")? as u16;
    }
    site.primary = field(o, "primarySite").is_some_and(as_bool);
    site.multi_primary = field(o, "multiPrimary").is_some_and(as_bool);
    if let Some(v) = field(o, "hashOption") {
        site.hash_option = as_byte(v, "hashOption")?;
    }
    if let Some(v) = field(o, "hashFilter") {
        site.hash_filter = as_text(v, "hashFilter")?.into_bytes();
    }
    if let Some(v) = field(o, "attributes") {
        site.attributes = attributes_from_json(v)?;
    }
    if let Some(v) = field(o, "servers").or_else(|| field(o, "serverList")) {
        let a = v.as_array().ok_or_else(|| JsonValueError::new("servers must be an array"))?;
        site.servers = a.iter().map(server_from_json).collect::<JResult<_>>()?;
    }
    Ok(site)
}

/// `[{"name","value"}]`, or an object `{name: value | [values]}`.
fn attributes_from_json(j: &Value) -> JResult<Vec<SiteAttribute>> {
    let attr = |name: &str, value: &Value| -> JResult<SiteAttribute> {
        Ok(SiteAttribute { name: name.as_bytes().to_vec(), value: as_text(value, "attribute value")?.into_bytes() })
    };
    match j {
        Value::Array(a) => a
            .iter()
            .map(|e| {
                let o = as_object(e, "site attribute")?;
                attr(
                    &as_text(require(o, "name", "site attribute")?, "attribute name")?,
                    require(o, "value", "site attribute")?,
                )
            })
            .collect(),
        Value::Object(o) => {
            let mut out = Vec::new();
            for (name, v) in o {
                match v {
                    Value::Array(values) => {
                        for value in values {
                            out.push(attr(name, value)?);
                        }
                    }
                    _ => out.push(attr(name, v)?),
                }
            }
            Ok(out)
        }
        _ => err("site attributes must be an array or an object"),
    }
}

fn server_from_json(j: &Value) -> JResult<ServerInfo> {
    let orig = as_object(j, "server")?;
    let fixed = legacy_keys(orig);
    let o = fixed.as_ref().unwrap_or(orig);
    let server_id = field(o, "serverId").map(|v| as_i32(v, "serverId")).transpose()?.unwrap_or(0);
    let address_text = as_text(require(o, "address", "server")?, "server address")?;
    let address = parse_address(&address_text)?;
    let public_key = match field(o, "publicKey") {
        None => Vec::new(),
        Some(Value::String(hex)) if fixed.is_some() => decode_hex(hex)?,
        Some(v) => data_from_json(v)?,
    };
    let interfaces = match field(o, "interfaces").or_else(|| field(o, "interfaceList")) {
        None => Vec::new(),
        Some(v) => {
            let a = v.as_array().ok_or_else(|| JsonValueError::new("interfaces must be an array"))?;
            a.iter().map(interface_from_json).collect::<JResult<_>>()?
        }
    };
    Ok(ServerInfo { server_id, address, public_key, interfaces })
}

/// An IP literal (IPv6 optionally in brackets); IPv4 and `::ffff:`-mapped
/// addresses become the 12-zero-byte form, as Java's `fill16` makes them.
/// Host names are not resolved (no I/O here).
fn parse_address(text: &str) -> JResult<[u8; 16]> {
    let t = text.trim();
    let t = t.strip_prefix('[').and_then(|x| x.strip_suffix(']')).unwrap_or(t);
    match t.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => Ok(ServerInfo::ipv4(v4.octets())),
        Ok(IpAddr::V6(v6)) => Ok(match v6.to_ipv4_mapped() {
            Some(v4) => ServerInfo::ipv4(v4.octets()),
            None => Ipv6Addr::octets(&v6),
        }),
        Err(_) => err(format!("server address {text:?} is not an IP address")),
    }
}

fn interface_from_json(j: &Value) -> JResult<Interface> {
    let orig = as_object(j, "interface")?;
    let fixed = legacy_keys(orig);
    let o = fixed.as_ref().unwrap_or(orig);
    let query = field(o, "query").is_some_and(as_bool);
    let admin = field(o, "admin").is_some_and(as_bool);
    let p = require(o, "protocol", "interface")?;
    let protocol = match p.as_str().and_then(TransportProtocol::from_name) {
        Some(known) => known,
        None => TransportProtocol::from_code(as_byte(p, "interface protocol")?),
    };
    let port = as_i32(require(o, "port", "interface")?, "interface port")?;
    Ok(Interface { kind: InterfaceKind::from_flags(query, admin), protocol, port })
}
