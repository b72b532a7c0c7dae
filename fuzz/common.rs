//! What the targets share.

use handled_proto::value::{HandleValue, ValuePermissions};

/// The permissions `value` has once written as JSON and read back: a 4-char
/// permission string never clears admin read (`permissions_from_json`,
/// following Java), so a value without it comes back with it.
pub fn read_back_permissions(value: &HandleValue) -> ValuePermissions {
    ValuePermissions((value.permissions.0 & 0x0f) | ValuePermissions::ADMIN_READ)
}
