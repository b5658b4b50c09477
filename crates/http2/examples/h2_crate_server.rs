//! The `h2` crate's server doing what examples/h2c_server.rs does with
//! sluice's codec (every request answered `200` with 1 KiB of `x` once its
//! body has ended), so that bench/h2-codec-callgrind.sh compares the two
//! codecs on the same work.
//!
//!     cargo run --release -p http2 --example h2_crate_server -- 127.0.0.1:8081

use bytes::Bytes;
use http::Response;
use tokio::net::TcpListener;

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8081".into());
    let listener = TcpListener::bind(&address).await?;
    loop {
        let (tcp, _) = listener.accept().await?;
        tokio::spawn(async move {
            let Ok(mut conn) = h2::server::handshake(tcp).await else {
                return;
            };
            while let Some(Ok((request, mut respond))) = conn.accept().await {
                tokio::spawn(async move {
                    let mut body = request.into_body();
                    while let Some(Ok(data)) = body.data().await {
                        let _ = body.flow_control().release_capacity(data.len());
                    }
                    let response = Response::builder()
                        .header("content-type", "text/plain")
                        .body(())
                        .unwrap_or_default();
                    if let Ok(mut send) = respond.send_response(response, false) {
                        let _ = send.send_data(Bytes::from_static(&[b'x'; 1024]), true);
                    }
                });
            }
        });
    }
}
