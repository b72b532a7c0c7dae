//! The JSON forms of Handle.Net v9 (§4.5.1, §2.7, §2.8), after Java's
//! `GsonUtility`: handle values, admin records, value lists, site records and
//! public keys (JWK). Output matches the Java field order exactly (serde_json
//! `preserve_order`); input accepts what the Java reader accepts.

use std::fmt;

use base64::Engine as _;
use serde_json::{json, Map, Value};

use crate::codec::Codec;
use crate::data::admin::{AdminPermissions, AdminRecord};
use crate::data::pubkey::PublicKey;
use crate::data::site::SiteInfo;
use crate::data::vlist::ValueList;
use crate::value::{is_secret_type, types, HandleValue, TtlType, ValuePermissions, ValueReference};

/// Why a JSON value could not be turned into a handle value (or part of one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsonValueError {
    pub message: String,
}

impl JsonValueError {
    pub fn new(message: impl Into<String>) -> Self {
        JsonValueError { message: message.into() }
    }
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for JsonValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for JsonValueError {}

mod key;
mod site;

pub use key::{public_key_from_jwk, public_key_to_jwk};
pub use site::{java_address_string, site_from_json, site_to_json};

pub(crate) type JResult<T> = Result<T, JsonValueError>;

pub(crate) fn err<T>(message: impl Into<String>) -> JResult<T> {
    Err(JsonValueError::new(message))
}

pub(crate) fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

// ---------------------------------------------------------------- output

/// A handle value as the REST API prints it: `index`, `type`, `data`,
/// `permissions` (unless `1110` on a type not secret), `ttl`, `timestamp` (unless 0), `references`
/// (unless empty).
pub fn value_to_json(v: &HandleValue) -> Value {
    let mut o = Map::new();
    o.insert("index".into(), v.index.into());
    o.insert("type".into(), lossy(&v.value_type).into());
    o.insert("data".into(), data_to_json(&v.value_type, &v.data));
    // Java keeps only the four low permission bits. A secret key's are always
    // written: read without them it gets 1100, not 1110 (`default_for`), so
    // one left publicly readable would not stay so through the JSON form.
    if v.permissions.0 & 0x0f != ValuePermissions::DEFAULT.0 || is_secret_type(&v.value_type) {
        o.insert("permissions".into(), permissions_to_json(v.permissions).into());
    }
    o.insert(
        "ttl".into(),
        match v.ttl_type {
            TtlType::Relative => v.ttl.into(),
            TtlType::Absolute => format_timestamp(v.ttl).into(),
        },
    );
    if v.timestamp != 0 {
        o.insert("timestamp".into(), format_timestamp(v.timestamp).into());
    }
    if !v.references.is_empty() {
        o.insert("references".into(), Value::Array(v.references.iter().map(reference_to_json).collect()));
    }
    Value::Object(o)
}

/// `"1110"`-style: admin read, admin write, public read, public write.
pub fn permissions_to_json(p: ValuePermissions) -> String {
    [p.admin_read(), p.admin_write(), p.public_read(), p.public_write()]
        .iter()
        .map(|&b| if b { '1' } else { '0' })
        .collect()
}

/// `{"format","value"}` for a value's data: structured for HS_ADMIN, HS_VLIST,
/// HS_SITE (and HS_SITE.PREFIX / HS_NA_DELEGATE) and RSA/DSA HS_PUBKEY;
/// otherwise, or when structured decoding fails, `string` or `base64`.
pub fn data_to_json(value_type: &[u8], data: &[u8]) -> Value {
    let is = |name| crate::value::is_type_or_subtype(value_type, name);
    let structured = if is(types::HS_ADMIN) {
        AdminRecord::decode_data_legacy(data).ok().map(|(rec, legacy)| ("admin", admin_to_json_inner(&rec, legacy)))
    } else if is(types::HS_VLIST) {
        ValueList::decode_data(data).ok().map(|l| ("vlist", vlist_to_json(&l)))
    } else if is(types::HS_SITE) || is(types::HS_SITE_PREFIX) || is(types::HS_NA_DELEGATE) {
        SiteInfo::decode_data(data).ok().map(|s| ("site", site_to_json(&s)))
    } else if is(types::HS_PUBKEY) {
        PublicKey::decode_data(data).ok().and_then(|k| key::java_jwk(&k)).map(|j| ("key", j))
    } else {
        None
    };
    match structured {
        Some((format, value)) => json!({ "format": format, "value": value }),
        None => unstructured_data_to_json(data),
    }
}

fn unstructured_data_to_json(data: &[u8]) -> Value {
    match std::str::from_utf8(data) {
        Ok(s) if !looks_like_binary(data) => json!({ "format": "string", "value": s }),
        _ => json!({ "format": "base64", "value": base64::engine::general_purpose::STANDARD.encode(data) }),
    }
}

/// Java `Util.looksLikeBinary`: not UTF-8, or a control byte other than
/// 0x09–0x13 (sic, hex), or DEL.
pub fn looks_like_binary(data: &[u8]) -> bool {
    std::str::from_utf8(data).is_err() || data.iter().any(|&b| (b < 0x20 && !(0x09..=0x13).contains(&b)) || b == 0x7f)
}

pub fn admin_to_json(rec: &AdminRecord) -> Value {
    admin_to_json_inner(rec, false)
}

fn admin_to_json_inner(rec: &AdminRecord, legacy: bool) -> Value {
    let mut o = Map::new();
    o.insert("handle".into(), lossy(&rec.handle).into());
    o.insert("index".into(), rec.index.into());
    o.insert("permissions".into(), rec.permissions.to_bit_string().into());
    if legacy {
        o.insert("legacyByteLength".into(), true.into());
    }
    Value::Object(o)
}

fn reference_to_json(r: &ValueReference) -> Value {
    json!({ "handle": lossy(&r.handle), "index": r.index })
}

pub fn vlist_to_json(list: &ValueList) -> Value {
    Value::Array(list.0.iter().map(reference_to_json).collect())
}

/// Unix seconds as ISO-8601 UTC without fraction, e.g. `2023-11-14T22:13:20Z`.
pub fn format_timestamp(secs: i32) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    // Every i32 is a valid time in years 1901–2038, so neither step fails.
    time::OffsetDateTime::from_unix_timestamp(i64::from(secs))
        .ok()
        .and_then(|t| t.format(FORMAT).ok())
        .unwrap_or_default()
}

