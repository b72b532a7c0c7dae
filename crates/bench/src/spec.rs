//! A target described by options (the CLI's and the scenarios'), built into a
//! [`Target`] with addresses resolved and TLS configured.

use crate::admin::{basic_authorization, AdminTarget, JsonApiTarget};
use crate::http::{HttpTarget, Tls};
use crate::target::{Target, UrlRequest};
use crate::wire::ReplyCheck;
use handled_client::{Credentials, Protocol};
use hyper::Method;
use rustls::pki_types::ServerName;
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Udp,
    /// A new TCP connection per request (what the Java client does).
    Tcp,
    TcpPersistent,
    /// The HTTP tunnel (POST application/x-hdl-message).
    Http,
    /// The tunnel over TLS.
    Https,
    /// The Handle.Net JSON API (`/api/handles`), plain HTTP.
    JsonApi,
    /// The JSON API over TLS.
    JsonApiHttps,
}

#[derive(Debug, Clone)]
pub struct TargetSpec {
    pub transport: Transport,
    pub host: String,
    /// Default 2641 (native) or 8000 (HTTP).
    pub port: Option<u16>,
    /// Further `host:port`s a client moves to when its server fails.
    pub failover: Vec<String>,
    /// Requests to this URL template instead (`{handle}`, `{handle_enc}`, `{n}`).
    pub url: Option<String>,
    /// The URL template's method (default GET).
    pub method: Option<String>,
    /// The URL template's body, placeholders filled as in the URL.
    pub body: Option<String>,
    /// An administrator: sessions over the native protocol, Basic on the JSON API.
    pub credentials: Option<Credentials>,
    pub keep_alive: bool,
    /// Accept any TLS certificate.
    pub insecure: bool,
    pub cacert: Option<PathBuf>,
    pub server_name: Option<String>,
    /// Count replies carrying the request's id without reading them as Handle
    /// responses (echo references, targets that do not speak the protocol).
    pub raw: bool,
}

impl TargetSpec {
    pub fn new(transport: Transport, host: &str, port: Option<u16>) -> TargetSpec {
        TargetSpec {
            transport,
            host: host.into(),
            port,
            failover: Vec::new(),
            url: None,
            method: None,
            body: None,
            credentials: None,
            keep_alive: true,
            insecure: false,
            cacert: None,
            server_name: None,
            raw: false,
        }
    }

    pub fn get(url: &str) -> TargetSpec {
        let mut s = TargetSpec::new(Transport::Http, "", None);
        s.url = Some(url.into());
        s
    }

    fn addrs(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let mut addrs = vec![resolve_addrs(host, port)?[0]];
        for f in &self.failover {
            let (h, p) = f.rsplit_once(':').ok_or(format!("--failover {f}: expected host:port"))?;
            let p: u16 = p.parse().map_err(|_| format!("--failover {f}: bad port"))?;
            addrs.push(resolve_addrs(h.trim_start_matches('[').trim_end_matches(']'), p)?[0]);
        }
        Ok(addrs)
    }

    fn transport_is_json(&self) -> bool {
        matches!(self.transport, Transport::JsonApi | Transport::JsonApiHttps)
    }

    pub fn http(&self, tls: bool, host: &str, port: u16) -> Result<HttpTarget, String> {
        let tls = if tls {
            let config = crate::tls::client_config(self.insecure, self.cacert.as_deref())?;
            let name = self.server_name.clone().unwrap_or_else(|| host.to_string());
            let server_name = ServerName::try_from(name.clone()).map_err(|e| format!("server name {name}: {e}"))?;
            Some(Tls { config, server_name })
        } else {
            None
        };
        let default_port = if tls.is_some() { 443 } else { 80 };
        let bracketed = if host.contains(':') { format!("[{host}]") } else { host.to_string() };
        let authority = if port == default_port { bracketed } else { format!("{bracketed}:{port}") };
        Ok(HttpTarget { addrs: self.addrs(host, port)?, authority, tls, keep_alive: self.keep_alive })
    }

    fn authorization(&self) -> Result<Option<String>, String> {
        self.credentials.as_ref().map(basic_authorization).transpose()
    }

