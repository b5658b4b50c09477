//! sluice's HTTP/2 codec against the `h2` crate, both ways, over real
//! loopback sockets: the `h2` client against our server core, and our
//! client core against the `h2` server. Bodies large enough to need many
//! window updates, trailers both ways, interim answers, many streams at
//! once, and a server that lowers its window mid-stream.

use std::{collections::HashMap, time::Instant};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Request, Response, StatusCode};
use http2::{Config, Connection, Event, Role};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

/// Our server core over `stream`: each request is answered, once its body
/// has ended, with `200`, a body of `len(request body)` copies of `y`,
/// and a trailer `x-got: <bytes received>`.
async fn our_server(mut stream: TcpStream) {
    let mut conn = Connection::new(Role::Server, Config::default());
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut got: HashMap<u32, usize> = HashMap::new();
    let mut pending: HashMap<u32, (Bytes, String)> = HashMap::new();
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
        if conn.recv(&mut input, Instant::now()).is_err() {
            let _ = stream.write_all(conn.output()).await;
            return;
        }
        while let Some(event) = conn.poll_event() {
            let ended = match event {
                Event::Request {
                    stream: id,
                    end_stream,
                    ..
                } => {
                    got.insert(id, 0);
                    end_stream.then_some(id)
                }
                Event::Data {
                    stream: id,
                    data,
                    end_stream,
                } => {
                    conn.release(id, data.len() as u32);
                    *got.entry(id).or_default() += data.len();
                    end_stream.then_some(id)
                }
                Event::Trailers { stream: id, .. } => Some(id),
                Event::Writable { .. } => {
                    let ids: Vec<u32> = pending.keys().copied().collect();
                    for id in ids {
                        send_rest(&mut conn, &mut pending, id);
                    }
                    None
                }
                _ => None,
            };
            if let Some(id) = ended {
                let n = got.remove(&id).unwrap_or(0);
                conn.send_response(id, 200, [(&b"content-type"[..], &b"text/plain"[..])], false);
                pending.insert(id, (Bytes::from(vec![b'y'; n]), n.to_string()));
                send_rest(&mut conn, &mut pending, id);
            }
        }
    }
}

fn send_rest(conn: &mut Connection, pending: &mut HashMap<u32, (Bytes, String)>, id: u32) {
    let Some((body, count)) = pending.get_mut(&id) else {
        return;
    };
    conn.send_data(id, body, false);
    if body.is_empty() {
        let count = std::mem::take(count);
        conn.send_trailers(id, [(&b"x-got"[..], count.as_bytes())]);
        pending.remove(&id);
    }
}

