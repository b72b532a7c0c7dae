#![allow(dead_code)] // each test binary uses a different part
//! An in-process server for the HTTP-port tests, and a minimal HTTP/1.1
//! reader on raw sockets (to see exactly what the server sends and when it closes).

use handled_server::config::Config;
use std::net::SocketAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub async fn start(tweak: impl FnOnce(&mut Config)) -> SocketAddr {
    handled_testkit::start(tweak).await.addrs.http
}

/// One response: status, lower-cased headers, body. None on EOF before a status line.
pub async fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(u16, Vec<(String, String)>, Vec<u8>)> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut chunk = [0u8; 16384];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines.next()?.split(' ').nth(1)?.parse().ok()?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers.iter().find(|(k, _)| k == "content-length").map(|(_, v)| v.parse().unwrap()).unwrap_or(0);
    while buf.len() < head_end + 4 + len {
        let mut chunk = [0u8; 16384];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = buf[head_end + 4..head_end + 4 + len].to_vec();
    buf.drain(..head_end + 4 + len);
    Some((status, headers, body))
}

pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// True when the peer has closed (EOF) within `within`.
pub async fn closed_within(s: &mut TcpStream, within: std::time::Duration) -> bool {
    let mut b = [0u8; 64];
    matches!(tokio::time::timeout(within, s.read(&mut b)).await, Ok(Ok(0)) | Ok(Err(_)))
}

pub async fn get(s: &mut TcpStream, path: &str) {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n").as_bytes()).await.unwrap();
}
