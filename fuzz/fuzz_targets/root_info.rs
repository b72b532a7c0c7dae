//! Bytes → the root sites of `root_info` in every form `load_root_info`
//! takes (binary HS_SITE, Handle.Net's binary root_info, siteinfo.json, a JSON
//! array of sites) and `siteinfo.json`/`siteinfo.bin` as `read_site_file`
//! reads them: an operator's files. Nothing may panic; what loads has
//! servers, and a site file that reads writes a JSON form that reads back.

#![no_main]

use handled_client::sites::{parse_root_info, parse_site_file};
use handled_proto::json::{site_from_json, site_to_json};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(sites) = parse_root_info(data) {
        assert!(!sites.is_empty() && sites.iter().all(|s| !s.servers.is_empty()));
    }
    if let Ok(site) = parse_site_file(data) {
        let json = site_to_json(&site);
        let back = site_from_json(&json).expect("the JSON form of a site file reads back");
        assert_eq!(site_to_json(&back), json, "siteinfo.json form is stable");
    }
});
