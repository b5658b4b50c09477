//! Upgrades through the proxy (issue 15): h2c is never relayed, websocket
//! works end to end through its route's chain, and a refused upgrade
//! leaves the connection in HTTP, where the next request meets its guard.

use crate::support;

use support::{
    assert_tunnel_echoes,
    lenient::{admin_text, guarded, Lenient, ADMIN_ROUTES},
    read_head,
};
use tokio::{io::AsyncWriteExt, net::TcpStream};

/// An upgrade request's head, with `extra` fields.
fn upgrade_request(path: &str, offer: &str, extra: &str) -> String {
    format!(
        "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: Upgrade{extra}\r\nUpgrade: {offer}\r\n\r\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2c_upgrades_are_never_relayed() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let mut conn = proxy.conn().await;
    let h2c = "GET / HTTP/1.1\r\nHost: t\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n";
    conn.send(h2c).await;
    let response = conn.read_response(false).await;
    assert_eq!(
        response.status, 200,
        "the upgrade is dropped, the request served"
    );
    let received = upstream.last();
    assert_eq!((received.upgrade, received.http2_settings), (None, false));
    // Still HTTP, still routed: the next request meets the guard.
    assert_eq!(conn.get("/admin").await.status, 403);
    // Among other offers, h2c alone is taken out.
    conn.send(upgrade_request(
        "/",
        "h2c, websocket",
        "\r\nSec-WebSocket-Version: 12",
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 426);
    assert_eq!(upstream.last().upgrade.as_deref(), Some("websocket"));
    assert_eq!(conn.get("/admin").await.status, 403);
    let metrics = admin_text(&proxy, "/metrics").await;
    assert!(
        metrics.contains("sluice_upgrades_removed_total 2\n"),
        "{metrics}"
    );
    upstream.assert_admin_never_reached();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_tunnels_end_to_end_and_the_chain_sees_the_upgrade() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let mut conn = proxy.conn().await;
    conn.send(upgrade_request(
        "/admin/ws",
        "websocket",
        "\r\nSec-WebSocket-Version: 13",
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 403);

    let mut stream = TcpStream::connect(proxy.addr()).await.unwrap();
    let request = upgrade_request("/ws", "websocket", "\r\nSec-WebSocket-Version: 13");
    stream.write_all(request.as_bytes()).await.unwrap();
    let head = read_head(&mut stream).await;
    assert!(head.starts_with("HTTP/1.1 101"), "{head}");
    assert_tunnel_echoes(&mut stream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_upgrade_leaves_the_connection_routed() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    // The upstream refuses the upgrade (426): the connection stays HTTP.
    let mut conn = proxy.conn().await;
    conn.send(upgrade_request(
        "/ws",
        "websocket",
        "\r\nSec-WebSocket-Version: 8",
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 426);
    assert_eq!(conn.get("/admin").await.status, 403);
    // The route lists no upgrades: the offer is taken out, the request served plain.
    conn.send(upgrade_request(
        "/nows",
        "websocket",
        "\r\nSec-WebSocket-Version: 13",
    ))
    .await;
    assert_eq!(conn.read_response(false).await.status, 200);
    assert_eq!(upstream.last().upgrade, None);
    assert_eq!(conn.get("/admin").await.status, 403);
    // A 101 to a request that offered nothing is not a tunnel: 502, and HTTP goes on.
    assert_eq!(conn.get("/sneaky-101").await.status, 502);
    assert_eq!(conn.get("/admin").await.status, 403);
    // Pipelined behind a refused upgrade, a guarded request is still routed.
    let pipelined = format!(
        "{}GET /admin HTTP/1.1\r\nHost: t\r\n\r\n",
        upgrade_request("/ws", "websocket", "\r\nSec-WebSocket-Version: 8")
    );
    conn.send(pipelined).await;
    assert_eq!(conn.read_response(false).await.status, 426);
    assert_eq!(conn.read_response(false).await.status, 403);
    upstream.assert_admin_never_reached();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_asterisk_is_answered_by_the_proxy() {
    let upstream = Lenient::start().await;
    let proxy = guarded(upstream.addr, ADMIN_ROUTES);
    let mut conn = proxy.conn().await;
    assert_eq!(conn.request("OPTIONS", "*", &[], b"").await.status, 204);
    assert_eq!(conn.get("/admin").await.status, 403);
    assert_eq!(upstream.count(), 0);
}
