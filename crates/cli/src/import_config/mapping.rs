//! config.dct (and siteinfo.json) keys → `handled.toml` lines, and for every
//! key not carried over one line saying why.

use crate::printable::printable;
use handled_proto::data::SiteInfo;
use handled_proto::streamtable::{Dict, Value};
use std::collections::BTreeSet;

/// The TOML being written, and the notes on what was not carried over.
/// Values are written as TOML strings by a serializer; comments (origins and
/// notes, which quote config.dct) are kept to one line with control
/// characters escaped, so that nothing read can become a live line.
pub struct Mapped {
    lines: Vec<String>,
    /// The keys set as live lines, to check the output against.
    keys: Vec<String>,
    pub skipped: Vec<String>,
    /// Of those, the ones that change what clients see (repeated on stderr).
    pub warnings: Vec<String>,
    /// Keys this build of `handled` knows (others are written as comments).
    known: BTreeSet<String>,
}

/// A TOML value, written in TOML syntax.
pub enum Toml {
    Str(String),
    Int(u64),
    Bool(bool),
    Strs(Vec<String>),
}

impl Toml {
    fn render(&self) -> String {
        let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
        match self {
            Toml::Str(s) => quote(s),
            Toml::Int(n) => n.to_string(),
            Toml::Bool(b) => b.to_string(),
            Toml::Strs(v) => format!("[{}]", v.iter().map(|s| quote(s)).collect::<Vec<_>>().join(", ")),
        }
    }
}

impl Mapped {
    pub fn new(known: BTreeSet<String>) -> Self {
        Mapped { lines: Vec::new(), keys: Vec::new(), skipped: Vec::new(), warnings: Vec::new(), known }
    }

    /// `key = value  # from <origin>`, or a comment when this build lacks the
    /// key. A dotted key (`templates.delimiter`) sets a key of a table.
    pub fn set(&mut self, key: &str, value: Toml, origin: &str) {
        let line = format!("{key} = {}", value.render());
        let origin = printable(origin);
        let top = key.split('.').next().unwrap_or(key);
        if self.known.contains(top) {
            self.lines.push(format!("{line}  # {origin}"));
            self.keys.push(top.to_owned());
        } else {
            self.lines.push(format!("# {line}  # {origin}; not in this build of handled yet (replication)"));
            self.skip(&origin, &format!("written as a comment: this build of handled has no `{key}` yet"));
        }
    }

    pub fn comment(&mut self, text: &str) {
        self.lines.push(format!("# {}", printable(text)));
    }

    pub fn skip(&mut self, origin: &str, why: &str) {
        self.skipped.push(format!("{}: {}", printable(origin), printable(why)));
    }

    /// A key not carried over in a way clients will notice (the site key).
    pub fn warn(&mut self, origin: &str, why: &str) {
        self.skip(origin, &format!("WARNING: {why}"));
        self.warnings.push(format!("{}: {}", printable(origin), printable(why)));
    }

    /// Whether `key` is written (or written as a comment for a newer build).
    pub fn has(&self, key: &str) -> bool {
        let prefix = format!("{key} = ");
        self.lines.iter().any(|l| l.trim_start_matches("# ").starts_with(&prefix))
    }

    /// The file, checked: it parses, and its keys are exactly those set.
    pub fn toml(&self) -> anyhow::Result<String> {
        let mut out = self.lines.join("\n");
        out.push('\n');
        let parsed: toml::Table =
            out.parse().map_err(|e| anyhow::anyhow!("the handled.toml written does not parse (a bug): {e}"))?;
        let mut found: Vec<&String> = parsed.keys().collect();
        let mut wanted: Vec<&String> = self.keys.iter().collect();
        found.sort();
        wanted.sort();
        wanted.dedup();
        anyhow::ensure!(found == wanted, "the handled.toml written sets {found:?}, not {wanted:?} (a bug)");
        Ok(out)
    }
}

pub fn yes(v: &str) -> bool {
    matches!(v.trim().to_ascii_lowercase().as_str(), "yes" | "true" | "y" | "1")
}