#[tokio::test]
async fn the_h2_client_against_our_server() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(our_server(stream));
        }
    });
    let tcp = TcpStream::connect(addr).await.unwrap();
    let (client, conn) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    // 64 streams at once, each with a 200 KB body: more than the 256 KiB
    // stream window and the 1 MiB connection window together.
    let mut tasks = Vec::new();
    for i in 0..64usize {
        let mut client = client.clone().ready().await.unwrap();
        tasks.push(tokio::spawn(async move {
            let request = Request::post(format!("http://test/upload/{i}"))
                .body(())
                .unwrap();
            let (response, mut send) = client.send_request(request, false).unwrap();
            let body = vec![b'x'; 200_000 + i];
            let mut rest = Bytes::from(body);
            while !rest.is_empty() {
                send.reserve_capacity(rest.len());
                let granted = std::future::poll_fn(|cx| send.poll_capacity(cx))
                    .await
                    .unwrap()
                    .unwrap();
                send.send_data(rest.split_to(granted.min(rest.len())), false)
                    .unwrap();
            }
            let mut trailers = HeaderMap::new();
            trailers.insert("x-sent", (200_000 + i).into());
            send.send_trailers(trailers).unwrap();
            let response = response.await.unwrap();
            assert_eq!(response.status(), StatusCode::OK);
            let mut body = response.into_body();
            let mut len = 0;
            while let Some(data) = body.data().await {
                let data = data.unwrap();
                len += data.len();
                let _ = body.flow_control().release_capacity(data.len());
            }
            let trailers = body.trailers().await.unwrap().unwrap();
            assert_eq!(len, 200_000 + i);
            assert_eq!(trailers["x-got"], (200_000 + i).to_string().as_str());
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
}

/// Our client core over `stream`: sends `count` POSTs with `body` bytes
/// each and trailers, reads every answer whole; the answers' statuses,
/// interim statuses seen, body lengths and `x-got` trailers.
async fn our_client(
    mut stream: TcpStream,
    count: usize,
    body: usize,
) -> Vec<(u16, Vec<u16>, usize, String)> {
    let mut conn = Connection::new(Role::Client, Config::default());
    let mut input = BytesMut::with_capacity(16 * 1024);
    let mut bodies: HashMap<u32, Bytes> = HashMap::new();
    let mut results: HashMap<u32, (u16, Vec<u16>, usize, String)> = HashMap::new();
    let mut done = 0;
    let mut opened = 0;
    loop {
        while opened < count {
            let pseudo = [
                (&b":method"[..], Some(&b"POST"[..])),
                (b":scheme", Some(b"http")),
                (b":authority", Some(b"test")),
                (b":path", Some(b"/echo")),
            ];
            let Ok(id) = conn.send_request(pseudo, [], false) else {
                break;
            };
            opened += 1;
            bodies.insert(id, Bytes::from(vec![b'z'; body]));
            results.insert(id, (0, Vec::new(), 0, String::new()));
        }
        let ids: Vec<u32> = bodies.keys().copied().collect();
        for id in ids {
            let rest = bodies.get_mut(&id).unwrap();
            conn.send_data(id, rest, false);
            if rest.is_empty() {
                bodies.remove(&id);
                conn.send_trailers(id, [(&b"x-sent"[..], &b"yes"[..])]);
            }
        }
        if !conn.output().is_empty() {
            stream.write_all(conn.output()).await.unwrap();
            conn.output().clear();
        }
        if done == count {
            return results.into_values().collect();
        }
        let read = stream.read_buf(&mut input).await.unwrap();
        assert!(
            read > 0,
            "the server closed with {done} of {count} answered"
        );
        conn.recv(&mut input, Instant::now()).unwrap();
        while let Some(event) = conn.poll_event() {
            match event {
                Event::Response {
                    stream: id,
                    status,
                    end_stream,
                    ..
                } => {
                    let entry = results.get_mut(&id).unwrap();
                    match status < 200 {
                        true => entry.1.push(status),
                        false => entry.0 = status,
                    }
                    done += usize::from(end_stream);
                }
                Event::Data {
                    stream: id,
                    data,
                    end_stream,
                } => {
                    conn.release(id, data.len() as u32);
                    results.get_mut(&id).unwrap().2 += data.len();
                    done += usize::from(end_stream);
                }
                Event::Trailers { stream: id, fields } => {
                    let got = fields.get(b"x-got").unwrap_or_default();
                    results.get_mut(&id).unwrap().3 = String::from_utf8_lossy(got).into_owned();
                    done += 1;
                }
                Event::Reset { stream, reason } => panic!("stream {stream} reset: {reason}"),
                _ => {}
            }
        }
    }
}

/// The `h2` server: for each request, a `103`, then (once the body has
/// ended) `200` with as many bytes as it received and `x-got` trailers.
/// `window`: its stream window, lowered to 1 KiB after the first request
/// by a new SETTINGS when `shrink`.
async fn h2_server(listener: TcpListener, window: u32) {
    while let Ok((tcp, _)) = listener.accept().await {
        tokio::spawn(async move {
            let mut conn = h2::server::Builder::new()
                .initial_window_size(window)
                .handshake::<_, Bytes>(tcp)
                .await
                .unwrap();
            while let Some(Ok((request, mut respond))) = conn.accept().await {
                tokio::spawn(async move {
                    let interim = Response::builder()
                        .status(103)
                        .header("link", "</a.css>")
                        .body(())
                        .unwrap();
                    respond.send_informational(interim).unwrap();
                    let mut body = request.into_body();
                    let mut got = 0;
                    while let Some(data) = body.data().await {
                        let data = data.unwrap();
                        got += data.len();
                        let _ = body.flow_control().release_capacity(data.len());
                    }
                    let trailers = body.trailers().await.unwrap();
                    assert!(trailers.is_some_and(|t| t["x-sent"] == "yes"));
                    let mut send = respond.send_response(Response::new(()), false).unwrap();
                    send.send_data(Bytes::from(vec![b'w'; got]), false).unwrap();
                    let mut trailers = HeaderMap::new();
                    trailers.insert("x-got", got.into());
                    send.send_trailers(trailers).unwrap();
                });
            }
        });
    }
}

#[tokio::test]
async fn our_client_against_the_h2_server() {
    for window in [65_535, 1_024] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(h2_server(listener, window));
        let tcp = TcpStream::connect(addr).await.unwrap();
        let results = our_client(tcp, 40, 100_000).await;
        assert_eq!(results.len(), 40);
        for (status, interim, len, got) in results {
            assert_eq!(status, 200, "window {window}");
            assert_eq!(interim, [103]);
            assert_eq!(len, 100_000);
            assert_eq!(got, "100000");
        }
    }
}
