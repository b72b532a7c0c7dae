//! The proxy's HTML: the query form, the values table (`noredirect`), the
//! error and "no values" pages and the tiny redirect body. Everything that
//! comes from a handle or the request is escaped; only URLs with a harmless
//! scheme become links (a `javascript:` URL value is shown, never linked).

use super::escape::{encode, escape, escape_into, iri_to_uri};
use super::locations::is_url;
use handled_proto::data::admin::{AdminPermissions, AdminRecord};
use handled_proto::data::vlist::ValueList;
use handled_proto::json::{format_timestamp, looks_like_binary};
use handled_proto::value::{types, HandleValue};
use std::fmt::Write;

/// Schemes a link may have: what a browser opens as a page, a download or a mail.
fn linkable(url: &str) -> bool {
    url.split_once(':')
        .is_some_and(|(scheme, _)| ["http", "https", "ftp", "mailto"].iter().any(|s| scheme.eq_ignore_ascii_case(s)))
}

/// `<a href=URL>URL</a>` for a harmless URL, else the escaped text.
fn link(url: &str, text: &str) -> String {
    let mut out = String::new();
    link_into(&mut out, url, text);
    out
}

/// [`link`], appended to `out`.
fn link_into(out: &mut String, url: &str, text: &str) {
    if linkable(url) {
        out.push_str("<a href=\"");
        escape_into(out, &iri_to_uri(url));
        out.push_str("\">");
        escape_into(out, text);
        out.push_str("</a>");
    } else {
        escape_into(out, text);
    }
}

/// The proxy URL of a handle (root-relative), with an optional query.
pub(super) fn proxy_path(handle: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => format!("/{}?{q}", encode_path(handle)),
        None => format!("/{}", encode_path(handle)),
    }
}

/// A handle as a path: `/` and the characters paths allow stay.
fn encode_path(handle: &str) -> String {
    encode(handle, b"/:@!$&()*+,;=")
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{}</title></head>\n<body>\n{body}\n\
         <hr>\n<p><small><a href=\"/\">Handle Proxy</a> &middot; JSON: <code>/api/handles/&lt;handle&gt;</code></small></p>\n\
         </body></html>\n",
        escape(title)
    )
}

/// `GET /`: the query form.
pub(super) fn query_page() -> String {
    page(
        "Handle Proxy",
        "<h3>Resolve a Handle and View the Values</h3>\n\
         <p>Type a handle: if it has a URL, your browser is sent there. With \
         &quot;Don't Redirect to URLs&quot; the handle record is shown instead. Appending a \
         handle to this server's address resolves it too. The proxy also supports a REST API, \
         returning handle records in JSON format (<code>/api/handles/&lt;handle&gt;</code>).</p>\n\
         <form action=\"/\" method=\"POST\">\n\
         <p>Handle: <input id=\"hdl\" type=\"text\" name=\"hdl\" value=\"\" size=\"45\" autofocus></p>\n\
         <p><label><input type=\"checkbox\" name=\"auth\" value=\"\">Authoritative Query</label><br>\n\
         <label><input type=\"checkbox\" name=\"noredirect\" value=\"\">Don't Redirect to URLs</label><br>\n\
         <label><input type=\"checkbox\" name=\"ignore_aliases\" value=\"\">Don't Follow Aliases</label></p>\n\
         <p><input type=\"submit\" value=\"Submit\"></p>\n</form>",
    )
}

/// `noredirect`: "Handle Values for: H" and an Index | Type | Timestamp | Data table.
/// `resolves(h)`: whether this proxy's page of handle `h` resolves (types link to theirs only then).
pub(super) fn values_page(handle: &str, values: &[HandleValue], resolves: &dyn Fn(&str) -> bool) -> String {
    let mut rows = String::new();
    let _ =
        writeln!(rows, "<table>\n<tr><th colspan=\"4\" align=\"left\">Handle Values for: {}</th></tr>", escape(handle));
    rows.push_str("<tr><td>Index</td><td>Type</td><td>Timestamp</td><td>Data</td></tr>\n");
    for v in values {
        let when = format_timestamp(v.timestamp).replace('T', "&nbsp;");
        let _ = writeln!(
            rows,
            "<tr><td valign=\"top\"><b>{}</b></td><td valign=\"top\"><b>{}</b></td><td valign=\"top\"><span style=\"white-space:nowrap\">{when}</span></td>\n<td>{}</td></tr>",
            v.index,
            type_cell(&v.value_type, resolves),
            data_cell(v)
        );
    }
    rows.push_str("</table>");
    page("Handle Proxy", &rows)
}