pub fn strings(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::List(items) => items.iter().map(|i| i.as_str().map(str::to_string)).collect(),
        Value::Str(s) => Some(vec![s.clone()]),
        Value::Dict(_) => None,
    }
}

fn number(v: &Value) -> Option<u64> {
    v.as_str()?.trim().parse().ok()
}

/// The top level of config.dct.
pub fn map_top(m: &mut Mapped, top: &Dict) {
    let interfaces = top.get("interfaces").and_then(strings).unwrap_or_default();
    let iface = |name: &str| {
        top.get(&format!("{name}_config")).and_then(|v| if let Value::Dict(d) = v { Some(d) } else { None })
    };
    map_interfaces(m, &interfaces, iface("hdl_tcp"), iface("hdl_udp"), iface("hdl_http"));
    for (key, value) in &top.0 {
        let why = match key.as_str() {
            "interfaces" | "hdl_tcp_config" | "hdl_udp_config" | "hdl_http_config" => continue,
            "server_config" => {
                match value {
                    Value::Dict(d) => map_server_config(m, d),
                    _ => m.skip("server_config", "not a { } dictionary; ignored"),
                }
                continue;
            }
            "server_type" if value.as_str() == Some("server") => continue,
            "server_type" => "handled is a handle server only (no caching server); run it as one",
            k if k.ends_with("4_config") || k.ends_with("6_config") => {
                "dual-stack interfaces: handled binds one `listen` address (use a wildcard address to serve both)"
            }
            "log_save_config" => "handled logs to stderr (journald or your log collector rotates)",
            "no_udp_resolution" => {
                "handled's resolver ([resolver]) asks over UDP first and falls back to TCP, then HTTP, by itself"
            }
            _ => "no equivalent in handled (a setting of Handle.Net's built-in client or an unknown key)",
        };
        m.skip(key, why);
    }
}

fn map_interfaces(m: &mut Mapped, interfaces: &[String], tcp: Option<&Dict>, udp: Option<&Dict>, http: Option<&Dict>) {
    let listed = |name: &str| interfaces.iter().any(|i| i == name);
    for name in ["hdl_tcp", "hdl_udp", "hdl_http"] {
        if !listed(name) {
            m.skip(
                "interfaces",
                &format!(
                    "{name} is not listed, but handled always serves it; keep it out of the site record by firewall"
                ),
            );
        }
    }
    let get = |d: Option<&Dict>, k: &str| d.and_then(|d| d.get(k)).and_then(Value::as_str).map(str::to_string);
    let addresses: Vec<(&str, String)> = [("hdl_tcp", tcp), ("hdl_udp", udp), ("hdl_http", http)]
        .into_iter()
        .map(|(n, d)| (n, get(d, "bind_address").unwrap_or_else(|| "0.0.0.0".into())))
        .collect();
    m.set("listen", Toml::Str(addresses[0].1.clone()), "hdl_tcp_config.bind_address (unset: any address)");
    for (name, address) in &addresses[1..] {
        if *address != addresses[0].1 {
            m.skip(
                &format!("{name}_config.bind_address"),
                &format!("{address}: handled binds every interface to `listen`"),
            );
        }
    }
    let port = |d: Option<&Dict>| get(d, "bind_port").and_then(|p| p.trim().parse::<u16>().ok());
    if let Some(p) = port(tcp).or(port(udp)) {
        m.set("port", Toml::Int(p.into()), "hdl_tcp_config.bind_port");
        if let Some(u) = port(udp).filter(|&u| u != p) {
            m.skip("hdl_udp_config.bind_port", &format!("{u}: handled serves UDP and TCP on one port ({p})"));
        }
    }
    if let Some(p) = port(http) {
        m.set("http_port", Toml::Int(p.into()), "hdl_http_config.bind_port (HTTP and HTTPS)");
    }
    let logs = [tcp, udp, http].iter().any(|d| get(*d, "log_accesses").is_some_and(|v| yes(&v)));
    m.set("access_log", Toml::Str(if logs { "full" } else { "off" }.into()), "log_accesses");
    if let Some(ms) = tcp.and_then(|d| d.get("max_idle_time")).and_then(number) {
        m.set("tcp_idle_timeout_secs", Toml::Int(ms.div_ceil(1000)), "hdl_tcp_config.max_idle_time (ms)");
    }
    for (name, dict) in [("hdl_tcp", tcp), ("hdl_udp", udp), ("hdl_http", http)] {
        for (key, _) in dict.map(|d| d.0.as_slice()).unwrap_or_default() {
            let why = match key.as_str() {
                "bind_address" | "bind_port" | "log_accesses" => continue,
                "max_idle_time" if name == "hdl_tcp" => continue,
                "num_threads" | "max_handlers" | "backlog" => {
                    "handled sizes its work by admission control (`max_concurrent`, `queue_length`), not threads per interface"
                }
                "query_page" | "response_page" | "error_page" | "virtual_hosts" => {
                    "handled's proxy has no custom pages (put a web server in front for custom HTML)"
                }
                _ => "no equivalent in handled",
            };
            m.skip(&format!("{name}_config.{key}"), why);
        }
    }
}

