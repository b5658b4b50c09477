//! A plain h2c server over the connection core, for conformance runs
//! (bench/h2spec.sh runs h2spec against it): every request is answered
//! `200` with 1 KiB of `x` once its body has ended (enough for h2spec's
//! flow-control cases, which need a body larger than the window they set); a head past the header list
//! limit gets `431`. The I/O loop is the simplest one: read, feed the
//! core, act on its events, write its output.
//!
//!     cargo run -p http2 --example h2c_server -- 127.0.0.1:8080

use std::{collections::HashMap, time::Instant};

use bytes::{Bytes, BytesMut};
use http2::{Config, Connection, Event, Role};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let listener = TcpListener::bind(&address).await?;
    eprintln!("h2c on {}", listener.local_addr()?);
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(serve(stream));
    }
}

async fn serve(mut stream: TcpStream) {
    let mut conn = Connection::new(Role::Server, Config::default());
    let mut input = BytesMut::with_capacity(16 * 1024);
    // Answers whose body still waits for window: stream -> the rest.
    let mut pending: HashMap<u32, Bytes> = HashMap::new();
    loop {
        if !conn.output().is_empty() {
            if stream.write_all(conn.output()).await.is_err() {
                return;
            }
            conn.output().clear();
        }
        match stream.read_buf(&mut input).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let failed = conn.recv(&mut input, Instant::now()).is_err();
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Request {
                    stream: id,
                    end_stream: true,
                    ..
                } => answer(&mut conn, &mut pending, id, 200),
                Event::Request { .. } => {}
                Event::HeadTooLarge { stream: id } => answer(&mut conn, &mut pending, id, 431),
                Event::Data {
                    stream: id,
                    data,
                    end_stream,
                } => {
                    conn.release(id, data.len() as u32);
                    if end_stream {
                        answer(&mut conn, &mut pending, id, 200);
                    }
                }
                Event::Trailers { stream: id, .. } => answer(&mut conn, &mut pending, id, 200),
                Event::Reset { stream: id, .. } => {
                    pending.remove(&id);
                    conn.done(id);
                }
                Event::Writable { stream: 0 } => {
                    let ids: Vec<u32> = pending.keys().copied().collect();
                    for id in ids {
                        send_rest(&mut conn, &mut pending, id);
                    }
                }
                Event::Writable { stream: id } => send_rest(&mut conn, &mut pending, id),
                Event::Response { .. } | Event::GoAway { .. } => {}
            }
        }
        if failed {
            let _ = stream.write_all(conn.output()).await;
            return;
        }
    }
}

fn answer(conn: &mut Connection, pending: &mut HashMap<u32, Bytes>, id: u32, status: u16) {
    conn.send_response(
        id,
        status,
        [(&b"content-type"[..], &b"text/plain"[..])],
        false,
    );
    pending.insert(id, Bytes::from_static(&[b'x'; 1024]));
    send_rest(conn, pending, id);
}

fn send_rest(conn: &mut Connection, pending: &mut HashMap<u32, Bytes>, id: u32) {
    if let Some(body) = pending.get_mut(&id) {
        conn.send_data(id, body, true);
        if body.is_empty() {
            pending.remove(&id);
        }
    }
}