/// Types that are URIs link to themselves; types with `/` are handles and
/// plain types stand for `0.TYPE/<type>`: those link to their proxy page only
/// when it `resolves` (on a stand-alone server `0.TYPE/URL` is a dead 400).
fn type_cell(value_type: &[u8], resolves: &dyn Fn(&str) -> bool) -> String {
    let t = String::from_utf8_lossy(value_type);
    if t.is_empty() {
        return String::new();
    }
    if linkable(&t) {
        return link(&t, &t);
    }
    let handle = if t.contains('/') { t.to_string() } else { format!("0.TYPE/{t}") };
    if !resolves(&handle) {
        return escape(&t);
    }
    format!("<a href=\"{}\">{}</a>", escape(&proxy_path(&handle, None)), escape(&t))
}

const PERMISSION_NAMES: [(u16, &str); 12] = [
    (AdminPermissions::ADD_HANDLE, "create hdl"),
    (AdminPermissions::DELETE_HANDLE, "delete hdl"),
    (AdminPermissions::ADD_DERIVED_PREFIX, "create derived prefix"),
    (AdminPermissions::DELETE_DERIVED_PREFIX, "delete derived prefix"),
    (AdminPermissions::READ_VALUE, "read val"),
    (AdminPermissions::MODIFY_VALUE, "modify val"),
    (AdminPermissions::REMOVE_VALUE, "del val"),
    (AdminPermissions::ADD_VALUE, "add val"),
    (AdminPermissions::MODIFY_ADMIN, "modify admin"),
    (AdminPermissions::REMOVE_ADMIN, "del admin"),
    (AdminPermissions::ADD_ADMIN, "add admin"),
    (AdminPermissions::LIST_HANDLES, "list hdls"),
];

fn data_cell(v: &HandleValue) -> String {
    let text = || String::from_utf8_lossy(&v.data).into_owned();
    if v.is_type(types::HS_ADMIN) {
        if let Ok(a) = AdminRecord::decode_data(&v.data) {
            let granted: Vec<&str> =
                PERMISSION_NAMES.iter().filter(|(bit, _)| a.permissions.contains(*bit)).map(|(_, n)| *n).collect();
            let who = String::from_utf8_lossy(&a.handle);
            return format!("handle={}; index={}; [{}]", escape(&who), a.index, granted.join(","));
        }
    } else if v.is_type(types::HS_VLIST) {
        if let Ok(list) = ValueList::decode_data(&v.data) {
            let refs: Vec<String> =
                list.0.iter().map(|r| escape(&format!("{}:{}", r.index, String::from_utf8_lossy(&r.handle)))).collect();
            return refs.join("<br>");
        }
    } else if v.is_type(types::EMAIL) && !looks_like_binary(&v.data) {
        let address = text();
        return link(&format!("mailto:{address}"), &address);
    } else if is_url(v) && !looks_like_binary(&v.data) {
        let url = text();
        return link(&url, &url);
    }
    if looks_like_binary(&v.data) {
        return format!("<tt>{}</tt>", hex::encode(&v.data));
    }
    escape(&text())
}

/// An error page: the title, the handle, and a hint when it ends with `/`.
pub(super) fn error_page(title: &str, handle: &str) -> String {
    let mut body = format!(
        "<h3>Error - {}</h3>\n<p>The handle you requested -- <b><i>{}</i></b> -- cannot be found.</p>",
        escape(title),
        escape(handle)
    );
    if let Some(trimmed) = handle.strip_suffix('/').filter(|t| !t.is_empty()) {
        let _ = write!(
            body,
            "\n<p>Handles do not end with a slash: did you mean <a href=\"{}\">{}</a>?</p>",
            escape(&proxy_path(trimmed, None)),
            escape(trimmed)
        );
    }
    page(title, &body)
}

/// A type or index filter matched nothing (status 200, as the original).
pub(super) fn no_values_page(handle: &str) -> String {
    page(
        "No Values Found",
        &format!(
            "<h3>No Values Found</h3>\n<p>The handle you requested - <i>{h}</i> - exists but the values you \
             requested were not found. To resolve the handle without requesting a specific value, follow \
             the link below:</p>\n<p><a href=\"{p}\">{h}</a></p>",
            h = escape(handle),
            p = escape(&proxy_path(handle, None))
        ),
    )
}