/// The `server_config` dictionary.
pub fn map_server_config(m: &mut Mapped, sc: &Dict) {
    let on_sql = sc.get("storage_type").and_then(Value::as_str).is_some_and(|s| s.trim().eq_ignore_ascii_case("sql"));
    for (key, value) in &sc.0 {
        let origin = format!("server_config.{key}");
        let text = value.as_str().unwrap_or_default();
        match key.as_str() {
            "server_admins" | "replication_admins" | "backup_admins" | "status_handle_admins" => match strings(value) {
                Some(list) => m.set(key, Toml::Strs(list), &origin),
                None => m.skip(&origin, "not a list of INDEX:HANDLE strings; ignored"),
            },
            "auto_homed_prefixes" => {
                m.set("prefixes", Toml::Strs(prefix_names(value)), &format!("{origin} (0.NA/ taken off)"))
            }
            // A mirror's prefix filter; handled's also takes dotted children (docs/replication.md).
            "replication_accept_prefixes" => {
                m.set("replication_prefixes", Toml::Strs(prefix_names(value)), &format!("{origin} (0.NA/ taken off)"))
            }
            "case_sensitive" | "server_admin_full_access" | "enable_monitor_daemon" => {
                m.set(key, Toml::Bool(yes(text)), &origin)
            }
            "template_delimiter" if !text.trim().is_empty() => {
                m.set("templates.delimiter", Toml::Str(text.trim().to_string()), &origin)
            }
            "namespace" => m.set("templates.namespace", Toml::Str(text.to_string()), &origin),
            "template_ns_override" => m.set("templates.namespace_override", Toml::Bool(yes(text)), &origin),
            "allow_list_hdls" => m.set("allow_list_handles", Toml::Bool(yes(text)), &origin),
            // Handle.Net resolves REC requests of other prefixes with this; so
            // does handled's [resolver] (docs/resolver.md), from loopback only
            // until `[resolver] allow` names the clients' networks.
            "allow_recursion" => m.set("resolver.allow_recursion", Toml::Bool(yes(text)), &origin),
            "max_session_time" => match number(value) {
                Some(ms) => m.set("max_session_secs", Toml::Int(ms.div_ceil(1000).max(60)), &format!("{origin} (ms)")),
                None => m.skip(&origin, "not a number of milliseconds; ignored"),
            },
            "max_auth_time" => match number(value) {
                Some(ms) => {
                    m.set("challenge_timeout_secs", Toml::Int(ms.div_ceil(1000).max(1)), &format!("{origin} (ms)"))
                }
                None => m.skip(&origin, "not a number of milliseconds; ignored"),
            },
            // Handle.Net keeps its log beside any storage; handled on SQL keeps
            // none unless asked, and pruning a log that is not kept only warns.
            "txnlog_num_days_to_keep" if on_sql => m.skip(
                &origin,
                "handled on SQL keeps a transaction log only with `[sql] replication_log = true` \
                 (for mirrors and replication; off here): set it, then this key, to keep one",
            ),
            "txnlog_num_days_to_keep" => match number(value) {
                Some(days) => m.set(key, Toml::Int(days), &origin),
                None => m.skip(&origin, "not a number of days; ignored"),
            },
            "replication_interval" | "replication_timeout" => match number(value) {
                Some(ms) => m.set(&format!("{key}_ms"), Toml::Int(ms), &origin),
                None => m.skip(&origin, "not a number of milliseconds; ignored"),
            },
            "replication_authentication" => m.set(key, Toml::Str(text.to_string()), &origin),
            "replication_site_handle_value" => m.set("replication_source", Toml::Str(text.to_string()), &origin),
            // Multi-primary (docs/multi-primary.md): the same keys.
            "replication_sites_handle" => m.set(key, Toml::Str(text.to_string()), &origin),
            "do_replication" => m.set(key, Toml::Bool(yes(text)), &origin),
            // Proxied mirroring and the other primaries' queues kept for it: the same keys.
            "replication_pull_other_transactions" | "replication_keep_other_transactions" => {
                m.set(key, Toml::Bool(yes(text)), &origin)
            }
            "http_config" => match value {
                Value::Dict(d) => map_http_config(m, d),
                _ => m.skip(&origin, "not a { } dictionary; ignored"),
            },
            "this_server_id" if text.trim() == "1" => {}
            // The store: sql.rs, which sees both keys together.
            "storage_type" | "sql_settings" => {}
            other => {
                let why = skip_reason(other);
                m.skip(&origin, &why);
            }
        }
    }
}

