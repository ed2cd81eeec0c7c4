//! `clockflake-server healthcheck [URL]`: one HTTP/1.1 GET over loopback, for a container's
//! HEALTHCHECK in an image with no shell and no curl. Plain `http://HOST:PORT/PATH` only.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(2);

/// The URL probed when none is given: `/healthz` on `CLOCKFLAKE_LISTEN` (an unspecified
/// address such as 0.0.0.0 becomes loopback), else on 127.0.0.1:8080.
fn default_url() -> String {
    let listen = std::env::var("CLOCKFLAKE_LISTEN").unwrap_or_else(|_| "127.0.0.1:8080".into());
    match listen.parse::<SocketAddr>() {
        Ok(mut address) => {
            if address.ip().is_unspecified() {
                address.set_ip(if address.is_ipv4() {
                    std::net::Ipv4Addr::LOCALHOST.into()
                } else {
                    std::net::Ipv6Addr::LOCALHOST.into()
                });
            }
            format!("http://{address}/healthz")
        }
        Err(_) => format!("http://{listen}/healthz"),
    }
}

/// `Ok` when `url` answers 200.
pub fn check(url: Option<&str>) -> Result<(), String> {
    let url = url.map_or_else(default_url, str::to_owned);
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("expected an http:// URL, found {url:?}"))?;
    let (authority, path) = match rest.find('/') {
        Some(at) => rest.split_at(at),
        None => (rest, "/"),
    };
    let address = authority
        .to_socket_addrs()
        .map_err(|error| format!("{authority}: {error}"))?
        .next()
        .ok_or_else(|| format!("{authority}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&address, TIMEOUT)
        .map_err(|error| format!("{address}: {error}"))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|error| format!("{address}: {error}"))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|error| format!("{address}: {error}"))?;
    let mut head = [0u8; 64];
    let read = stream
        .read(&mut head)
        .map_err(|error| format!("{address}: {error}"))?;
    let status_line = String::from_utf8_lossy(&head[..read]);
    let status = status_line.split_whitespace().nth(1).unwrap_or("");
    if status == "200" {
        Ok(())
    } else {
        Err(format!("{url}: status {status:?}"))
    }
}
