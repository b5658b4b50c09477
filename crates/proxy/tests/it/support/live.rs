//! What the tests of live configuration share: a proxy started from a
//! file it reloads, `POST /reload`, an upstream that counts connections.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicI64, AtomicU64, Ordering},
        Arc,
    },
};

use testkit::RawConn;
use tokio::net::TcpListener;

/// An echo upstream that counts the connections it accepted and has open.
pub(crate) struct Counted {
    pub(crate) addr: SocketAddr,
    pub(crate) accepted: Arc<AtomicU64>,
    pub(crate) open: Arc<AtomicI64>,
}

impl Counted {
    pub(crate) async fn start(name: &'static str, at: &str) -> Self {
        let listener = TcpListener::bind(at).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicU64::new(0));
        let open = Arc::new(AtomicI64::new(0));
        let (a, o) = (Arc::clone(&accepted), Arc::clone(&open));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                a.fetch_add(1, Ordering::SeqCst);
                o.fetch_add(1, Ordering::SeqCst);
                let o = Arc::clone(&o);
                tokio::spawn(async move {
                    super::echo(stream, name, Arc::new(AtomicU64::new(0))).await;
                    o.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Self {
            addr,
            accepted,
            open,
        }
    }
}

/// A test's own directory under the temporary one, removed when dropped
/// (at the test's end, failed or not: `$TMPDIR` keeps no
/// `sluice-reload-*` directories).
pub(crate) struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A new, empty [`Scratch`] directory named after the test (`name`).
pub(crate) fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("sluice-reload-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

pub(crate) const HEAD: &str =
    "workers: 1\nlisteners: [{ address: 127.0.0.1:0 }]\nadmin: { address: 127.0.0.1:0 }\n";

pub(crate) fn start(file: &Path) -> proxy::RunningProxy {
    let config = proxy::config::load(file).unwrap();
    let options = proxy::Options {
        file: Some(file.to_path_buf()),
        ..Default::default()
    };
    proxy::start_with(config, options).unwrap()
}

pub(crate) async fn reload(admin: SocketAddr) -> testkit::RawResponse {
    let mut conn = RawConn::connect(admin).await;
    conn.send("POST /reload HTTP/1.1\r\nhost: localhost\r\ncontent-length: 0\r\n\r\n")
        .await;
    conn.read_response(false).await
}

/// `GET path` on the admin listener, which answers `Host: localhost`
/// (and IP literals, and `admin.hosts`; not `RawConn`'s `Host: test`).
pub(crate) async fn admin_get(admin: SocketAddr, path: &str) -> testkit::RawResponse {
    let mut conn = RawConn::connect(admin).await;
    conn.send(format!("GET {path} HTTP/1.1\r\nhost: localhost\r\n\r\n"))
        .await;
    conn.read_response(false).await
}

pub(crate) use testkit::until;