    pub fn build(&self) -> Result<Target, String> {
        if self.raw && (self.url.is_some() || self.credentials.is_some() || self.transport_is_json()) {
            return Err("--raw goes with --transport udp, tcp, tcp-persistent, http or https (no --url, --credentials or JSON API)".into());
        }
        let check = if self.raw { ReplyCheck::Raw } else { ReplyCheck::Protocol };
        if let Some(url) = &self.url {
            let (tls, host, port, template) = parse_url_template(url)?;
            let method = match &self.method {
                Some(m) => Method::from_bytes(m.to_ascii_uppercase().as_bytes())
                    .map_err(|_| format!("--method {m}: not an HTTP method"))?,
                None => Method::GET,
            };
            let request =
                UrlRequest { method, template, body: self.body.clone(), authorization: self.authorization()? };
            return Ok(Target::Url { http: self.http(tls, &host, port)?, request });
        }
        if self.method.is_some() || self.body.is_some() {
            return Err("--method and --body go with --url TEMPLATE".into());
        }
        let native_port = self.port.unwrap_or(2641);
        let http_port = self.port.unwrap_or(8000);
        let native = |protocol, persistent| -> Result<Target, String> {
            let addrs = self.addrs(&self.host, if protocol == Protocol::Http { http_port } else { native_port })?;
            Ok(match &self.credentials {
                Some(credentials) => {
                    Target::Admin(AdminTarget { protocol, persistent, addrs, credentials: credentials.clone() })
                }
                None => Target::Native { protocol, persistent, addrs, check },
            })
        };
        let json_api = |tls| -> Result<Target, String> {
            Ok(Target::JsonApi(JsonApiTarget {
                http: self.http(tls, &self.host, http_port)?,
                authorization: self.authorization()?,
            }))
        };
        match (self.transport, &self.credentials) {
            (Transport::Udp, Some(_)) => Err("administrative requests do not go over UDP: use --transport tcp-persistent, http or json-api".into()),
            (Transport::Https, Some(_)) => {
                Err("an admin session over the HTTPS tunnel is not supported: use --transport http, tcp-persistent or json-api-https".into())
            }
            (Transport::Udp, None) => native(Protocol::Udp, false),
            (Transport::Tcp, _) => native(Protocol::Tcp, false),
            (Transport::TcpPersistent, _) => native(Protocol::Tcp, true),
            // An admin session over the tunnel uses handled-client's own HTTP transport (keep-alive).
            (Transport::Http, Some(_)) => native(Protocol::Http, true),
            (Transport::Http, None) => Ok(Target::Tunnel { http: self.http(false, &self.host, http_port)?, check }),
            (Transport::Https, None) => Ok(Target::Tunnel { http: self.http(true, &self.host, http_port)?, check }),
            (Transport::JsonApi, _) => json_api(false),
            (Transport::JsonApiHttps, _) => json_api(true),
        }
    }
}

/// Resolve `host:port` to every address it has.
pub fn resolve_addrs(host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
    use std::net::ToSocketAddrs;
    let addrs: Vec<SocketAddr> =
        (host, port).to_socket_addrs().map_err(|e| format!("cannot resolve {host}: {e}"))?.collect();
    if addrs.is_empty() {
        return Err(format!("{host} has no address"));
    }
    Ok(addrs)
}

/// A URL template split up: (https?, host, port, path with placeholders).
/// Parsed by hand because `{handle}` is not valid in a URI.
pub fn parse_url_template(url: &str) -> Result<(bool, String, u16, String), String> {
    let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
        (true, r)
    } else if let Some(r) = url.strip_prefix("http://") {
        (false, r)
    } else {
        return Err(format!("{url}: expected http:// or https://"));
    };
    let (authority, path) = rest.find('/').map_or((rest, "/"), |i| (&rest[..i], &rest[i..]));
    let default_port = if tls { 443 } else { 80 };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => (
            h.trim_start_matches('[').trim_end_matches(']').to_string(),
            p.parse().map_err(|_| format!("{url}: bad port {p}"))?,
        ),
        _ => (authority.to_string(), default_port),
    };
    if host.is_empty() {
        return Err(format!("{url}: no host"));
    }
    Ok((tls, host, port, path.to_string()))
}

#[cfg(test)]
mod tests {
    use super::parse_url_template;

    #[test]
    fn url_templates_split() {
        assert_eq!(
            parse_url_template("http://127.0.0.1:8000/api/handles/{handle}").unwrap(),
            (false, "127.0.0.1".into(), 8000, "/api/handles/{handle}".into())
        );
        assert_eq!(parse_url_template("https://example.org").unwrap(), (true, "example.org".into(), 443, "/".into()));
        assert_eq!(parse_url_template("http://[::1]:81/x").unwrap(), (false, "::1".into(), 81, "/x".into()));
        assert!(parse_url_template("ftp://x/").is_err());
    }
}