// ---------------------------------------------------------------- input

/// Parse an ISO-8601 date-time into Unix seconds: RFC 3339 / ISO-8601 with
/// `Z` or an offset, fractions dropped; without an offset it is UTC; a bare
/// date is midnight UTC. Must fit a signed 32-bit Unix time.
pub fn parse_timestamp(s: &str) -> JResult<i32> {
    use time::format_description::well_known::{Iso8601, Rfc3339};
    let s = s.trim();
    let secs = time::OffsetDateTime::parse(s, &Rfc3339)
        .or_else(|_| time::OffsetDateTime::parse(s, &Iso8601::DEFAULT))
        .map(|t| t.unix_timestamp())
        .or_else(|_| time::PrimitiveDateTime::parse(s, &Iso8601::DEFAULT).map(|t| t.assume_utc().unix_timestamp()))
        .or_else(|_| time::Date::parse(s, &Iso8601::DEFAULT).map(|d| d.midnight().assume_utc().unix_timestamp()))
        .map_err(|_| JsonValueError::new(format!("invalid ISO-8601 date-time {s:?}")))?;
    i32::try_from(secs).map_err(|_| JsonValueError::new(format!("date-time {s:?} is out of range")))
}

pub(crate) fn field<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    o.get(key).filter(|v| !v.is_null())
}

pub(crate) fn require<'a>(o: &'a Map<String, Value>, key: &str, what: &str) -> JResult<&'a Value> {
    field(o, key).ok_or_else(|| JsonValueError::new(format!("{what}: missing \"{key}\"")))
}

pub(crate) fn as_object<'a>(v: &'a Value, what: &str) -> JResult<&'a Map<String, Value>> {
    v.as_object().ok_or_else(|| JsonValueError::new(format!("{what} must be a JSON object")))
}

/// Gson `getAsString`: strings, and the text of numbers and booleans.
pub(crate) fn as_text(v: &Value, what: &str) -> JResult<String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        _ => err(format!("{what} must be a string")),
    }
}

/// Gson `getAsInt`-like: an integral number, or a string holding one.
pub(crate) fn as_i64(v: &Value, what: &str) -> JResult<i64> {
    let n = match v {
        Value::Number(n) => {
            n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e18).map(|f| f as i64))
        }
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    };
    n.ok_or_else(|| JsonValueError::new(format!("{what} must be an integer")))
}

pub(crate) fn as_i32(v: &Value, what: &str) -> JResult<i32> {
    i32::try_from(as_i64(v, what)?).map_err(|_| JsonValueError::new(format!("{what} is out of range")))
}

