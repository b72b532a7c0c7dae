//! `handled resolve HANDLE`: print a handle's values, or the error code.

use crate::handle_syntax::{check_handle, prefix_of};
use anyhow::Context;
use clap::Args;
use handled_client::certify::{site_key, verify_signature};
use handled_client::{resolved_values, Connection, Protocol, ResolveOptions};
use handled_proto::header::ResponseCode;
use handled_proto::json::value_to_json;
use std::net::{SocketAddr, ToSocketAddrs};
use std::process::ExitCode;
use std::time::Duration;

#[derive(Args)]
pub struct ResolveArgs {
    /// The handle, e.g. TEST/1.
    handle: String,
    /// Server host.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port: native port for --udp/--tcp (default 2641), HTTP port for --http (default 8000).
    #[arg(long)]
    port: Option<u16>,
    /// Over UDP (the default).
    #[arg(long, conflicts_with_all = ["tcp", "http"])]
    udp: bool,
    /// Over TCP.
    #[arg(long, conflicts_with = "http")]
    tcp: bool,
    /// Over the HTTP tunnel (POST of the native message to the HTTP port).
    #[arg(long)]
    http: bool,
    /// Only values with these indexes (repeatable).
    #[arg(long = "index")]
    indexes: Vec<i32>,
    /// Only values of these types (repeatable; `URL.` matches the family).
    #[arg(long = "type")]
    types: Vec<String>,
    /// Ask the server to sign the response and check the signature with the
    /// key in the server's site record (exit 1 when it does not verify).
    #[arg(long)]
    certify: bool,
    /// Seconds to wait for an answer.
    #[arg(long, default_value_t = 5.0)]
    timeout: f64,
}

pub async fn run(args: ResolveArgs) -> anyhow::Result<ExitCode> {
    check_handle(&args.handle, false)?;
    let protocol = if args.tcp {
        Protocol::Tcp
    } else if args.http {
        Protocol::Http
    } else {
        Protocol::Udp
    };
    let default_port = if protocol == Protocol::Http { 8000 } else { 2641 };
    let addr: SocketAddr = (args.host.as_str(), args.port.unwrap_or(default_port))
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve host {}", args.host))?
        .next()
        .context("host has no address")?;
    let timeout = Duration::from_secs_f64(args.timeout.max(0.001));
    let mut conn =
        Connection::open(protocol, addr, timeout, false).await.with_context(|| format!("cannot connect to {addr}"))?;
    let options = ResolveOptions {
        indexes: args.indexes,
        types: args.types.into_iter().map(String::into_bytes).collect(),
        certify: args.certify,
        ..ResolveOptions::default()
    };
    // The site record first, over the same connection: its key checks the signature.
    let site_key = match args.certify {
        true => Some(site_key(&conn.site_info().await?).context("the server's site record carries no public key")?),
        false => None,
    };
    let response = conn.resolve(args.handle.as_bytes(), &options).await?;
    let signature = match &site_key {
        Some(key) => match verify_signature(&response, key) {
            Ok(algorithm) => {
                eprintln!("signature verified with the site key of {addr} ({algorithm})");
                Some(serde_json::json!({ "algorithm": algorithm, "verified": true }))
            }
            Err(e) => anyhow::bail!("certified response from {addr} rejected: {e}"),
        },
        None => None,
    };
    match resolved_values(&response) {
        Some(values) => {
            let json: Vec<_> = values.iter().map(value_to_json).collect();
            let mut out = serde_json::json!({ "handle": args.handle, "values": json });
            if let Some(signature) = signature {
                out["signature"] = signature;
            }
            println!("{}", serde_json::to_string_pretty(&out)?);
            Ok(ExitCode::SUCCESS)
        }
        None => {
            let code = response.code();
            let hint = if code == ResponseCode::SERVER_NOT_RESP {
                format!(" (prefix {} is not homed on {addr})", prefix_of(&args.handle))
            } else {
                String::new()
            };
            eprintln!(
                "{}: {} ({}){}{hint}",
                args.handle,
                code.name(),
                code.0,
                response.message().map(|m| format!(": {m}")).unwrap_or_default()
            );
            Ok(ExitCode::from(if code == ResponseCode::HANDLE_NOT_FOUND { 2 } else { 3 }))
        }
    }
}
