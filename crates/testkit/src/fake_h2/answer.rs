//! What an [`H2Server`](super::H2Server) answers, by path (the list is
//! in the parent module's documentation).

use std::{sync::atomic::Ordering, time::Duration};

use bytes::Bytes;
use h2::{server::SendResponse, Reason, RecvStream};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode};

use super::{Counters, Cuts};

pub(super) async fn answer(
    request: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    counters: &Counters,
) {
    let path = request.uri().path().to_string();
    let mut body = request.into_body();
    if path == "/echo" {
        echo(body, respond, counters).await;
        return;
    }
    let early = [("/early/", false), ("/early-then-read/", true)]
        .into_iter()
        .find_map(|(prefix, read)| Some((path.strip_prefix(prefix)?, read)));
    if let Some((status, read)) = early {
        let status = status.parse().unwrap_or(StatusCode::BAD_REQUEST);
        send(&mut respond, status, Bytes::from_static(b"early"));
        if !read {
            return;
        }
    }
    while let Some(data) = body.data().await {
        let Ok(data) = data else {
            return;
        };
        counters
            .body_bytes
            .fetch_add(data.len() as u64, Ordering::SeqCst);
        let _ = body.flow_control().release_capacity(data.len());
    }
    keep_trailers(&mut body, counters).await;
    if early.is_some() {
        return;
    }
    let cut = [("/cut/", false), ("/cut-with-length/", true)]
        .into_iter()
        .find_map(|(prefix, length)| Some((path.strip_prefix(prefix)?.parse().ok()?, length)));
    if let Some((size, length)) = cut {
        cut_off(respond, size, length, &counters.cuts).await;
        return;
    }
    if let Some(code) = path.strip_prefix("/grpc-status/") {
        let Ok(code) = HeaderValue::from_str(code) else {
            return;
        };
        let response = Response::builder()
            .status(StatusCode::OK)
            .header("content-type", "application/grpc")
            .header("grpc-status", code)
            .body(())
            .expect("a valid response head");
        let _ = respond.send_response(response, true);
        return;
    }
    if path == "/forged-trailers" {
        // `ok`, then trailers that forge fields a proxy controls in heads.
        let response = Response::builder()
            .status(StatusCode::OK)
            .body(())
            .expect("a valid response head");
        let Ok(mut stream) = respond.send_response(response, false) else {
            return;
        };
        let _ = stream.send_data(Bytes::from_static(b"ok"), false);
        let mut trailers = HeaderMap::new();
        for (name, value) in [
            ("grpc-status", "0"),
            ("x-forwarded-for", "6.6.6.6"),
            ("set-cookie", "session=forged"),
            ("x-served-by", "forged"),
        ] {
            trailers.insert(name, HeaderValue::from_static(value));
        }
        let _ = stream.send_trailers(trailers);
        return;
    }
    if let Some(count) = path.strip_prefix("/interim/") {
        // `103 Early Hints` this many times, then the answer.
        for _ in 0..count.parse::<u32>().unwrap_or(0) {
            let hints = Response::builder()
                .status(StatusCode::EARLY_HINTS)
                .header("link", "</style.css>; rel=preload")
                .body(())
                .expect("a valid interim head");
            if respond.send_informational(hints).is_err() {
                return;
            }
        }
        send(&mut respond, StatusCode::OK, Bytes::from_static(b"FIRST"));
        return;
    }
    // Answered unless the client resets the stream first.
    let routed = route(&path);
    let reset = std::future::poll_fn(|cx| respond.poll_reset(cx));
    tokio::select! {
        (status, payload) = routed => send(&mut respond, status, payload),
        _ = reset => {
            counters.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// `/cut/N`: 200 and `size` bytes (of a `content-length` twice that
/// when `length`), then, once a cut is let through, RST_STREAM
/// INTERNAL_ERROR instead of the rest.
async fn cut_off(mut respond: SendResponse<Bytes>, size: usize, length: bool, cuts: &Cuts) {
    let mut head = Response::builder().status(StatusCode::OK);
    if length {
        head = head.header("content-length", 2 * size);
    }
    let head = head.body(()).expect("a valid response head");
    let Ok(mut stream) = respond.send_response(head, false) else {
        return;
    };
    let _ = stream.send_data(Bytes::from(vec![b'x'; size]), false);
    if let Ok(permit) = cuts.0.acquire().await {
        permit.forget();
    }
    stream.send_reset(Reason::INTERNAL_ERROR);
}

/// A whole answer with a Content-Length.
pub(super) fn send(respond: &mut SendResponse<Bytes>, status: StatusCode, payload: Bytes) {
    let response = Response::builder()
        .status(status)
        .header("content-length", payload.len())
        .body(())
        .expect("a valid response head");
    let Ok(mut stream) = respond.send_response(response, false) else {
        return;
    };
    // Buffered by h2 and sent as the client's windows allow.
    let _ = stream.send_data(payload, true);
}

/// Keeps the request's trailers, if it ended with some.
async fn keep_trailers(body: &mut RecvStream, counters: &Counters) {
    if let Ok(Some(trailers)) = body.trailers().await {
        if let Ok(mut kept) = counters.request_trailers.lock() {
            *kept = Some(trailers);
        }
    }
}

/// `/echo`: each DATA frame goes back as it arrives; trailers at the end.
async fn echo(mut body: RecvStream, mut respond: SendResponse<Bytes>, counters: &Counters) {
    let response = Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/grpc")
        .body(())
        .expect("a valid response head");
    let Ok(mut stream) = respond.send_response(response, false) else {
        return;
    };
    while let Some(Ok(data)) = body.data().await {
        let len = data.len();
        counters.body_bytes.fetch_add(len as u64, Ordering::SeqCst);
        if stream.send_data(data, false).is_err() {
            return;
        }
        let _ = body.flow_control().release_capacity(len);
    }
    keep_trailers(&mut body, counters).await;
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let _ = stream.send_trailers(trailers);
}

async fn route(path: &str) -> (StatusCode, Bytes) {
    let ok = Bytes::from_static(b"ok");
    let mut parts = path.trim_start_matches('/').splitn(2, '/');
    let (Some(kind), Some(arg)) = (parts.next(), parts.next()) else {
        return (StatusCode::OK, ok);
    };
    let Ok(number) = arg.parse::<u64>() else {
        return (StatusCode::OK, ok);
    };
    match kind {
        "status" => (
            u16::try_from(number)
                .ok()
                .and_then(|code| StatusCode::from_u16(code).ok())
                .unwrap_or(StatusCode::BAD_REQUEST),
            ok,
        ),
        "delay" => {
            tokio::time::sleep(Duration::from_millis(number)).await;
            (StatusCode::OK, ok)
        }
        "size" => (
            StatusCode::OK,
            Bytes::from(vec![b'x'; usize::try_from(number).unwrap_or(0)]),
        ),
        _ => (StatusCode::OK, ok),
    }
}
