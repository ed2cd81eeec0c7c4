//! Address discovery: this host's address as ZooKeeper sees it (the default identity).

use std::net::{ToSocketAddrs, UdpSocket};

/// The address of this host as ZooKeeper sees it: the local address of a (never sent) UDP
/// socket connected to the first server.
pub(super) fn local_ip(hosts: &str) -> String {
    let first = hosts.split(',').next().unwrap_or("127.0.0.1:2181");
    let guess = || -> Option<String> {
        let server = first.to_socket_addrs().ok()?.next()?;
        let bind = if server.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        };
        let socket = UdpSocket::bind(bind).ok()?;
        socket.connect(server).ok()?;
        let ip = socket.local_addr().ok()?.ip();
        Some(if ip.is_ipv6() {
            format!("[{ip}]")
        } else {
            ip.to_string()
        })
    };
    guess().unwrap_or_else(|| "127.0.0.1".to_owned())
}
