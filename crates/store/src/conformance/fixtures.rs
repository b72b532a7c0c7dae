//! Records the conformance suites write and compare.

use crate::HandleRecord;
use handled_proto::{HandleValue, TtlType, ValuePermissions, ValueReference};

/// A record of one URL value with the given data.
pub fn url_record(data: &str) -> HandleRecord {
    HandleRecord::new(vec![HandleValue::new(1, "URL", data)])
}

/// A record exercising every field of a value.
pub fn rich_record(n: u32) -> HandleRecord {
    let mut admin = HandleValue::new(100, "HS_ADMIN", vec![0x0f, 0xf2, 0, 0, 0, 9]);
    admin.permissions = ValuePermissions(0x0c);
    admin.ttl_type = TtlType::Absolute;
    admin.ttl = 1_900_000_000;
    admin.timestamp = 1_700_000_000 + n as i32;
    admin.references = vec![
        ValueReference { handle: b"0.NA/20.5000".to_vec(), index: 200 },
        ValueReference { handle: "ünïcode/x".as_bytes().to_vec(), index: -1 },
    ];
    let binary = HandleValue::new(2, "BIN", (0..=255u8).chain([n as u8]).collect::<Vec<u8>>());
    // In index order: SQL storage (Handle.Net's schema) keeps no other order.
    HandleRecord::new(vec![HandleValue::new(1, "URL", format!("https://example.org/{n}")), binary, admin])
}
