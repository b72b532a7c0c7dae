//! The root sites a walk of the global system starts from: Handle.Net's
//! `root_info` in any of its forms, and site record files.

use handled_proto::codec::Codec;
use handled_proto::data::site::SiteInfo;
use handled_proto::value::HandleValue;
use std::path::Path;

/// Read the root site record(s) of `root_info`: a binary HS_SITE record (as
/// GET_SITE_INFO answers), Handle.Net's own binary `root_info` (the root
/// handle's values), its `siteinfo.json` form, or a JSON array of such sites.
pub fn load_root_info(path: &Path) -> Result<Vec<SiteInfo>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("root_info {}: {e}", path.display()))?;
    parse_root_info(&bytes).map_err(|e| format!("root_info {}: {e}", path.display()))
}

/// [`load_root_info`] on the file's bytes (errors without the path).
pub fn parse_root_info(bytes: &[u8]) -> Result<Vec<SiteInfo>, String> {
    let sites = match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') | Some(b'[') => {
            let json: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
            let items = match json {
                serde_json::Value::Array(items) => items,
                one => vec![one],
            };
            items
                .iter()
                .map(|j| handled_proto::json::site_from_json(j).map_err(|e| e.to_string()))
                .collect::<Result<Vec<_>, _>>()?
        }
        _ => match SiteInfo::decode_data(bytes) {
            Ok(site) => vec![site],
            Err(e) => global_values_sites(bytes)
                .map_err(|_| format!("neither a site record ({e}) nor Handle.Net's root_info"))?,
        },
    };
    if sites.is_empty() || sites.iter().any(|s| s.servers.is_empty()) {
        return Err("a site without servers".into());
    }
    Ok(sites)
}

/// Handle.Net's binary `root_info` (Java `Encoder.encodeGlobalValues`):
/// `u32 length of the rest ‖ u32 count ‖ count handle values`, of which the
/// HS_SITE ones are the root sites.
fn global_values_sites(bytes: &[u8]) -> Result<Vec<SiteInfo>, handled_proto::DecodeError> {
    use handled_proto::codec::{Codec, Reader};
    let mut r = Reader::new(bytes);
    let length = r.u32("root_info length")? as usize;
    if length != r.remaining() {
        return Err(handled_proto::DecodeError::TrailingBytes { what: "root_info", count: r.remaining() });
    }
    let values = r.list("root_info values", 4, HandleValue::read)?;
    r.expect_end("root_info")?;
    values
        .iter()
        .filter(|v| v.value_type == handled_proto::value::types::HS_SITE || v.value_type == b"HS_SITE.6")
        .map(|v| SiteInfo::decode_data(&v.data))
        .collect()
}

/// `siteinfo.json` (Handle.Net's JSON form) or the binary `siteinfo.bin`.
pub fn read_site_file(path: &std::path::Path) -> Result<SiteInfo, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_site_file(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

/// [`read_site_file`] on the file's bytes (errors without the path).
pub fn parse_site_file(bytes: &[u8]) -> Result<SiteInfo, String> {
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
        let json: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        handled_proto::json::site_from_json(&json).map_err(|e| e.to_string())
    } else {
        SiteInfo::from_bytes(bytes).map_err(|e| format!("not a site record: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::site;
    use super::*;

    #[test]
    fn root_info_in_binary_json_and_array_forms() {
        let dir = tempfile::tempdir().unwrap();
        let one = site(2641, vec![1, 2, 3]);
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        let bin = write("root_info", &one.to_bytes());
        assert_eq!(load_root_info(&bin).unwrap(), vec![one.clone()]);
        let json = handled_proto::json::site_to_json(&one);
        let single = write("siteinfo.json", json.to_string().as_bytes());
        assert_eq!(load_root_info(&single).unwrap()[0].servers[0].interfaces, one.servers[0].interfaces);
        let array = write("sites.json", serde_json::json!([json, json]).to_string().as_bytes());
        assert_eq!(load_root_info(&array).unwrap().len(), 2);
        // Handle.Net's root_info: the root handle's values, as Encoder.encodeGlobalValues writes them.
        let values = [
            HandleValue::new(1, "HS_SITE", one.to_bytes()),
            HandleValue::new(100, "HS_ADMIN", vec![0; 10]),
            HandleValue::new(2, "HS_SITE.6", one.to_bytes()),
        ];
        let mut rest = Vec::new();
        handled_proto::codec::put_u32(&mut rest, values.len() as u32);
        values.iter().for_each(|v| v.encode(&mut rest));
        let mut global = Vec::new();
        handled_proto::codec::put_u32(&mut global, rest.len() as u32);
        global.extend_from_slice(&rest);
        assert_eq!(load_root_info(&write("hs_root_info", &global)).unwrap(), vec![one.clone(), one.clone()]);
        global.push(0);
        assert!(load_root_info(&write("hs_root_info_long", &global)).is_err());
        for (name, bytes) in [("empty", &b""[..]), ("junk", b"\x00\x01junk"), ("bad.json", b"{\"servers\": 3}")] {
            let e = load_root_info(&write(name, bytes)).unwrap_err();
            assert!(e.contains("root_info"), "{e}");
        }
        let mut no_servers = one.clone();
        no_servers.servers.clear();
        assert!(load_root_info(&write("none", &no_servers.to_bytes())).unwrap_err().contains("without servers"));
        assert!(load_root_info(&dir.path().join("missing")).is_err());
    }
}
