//! Where the client subcommands find the server, and how they say they could
//! not: one flag scheme (`--host`, `--port` for the native port, `--http-port`
//! for the HTTP port, each also from the environment as `serve` reads it) and
//! one shape for a server out of reach (what failed, where, what to try).

use anyhow::Context;
use clap::Args;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};

/// The server's native port by default (UDP and TCP).
pub const NATIVE_PORT: u16 = 2641;
/// The server's HTTP port by default.
pub const HTTP_PORT: u16 = 8000;

/// `--host`, `--port`, `--http-port` of the subcommands that talk to the native port.
#[derive(Args, Clone, Debug)]
pub struct Server {
    /// Server host.
    #[arg(long, env = "HANDLED_HOST", default_value = "127.0.0.1")]
    pub host: String,
    /// The server's native port, UDP and TCP (default 2641).
    #[arg(long, env = "HANDLED_PORT")]
    pub port: Option<u16>,
    /// The server's HTTP port, used with --http (default 8000).
    #[arg(long, env = "HANDLED_HTTP_PORT")]
    pub http_port: Option<u16>,
}

/// How a subcommand reaches the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Via {
    Udp,
    Tcp,
    Http,
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Via::Udp => "UDP, native port",
            Via::Tcp => "TCP, native port",
            Via::Http => "HTTP port",
        })
    }
}

impl Server {
    /// The address for `via`. Before the scheme was one, `--port` named the
    /// HTTP port together with `--http`; it still does when `--http-port` is absent.
    pub fn addr(&self, via: Via) -> anyhow::Result<SocketAddr> {
        let port = match via {
            Via::Http => self.http_port.or(self.port).unwrap_or(HTTP_PORT),
            Via::Udp | Via::Tcp => self.port.unwrap_or(NATIVE_PORT),
        };
        resolve_host(&self.host, port)
    }
}

/// `host:port` as a socket address, or an error naming the host.
pub fn resolve_host(host: &str, port: u16) -> anyhow::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve host {host} (--host, HANDLED_HOST)"))?
        .next()
        .with_context(|| format!("host {host} has no address (--host, HANDLED_HOST)"))
}

/// The one error for a server out of reach: `cause` as plain words, where, and
/// what to try.
pub fn unreachable(addr: SocketAddr, via: Via, cause: &str) -> anyhow::Error {
    let port = addr.port();
    let (flags, which) = match via {
        Via::Http => ("--http-port (HANDLED_HTTP_PORT)", "HTTP"),
        Via::Udp | Via::Tcp => ("--port (HANDLED_PORT)", "native"),
    };
    let what = match plain(cause) {
        Plain::NotHttp => {
            return anyhow::anyhow!(
                "{addr} ({via}) does not answer in HTTP: {port} looks like the server's native port; \
                 give its HTTP port with --http-port (HANDLED_HTTP_PORT; default {HTTP_PORT})"
            )
        }
        Plain::Words(w) => w,
    };
    let udp = if via == Via::Udp && what == "no answer in time" { ", or try --tcp" } else { "" };
    anyhow::anyhow!(
        "cannot reach the server at {addr} ({via}): {what}; is `handled serve` running there with {port} as its \
         {which} port? Point elsewhere with --host (HANDLED_HOST) and {flags}{udp}"
    )
}

enum Plain {
    Words(String),
    /// A native-protocol port answered an HTTP request.
    NotHttp,
}

/// The cause in a few words, whichever library phrased it.
fn plain(cause: &str) -> Plain {
    let lower = cause.to_ascii_lowercase();
    let words = if lower.contains("connectionrefused") || lower.contains("connection refused") {
        "connection refused"
    } else if lower.contains("invalid http version") || lower.contains("malformed http response") {
        return Plain::NotHttp;
    } else if lower.contains("timedout") || lower.contains("timed out") || lower.contains("no answer within") {
        "no answer in time"
    } else if lower.contains("connectionreset") || lower.contains("connection reset") {
        "the connection was reset"
    } else {
        return Plain::Words(cause.trim().to_string());
    };
    Plain::Words(words.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(via: Via, cause: &str) -> String {
        unreachable("127.0.0.1:8000".parse().unwrap(), via, cause).to_string()
    }

    #[test]
    fn one_shape_whichever_library_failed() {
        let expected = "cannot reach the server at 127.0.0.1:8000 (HTTP port): connection refused; is `handled \
                        serve` running there with 8000 as its HTTP port? Point elsewhere with --host \
                        (HANDLED_HOST) and --http-port (HANDLED_HTTP_PORT)";
        for cause in ["Connection refused (os error 111)", "connect io ConnectionRefused"] {
            assert_eq!(text(Via::Http, cause), expected);
        }
        assert!(text(Via::Udp, "no answer within 5s").ends_with("--port (HANDLED_PORT), or try --tcp"));
        assert!(text(Via::Http, "invalid HTTP version parsed").contains("give its HTTP port with --http-port"));
    }

    #[test]
    fn port_follows_the_transport() {
        let s = |port, http_port| Server { host: "127.0.0.1".into(), port, http_port };
        assert_eq!(s(None, None).addr(Via::Udp).unwrap().port(), NATIVE_PORT);
        assert_eq!(s(None, None).addr(Via::Http).unwrap().port(), HTTP_PORT);
        assert_eq!(s(Some(1), Some(2)).addr(Via::Tcp).unwrap().port(), 1);
        assert_eq!(s(Some(1), Some(2)).addr(Via::Http).unwrap().port(), 2);
        assert_eq!(s(Some(1), None).addr(Via::Http).unwrap().port(), 1, "the old --http --port form");
    }
}