/// A list of prefixes as Handle.Net writes them (`0.NA/1234` or `1234`), as handled's (`1234`).
fn prefix_names(value: &Value) -> Vec<String> {
    strings(value)
        .unwrap_or_default()
        .iter()
        .map(|p| p.strip_prefix("0.NA/").or_else(|| p.strip_prefix("0.na/")).unwrap_or(p).to_string())
        .collect()
}

fn skip_reason(key: &str) -> String {
    let why = match key {
        "this_server_id" => {
            "handled publishes one server, id 1, in its site record (a multi-server site: see docs/migrating.md)"
        }
        "allow_na_admins" => {
            "no such switch in handled: who administers what comes from HS_ADMIN values and `server_admins`"
        }
        "storage_class" | "db_directory" => {
            "handled keeps handles in its own store (`store`); the handles come over by replication (docs/migrating.md)"
        }
        k if k.starts_with("bdbje_") || k.starts_with("jdb_") => {
            "a setting of Handle.Net's storage; handled has its own store"
        }
        "replication_copy_transactions" => {
            "handled does not log pulled changes again (Handle.Net's default); proxied mirrors pull the kept queues instead"
        }
        "replication_start_time" => {
            "handled pulls every `replication_interval_ms` from its start (no wall-clock phase)"
        }
        "read_only_txn_queue" | "file_write_no_sync" => "handled always syncs its write-ahead log before acknowledging",
        "preferred_global" => "handled's resolver starts at the root sites of `root_info` ([resolver] root_info)",
        "trace_resolution" => {
            "handled's resolver has no trace switch; /metrics counts its hits, misses and upstream latency"
        }
        _ => "no equivalent in handled",
    };
    why.to_string()
}

fn map_http_config(m: &mut Mapped, d: &Dict) {
    for (key, value) in &d.0 {
        let origin = format!("server_config.http_config.{key}");
        match key.as_str() {
            "enable_proxy" => m.set("enable_proxy", Toml::Bool(yes(value.as_str().unwrap_or_default())), &origin),
            "remote_address_header" | "remote_address_internal_proxies" => {
                m.skip(&origin, "handled logs the connecting address (see LOAD_BALANCER_IP in README)")
            }
            _ => m.skip(&origin, "no equivalent in handled's HTTP interface"),
        }
    }
}

