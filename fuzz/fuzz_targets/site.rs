//! Bytes → HS_SITE record (the binary site record of GET_SITE_INFO, HS_SITE
//! values and `siteinfo.bin`). Nothing may panic; what decodes re-encodes to
//! its normal form (the same bytes, unknown site flag bits cleared), and its
//! siteinfo.json form reads back as the same site.

#![no_main]

use handled_proto::codec::Codec;
use handled_proto::data::site::SiteInfo;
use handled_proto::json::{site_from_json, site_to_json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(site) = SiteInfo::from_bytes(data) else { return };
    // The codec keeps every field, attributes and unknown interface codes
    // included; of the flags byte (offset 6) only primary (0x80) and
    // multi-primary (0x40) mean anything, as in Java, and the rest is dropped.
    let mut normal = data.to_vec();
    normal[6] &= 0xc0;
    assert_eq!(site.to_bytes(), normal, "HS_SITE re-encodes to its normal form");
    assert_eq!(SiteInfo::decode_data(data).as_ref(), Ok(&site));
    let _ = site.server_index(b"0.NA/TEST");
    let json = site_to_json(&site);
    let back = site_from_json(&json).expect("the JSON form of a decoded site reads back");
    assert_eq!(site_to_json(&back), json, "siteinfo.json form is stable");
});