/// A Java `byte`: -128..=255 accepted, stored as its low 8 bits.
pub(crate) fn as_byte(v: &Value, what: &str) -> JResult<u8> {
    match as_i64(v, what)? {
        n @ -128..=255 => Ok(n as u8),
        _ => err(format!("{what} is out of range")),
    }
}

/// Gson `getAsBoolean`: booleans, and `Boolean.parseBoolean` of anything else.
pub(crate) fn as_bool(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::String(s) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// Parse a handle value from its JSON form (§4.5.1). Accepts everything the
/// Java reader accepts: `data` as a bare string or `{"format","value"}` with
/// formats string/base64/hex/admin/vlist/site/key in any case; `permissions`
/// as Java reads it (`"*"`, and the quirk that a 4-char string never clears
/// admin read); `ttl` as a number (relative) or ISO string (absolute).
/// `timestamp` is taken when it parses and otherwise ignored.
pub fn value_from_json(j: &Value) -> JResult<HandleValue> {
    let o = as_object(j, "handle value")?;
    let index = as_i32(require(o, "index", "handle value")?, "value index")?;
    let value_type = as_text(require(o, "type", "handle value")?, "value type")?.into_bytes();
    let data = data_from_json(require(o, "data", "handle value")?)?;
    let mut v = HandleValue::new(index, value_type, data);
    if let Some(p) = field(o, "permissions") {
        v.permissions = permissions_from_json(&as_text(p, "value permissions")?, v.permissions);
    }
    if let Some(ttl) = field(o, "ttl") {
        match ttl {
            Value::String(s) => {
                v.ttl_type = TtlType::Absolute;
                v.ttl = parse_timestamp(s).map_err(|e| JsonValueError::new(format!("ttl: {e}")))?;
            }
            Value::Number(_) => v.ttl = as_i32(ttl, "ttl")?,
            _ => return err("ttl must be a number (relative) or an ISO-8601 string (absolute)"),
        }
    }
    // The server stamps values itself, so a bad timestamp is not an error.
    if let Some(Value::String(ts)) = field(o, "timestamp") {
        v.timestamp = parse_timestamp(ts).unwrap_or(0);
    }
    if let Some(refs) = field(o, "references") {
        v.references = references_from_json(refs, "references")?;
    }
    Ok(v)
}

/// Java's reader of the 4-char permission string, quirks included: starting
/// from `current`, the last char sets public write, the one before public read,
/// then admin write, and admin read only for strings of 5+ chars.
pub fn permissions_from_json(s: &str, current: ValuePermissions) -> ValuePermissions {
    if s == "*" {
        return ValuePermissions(0x0f);
    }
    let chars: Vec<u16> = s.encode_utf16().collect();
    let len = chars.len();
    let mut bits = current.0;
    let mut set = |present: bool, offset: usize, bit: u8| {
        if present {
            if chars[len - offset] == u16::from(b'1') {
                bits |= bit;
            } else {
                bits &= !bit;
            }
        }
    };
    set(len > 1, 1, ValuePermissions::PUBLIC_WRITE);
    set(len > 2, 2, ValuePermissions::PUBLIC_READ);
    set(len > 3, 3, ValuePermissions::ADMIN_WRITE);
    set(len > 4, 4, ValuePermissions::ADMIN_READ);
    ValuePermissions(bits)
}

/// A value's data from `{"format","value"}` or a bare string.
pub fn data_from_json(j: &Value) -> JResult<Vec<u8>> {
    let o = match j {
        Value::Object(o) => o,
        Value::String(_) | Value::Number(_) | Value::Bool(_) => return Ok(as_text(j, "data")?.into_bytes()),
        _ => return err("data must be a string or an object with \"format\" and \"value\""),
    };
    let format = as_text(require(o, "format", "data")?, "data format")?;
    let value = || require(o, "value", "data");
    match format.to_ascii_lowercase().as_str() {
        "string" => Ok(as_text(value()?, "data value")?.into_bytes()),
        "base64" => Ok(decode_base64_lenient(&as_text(value()?, "data value")?)),
        "hex" => decode_hex(&as_text(value()?, "data value")?),
        "admin" => {
            let v = value()?;
            let rec = admin_from_json(v)?;
            let legacy = v.get("legacyByteLength").is_some_and(as_bool);
            Ok(if legacy { rec.to_bytes_legacy() } else { rec.to_bytes() })
        }
        "vlist" => Ok(vlist_from_json(value()?)?.to_bytes()),
        "site" => Ok(site_from_json(value()?)?.to_bytes()),
        "key" => Ok(public_key_from_jwk(value()?)?.to_bytes()),
        _ => err(format!("unexpected data format {format:?}")),
    }
}

/// Admin record from `{"handle","index","permissions"}`; `permissions` may be
/// the bit string (`"*"` = all), a number (the permission word), a boolean
/// (all/none) or an array of up to 12 truthy values (index 0 = add handle).
pub fn admin_from_json(j: &Value) -> JResult<AdminRecord> {
    let o = as_object(j, "admin record")?;
    let handle = as_text(require(o, "handle", "admin record")?, "admin handle")?.into_bytes();
    let index = as_i32(require(o, "index", "admin record")?, "admin index")?;
    let bits = match field(o, "permissions") {
        None => 0,
        Some(Value::String(s)) if s == "*" => AdminPermissions::ALL,
        Some(Value::String(s)) => bit_string(s),
        Some(Value::Bool(true)) => AdminPermissions::ALL,
        Some(Value::Bool(false)) => 0,
        // Java: Integer.toBinaryString(n), i.e. the low 12 bits of the number.
        Some(n @ Value::Number(_)) => (as_i64(n, "admin permissions")? & i64::from(AdminPermissions::ALL)) as u16,
        Some(Value::Array(a)) => {
            a.iter().take(12).enumerate().filter(|(_, v)| truthy(v)).fold(0, |acc, (i, _)| acc | 1 << i)
        }
        Some(_) => return err("admin permissions must be a string, number, boolean or array"),
    };
    Ok(AdminRecord { permissions: AdminPermissions(bits), handle, index })
}

/// Rightmost char is bit 0; only `'1'` sets a bit; at most 12 chars count.
fn bit_string(s: &str) -> u16 {
    let units: Vec<u16> = s.encode_utf16().collect();
    units
        .into_iter()
        .rev()
        .take(12)
        .enumerate()
        .filter(|&(_, c)| c == u16::from(b'1'))
        .fold(0, |acc, (i, _)| acc | 1 << i)
}

/// JavaScript-like truthiness, as Java's `isTruthy`.
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::String(s) => !s.is_empty(),
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::Array(_) | Value::Object(_) => true,
    }
}

