//! A target described by options (the CLI's and the scenarios'), built into a
//! [`Target`] with addresses resolved and TLS configured.

use crate::http::{HttpTarget, Tls};
use crate::target::{parse_url_template, resolve_addrs, Target};
use handled_client::Protocol;
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
}

#[derive(Debug, Clone)]
pub struct TargetSpec {
    pub transport: Transport,
    pub host: String,
    /// Default 2641 (native) or 8000 (HTTP).
    pub port: Option<u16>,
    /// Further `host:port`s a client moves to when its server fails.
    pub failover: Vec<String>,
    /// GET this URL template instead (`{handle}`, `{handle_enc}`, `{n}`).
    pub url: Option<String>,
    pub keep_alive: bool,
    /// Accept any TLS certificate.
    pub insecure: bool,
    pub cacert: Option<PathBuf>,
    pub server_name: Option<String>,
}

impl TargetSpec {
    pub fn new(transport: Transport, host: &str, port: Option<u16>) -> TargetSpec {
        TargetSpec {
            transport,
            host: host.into(),
            port,
            failover: Vec::new(),
            url: None,
            keep_alive: true,
            insecure: false,
            cacert: None,
            server_name: None,
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
            let (h, p) = f
                .rsplit_once(':')
                .ok_or(format!("--failover {f}: expected host:port"))?;
            let p: u16 = p.parse().map_err(|_| format!("--failover {f}: bad port"))?;
            addrs.push(resolve_addrs(h.trim_start_matches('[').trim_end_matches(']'), p)?[0]);
        }
        Ok(addrs)
    }

    fn http(&self, tls: bool, host: &str, port: u16) -> Result<HttpTarget, String> {
        let tls = if tls {
            let config = crate::tls::client_config(self.insecure, self.cacert.as_deref())?;
            let name = self.server_name.clone().unwrap_or_else(|| host.to_string());
            let server_name = ServerName::try_from(name.clone())
                .map_err(|e| format!("server name {name}: {e}"))?;
            Some(Tls {
                config,
                server_name,
            })
        } else {
            None
        };
        let default_port = if tls.is_some() { 443 } else { 80 };
        let bracketed = if host.contains(':') {
            format!("[{host}]")
        } else {
            host.to_string()
        };
        let authority = if port == default_port {
            bracketed
        } else {
            format!("{bracketed}:{port}")
        };
        Ok(HttpTarget {
            addrs: self.addrs(host, port)?,
            authority,
            tls,
            keep_alive: self.keep_alive,
        })
    }

    pub fn build(&self) -> Result<Target, String> {
        if let Some(url) = &self.url {
            let (tls, host, port, template) = parse_url_template(url)?;
            return Ok(Target::Get {
                http: self.http(tls, &host, port)?,
                template,
            });
        }
        let native = |protocol, persistent| -> Result<Target, String> {
            Ok(Target::Native {
                protocol,
                persistent,
                addrs: self.addrs(&self.host, self.port.unwrap_or(2641))?,
            })
        };
        match self.transport {
            Transport::Udp => native(Protocol::Udp, false),
            Transport::Tcp => native(Protocol::Tcp, false),
            Transport::TcpPersistent => native(Protocol::Tcp, true),
            Transport::Http => Ok(Target::Tunnel(self.http(
                false,
                &self.host,
                self.port.unwrap_or(8000),
            )?)),
            Transport::Https => Ok(Target::Tunnel(self.http(
                true,
                &self.host,
                self.port.unwrap_or(8000),
            )?)),
        }
    }
}
