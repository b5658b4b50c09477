//! An HTTP/3 listener across a reload and a shutdown
//! (docs/LIFECYCLE-h3.md): a reload that changes the listener keeps its
//! UDP endpoint (connections open before it go on), and shutdown sends
//! GOAWAY while the request in flight finishes.

use crate::h3_support;
use crate::support;

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use h3_support::Client;
use http::{Request, StatusCode};
use support::live::{reload, scratch, start, until};
use testkit::TestCerts;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
};

/// An upstream that answers each request after `delay`; counts them.
async fn slow_upstream(delay: Duration) -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let counter = Arc::clone(&counter);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = stream.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nslow";
                    if stream.write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, seen)
}

fn config(certs: &TestCerts, upstream: SocketAddr, h3: &str) -> String {
    format!(
        "workers: 1\nlisteners:\n  - address: 127.0.0.1:0\n    protocols: [h2, http1, h3]\n    tls: {{ cert: \"{}\", key: \"{}\" }}\n    h3: {{ {h3} }}\nadmin: {{ address: 127.0.0.1:0 }}\nlimits: {{ shutdown_deadline: 60s }}\nupstreams:\n  slow: {{ hosts: [\"http://{upstream}\"] }}\nroutes: [{{ path: /, upstream: slow }}]\n",
        certs.cert_path.display(),
        certs.key_path.display(),
    )
}

/// Sends a GET on its own task; its status (or why none came).
fn in_flight(client: &Client) -> tokio::task::JoinHandle<Result<StatusCode, String>> {
    let mut send = client.send.clone();
    tokio::spawn(async move {
        let request = Request::get("https://localhost/").body(()).unwrap();
        let mut stream = send
            .send_request(request)
            .await
            .map_err(|e| e.to_string())?;
        stream.finish().await.map_err(|e| e.to_string())?;
        let response = stream.recv_response().await.map_err(|e| e.to_string())?;
        while stream
            .recv_data()
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {}
        Ok(response.status())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_keeps_the_endpoint_and_shutdown_lets_the_request_in_flight_finish() {
    let certs = TestCerts::generate();
    let (upstream, seen) = slow_upstream(Duration::from_millis(400)).await;
    let dir = scratch("h3");
    let file = dir.join("sluice.yaml");
    std::fs::write(&file, config(&certs, upstream, "")).unwrap();
    let proxy = start(&file);
    let addr = proxy.listeners[0];
    let client = Client::connect(addr, &certs).await;

    // A reload that changes the listener (its h3 block) while a request
    // is in flight: the request finishes, the connection serves on.
    let request = in_flight(&client);
    let seen_one = || seen.load(Ordering::SeqCst) == 1;
    assert!(until(Duration::from_secs(5), || async { seen_one() }).await);
    std::fs::write(&file, config(&certs, upstream, "idle_timeout: 20s")).unwrap();
    let answer = reload(proxy.admin.unwrap()).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(request.await.unwrap(), Ok(StatusCode::OK));
    assert_eq!(in_flight(&client).await.unwrap(), Ok(StatusCode::OK));
    // New connections come in on the same UDP port.
    let mut other = Client::connect(addr, &certs).await;
    assert_eq!(other.get("/").await.0.status(), StatusCode::OK);

    // Shutdown with a request in flight: it finishes (GOAWAY lets it).
    let before = seen.load(Ordering::SeqCst);
    let request = in_flight(&client);
    let arrived = || seen.load(Ordering::SeqCst) > before;
    assert!(until(Duration::from_secs(5), || async { arrived() }).await);
    let stopping = tokio::task::spawn_blocking(move || proxy.shutdown());
    assert_eq!(request.await.unwrap(), Ok(StatusCode::OK));
    // Idle connections (`other`) end at GOAWAY: the drain does not wait
    // for the 60 s deadline.
    let drained = tokio::time::timeout(Duration::from_secs(30), stopping).await;
    drained.expect("shutdown waited for the deadline").unwrap();
    // After it, nothing is served on the port.
    let late = tokio::time::timeout(Duration::from_secs(3), in_flight(&other)).await;
    assert!(
        !matches!(late, Ok(Ok(Ok(_)))),
        "a request was served after shutdown"
    );
    drop(other);
}