fn reference_from_json(j: &Value) -> JResult<ValueReference> {
    let o = as_object(j, "value reference")?;
    let handle = as_text(require(o, "handle", "value reference")?, "reference handle")?.into_bytes();
    let index = as_i32(require(o, "index", "value reference")?, "reference index")?;
    Ok(ValueReference { handle, index })
}

fn references_from_json(j: &Value, what: &str) -> JResult<Vec<ValueReference>> {
    let a = j.as_array().ok_or_else(|| JsonValueError::new(format!("{what} must be an array")))?;
    a.iter().map(reference_from_json).collect()
}

pub fn vlist_from_json(j: &Value) -> JResult<ValueList> {
    Ok(ValueList(references_from_json(j, "value list")?))
}

/// Base64 as Apache commons-codec decodes it: standard and URL-safe alphabets,
/// padding optional, other characters (whitespace) skipped, stops at `=`.
pub fn decode_base64_lenient(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut nbits) = (0u32, 0u32);
    for c in s.bytes() {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            _ => continue,
        };
        acc = (acc << 6 | u32::from(v)) & 0xff_ffff;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((acc >> nbits) as u8);
        }
    }
    out
}

/// Strict hex (either case), as commons-codec `Hex.decodeHex`.
pub fn decode_hex(s: &str) -> JResult<Vec<u8>> {
    if s.len() & 1 == 1 {
        return err("hex data has an odd number of digits");
    }
    let digit = |c: u8| {
        (c as char).to_digit(16).ok_or_else(|| JsonValueError::new(format!("invalid hex digit {:?}", c as char)))
    };
    s.as_bytes().chunks(2).map(|p| Ok((digit(p[0])? << 4 | digit(p[1])?) as u8)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzzing (fuzz/fuzz_targets/json_value.rs): a publicly
    /// readable HS_SECKEY was written without `permissions` (1110, the
    /// default Java leaves out) and read back as 1100.
    #[test]
    fn secret_key_permissions_survive_the_json_form() {
        for bits in [0x0c, 0x0e, 0x0f] {
            let mut v = HandleValue::new(300, "HS_SECKEY", "secret");
            v.permissions = ValuePermissions(bits);
            let json = value_to_json(&v);
            assert_eq!(value_from_json(&json).unwrap().permissions, ValuePermissions(bits), "{json}");
        }
        // Other types still leave out the default, as Java does.
        let url = value_to_json(&HandleValue::new(1, "URL", "https://example.org/"));
        assert!(url.get("permissions").is_none());
    }
}
