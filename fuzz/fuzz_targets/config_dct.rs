//! Text → Handle.Net's `config.dct` (`handled_proto::streamtable`), the file
//! `import-config` reads from an operator's Handle.Net server directory.
//! Nothing may panic or recurse past the nesting bound; what parses, written
//! back with every string quoted, parses to the same dictionary.

#![no_main]

use handled_proto::streamtable::{parse, Dict, Value};
use libfuzzer_sys::fuzz_target;

fn quoted(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

fn value(v: &Value, out: &mut String) {
    match v {
        Value::Str(s) => quoted(s, out),
        Value::List(items) => {
            out.push_str("(\n");
            for item in items {
                value(item, out);
                out.push('\n');
            }
            out.push(')');
        }
        Value::Dict(d) => dict(d, out),
    }
}

fn dict(d: &Dict, out: &mut String) {
    out.push_str("{\n");
    for (k, v) in &d.0 {
        quoted(k, out);
        out.push_str(" = ");
        value(v, out);
        out.push('\n');
    }
    out.push('}');
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(parsed) = parse(text) else { return };
    let mut written = String::new();
    dict(&parsed, &mut written);
    assert_eq!(parse(&written).as_ref(), Ok(&parsed), "written back: {written}");
});