/// The body of a redirect: one link to where it goes.
/// Written into one buffer: this is on every redirect.
pub(super) fn redirect_body(url: &str) -> String {
    const HEAD: &str = "<html><head><title>Handle Redirect</title></head>\n<body>";
    const TAIL: &str = "</body></html>";
    let mut out = String::with_capacity(HEAD.len() + 2 * url.len() + 16 + TAIL.len());
    out.push_str(HEAD);
    link_into(&mut out, url, url);
    out.push_str(TAIL);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_and_encoding() {
        assert_eq!(escape(r#"<a href="x">&'"#), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
        assert_eq!(iri_to_uri("https://e.org/a?x=1&y=<2> é{}"), "https://e.org/a?x=1&y=%3C2%3E%20%C3%A9%7B%7D");
        assert_eq!(proxy_path("T/<b>x y", Some("a=1")), "/T/%3Cb%3Ex%20y?a=1");
        assert_eq!(redirect_body("https://a/?x=1&y=2"), "<html><head><title>Handle Redirect</title></head>\n<body><a href=\"https://a/?x=1&amp;y=2\">https://a/?x=1&amp;y=2</a></body></html>");
        assert!(!redirect_body("javascript:alert(1)").contains("<a "), "never a javascript: link");
    }

    #[test]
    fn values_table_is_escaped() {
        let mut admin = vec![0x0f, 0xff, 0, 0, 0, 10];
        admin.extend_from_slice(b"TEST/ADMIN");
        admin.extend_from_slice(&300i32.to_be_bytes());
        let values = vec![
            HandleValue::new(1, "URL", "javascript:alert(1)\"><script>x</script>"),
            HandleValue::new(2, "<b>T</b>", "<script>alert(2)</script>"),
            HandleValue::new(3, "EMAIL", "a@b.org"),
            HandleValue::new(4, "URL", "https://ok.example/?a=1&b=2"),
            HandleValue::new(100, "HS_ADMIN", admin),
            HandleValue::new(5, "BIN", vec![0u8, 1, 255]),
        ];
        let html = values_page("TEST/<i>x</i>", &values, &|_| true);
        assert!(!html.contains("<script>") && !html.contains("<b>T") && !html.contains("<i>x"), "{html}");
        assert!(!html.contains("href=\"javascript"), "{html}");
        assert!(html.contains("Handle Values for: TEST/&lt;i&gt;x&lt;/i&gt;"));
        assert!(html.contains("<a href=\"/%3Cb%3ET%3C/b%3E\">&lt;b&gt;T&lt;/b&gt;</a>"), "{html}");
        assert!(html.contains("<a href=\"/0.TYPE/URL\">URL</a>"));
        assert!(html.contains("<a href=\"mailto:a@b.org\">a@b.org</a>"));
        assert!(html.contains("<a href=\"https://ok.example/?a=1&amp;b=2\">https://ok.example/?a=1&amp;b=2</a>"));
        assert!(html.contains("handle=TEST/ADMIN; index=300; [create hdl,delete hdl,create derived prefix,"), "{html}");
        assert!(html.contains("<tt>0001ff</tt>"));
    }

    #[test]
    fn types_link_only_to_pages_that_resolve() {
        let values = [HandleValue::new(1, "URL", "https://a.example/"), HandleValue::new(2, "TEST/kind", "x")];
        let homed_test = |h: &str| h.starts_with("TEST/");
        let html = values_page("TEST/x", &values, &homed_test);
        assert!(!html.contains("/0.TYPE/") && html.contains("<b>URL</b>"), "{html}");
        assert!(html.contains("<a href=\"/TEST/kind\">TEST/kind</a>"), "{html}");
        let html = values_page("TEST/x", &values, &|_| false);
        assert!(html.contains("<b>TEST/kind</b>"), "{html}");
    }

    #[test]
    fn error_pages() {
        let p = error_page("Not Found", "TEST/x/");
        assert!(p.contains("<title>Not Found</title>") && p.contains("<a href=\"/TEST/x\">TEST/x</a>"), "{p}");
        assert!(!error_page("Not Found", "<script>").contains("<script>"));
        assert!(no_values_page("T/\"1").contains("<a href=\"/T/%221\">T/&quot;1</a>"));
    }
}