/// This server's entry in the site record: description, public address, other servers.
pub fn map_site(m: &mut Mapped, site: &SiteInfo, this_server_id: i32, listen: Option<&str>) {
    if let Some(desc) = site.attributes.iter().find(|a| a.name == b"desc") {
        m.set("description", Toml::Str(String::from_utf8_lossy(&desc.value).into_owned()), "siteinfo.json desc");
    }
    let server = site.servers.iter().find(|s| s.server_id == this_server_id).or(site.servers.first());
    if let Some(server) = server {
        let address = server.ip_addr().to_string();
        if Some(address.as_str()) != listen {
            m.set("public_address", Toml::Str(address), "siteinfo.json: this server's address");
        }
    }
    if site.servers.len() > 1 {
        m.skip(
            "siteinfo.json servers",
            &format!(
                "{} servers in the site; handled publishes one (this one): split the handles per server first",
                site.servers.len()
            ),
        );
    }
    if site.multi_primary {
        m.set("multi_primary", Toml::Bool(true), "siteinfo.json multiPrimary");
    }
    m.skip(
        "siteinfo.json serialNumber",
        &format!("{}: handled numbers its own site record from 1 and raises it on every change", site.serial),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use handled_proto::streamtable::parse;

    fn known() -> BTreeSet<String> {
        [
            "listen",
            "port",
            "http_port",
            "access_log",
            "server_admins",
            "prefixes",
            "max_session_secs",
            "case_sensitive",
            "templates",
            "replication_prefixes",
        ]
        .map(String::from)
        .into()
    }

    #[test]
    fn maps_interfaces_and_server_config_and_says_why_for_the_rest() {
        let dct = parse(
            r#"{ "interfaces" = ( "hdl_udp" "hdl_tcp" ) "hdl_tcp_config" = { "bind_address" = "10.0.0.1" "bind_port" = "2641" "num_threads" = "15" }
                 "hdl_udp_config" = { "bind_address" = "10.0.0.1" "bind_port" = "2642" "log_accesses" = "yes" }
                 "server_config" = { "server_admins" = ( "300:0.NA/1234" ) "auto_homed_prefixes" = ( "0.NA/1234" "0.NA/5678" )
                   "max_session_time" = "86400000" "replication_admins" = ( "300:0.NA/1234" ) "storage_type" = "sql" "this_server_id" = "2"
                   "template_delimiter" = "@" "replication_accept_prefixes" = ( "0.NA/20.5000" "1234" ) "namespace" = "<namespace><template delimiter=\"/\"/></namespace>" }
                 "log_save_config" = { } "auto_update_root_info" = "no" }"#,
        )
        .unwrap();
        let mut m = Mapped::new(known());
        map_top(&mut m, &dct);
        let toml = m.toml().unwrap();
        for line in [
            "listen = \"10.0.0.1\"",
            "port = 2641",
            "access_log = \"full\"",
            "server_admins = [\"300:0.NA/1234\"]",
            "prefixes = [\"1234\", \"5678\"]",
            "replication_prefixes = [\"20.5000\", \"1234\"]",
            "max_session_secs = 86400",
            "templates.delimiter = \"@\"",
            "templates.namespace = '<namespace><template delimiter=\"/\"/></namespace>'",
            "# replication_admins = [\"300:0.NA/1234\"]",
        ] {
            assert!(toml.lines().any(|l| l.starts_with(line)), "{line} missing in\n{toml}");
        }
        let skipped = m.skipped.join("\n");
        for needle in [
            "hdl_udp_config.bind_port: 2642",
            "hdl_tcp_config.num_threads",
            "interfaces: hdl_http is not listed",
            "server_config.this_server_id",
            "log_save_config",
            "auto_update_root_info",
            "server_config.replication_admins: written as a comment",
        ] {
            assert!(skipped.contains(needle), "{needle} missing in\n{skipped}");
        }
    }
}
