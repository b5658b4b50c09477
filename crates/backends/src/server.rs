//! Listeners, workers and graceful shutdown.
//!
//! Each worker is an OS thread running a current-thread Tokio runtime with
//! its own `SO_REUSEPORT` listener on the shared address, so the kernel
//! spreads connections across workers and no connection ever crosses a core.
//!
//! A plain connection is HTTP/1.1 unless it opens with the HTTP/2 preface
//! (h2c, prior knowledge); a TLS connection is HTTP/2 if ALPN chose `h2`,
//! HTTP/1.1 otherwise.

use std::{
    future::Future,
    net::{SocketAddr, TcpListener as StdListener},
    pin::Pin,
    sync::Arc,
    thread::JoinHandle,
    time::Duration,
};

use anyhow::{bail, Context};
use http1::io::bind_shared;
use tls::tokio_rustls::TlsAcceptor;
use tokio::{
    net::{TcpListener, TcpStream},
    sync::watch,
    task::JoinSet,
};
use tracing::{debug, info, warn};

use crate::{
    customers,
    h1::{serve_connection, H2c},
    http2, passthrough, static_body, App, Backend, ServeOptions, TlsFiles,
};

/// Pause after an accept error such as EMFILE, so that the loop does not spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(20);

/// A backend serving on its workers until [`RunningServer::shutdown`].
#[derive(Debug)]
pub struct RunningServer {
    backend: Backend,
    local_addr: SocketAddr,
    shutdown: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
}

impl RunningServer {
    /// The bound address, with the real port when port 0 was asked for.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Stops accepting, lets in-flight requests finish until the shutdown
    /// deadline, then closes what is left. Blocks until every worker is done.
    pub fn shutdown(self) {
        // Receivers are gone only if every worker already exited.
        let _ = self.shutdown.send(true);
        for worker in self.workers {
            if worker.join().is_err() {
                warn!("a worker thread panicked during shutdown");
            }
        }
    }
}

/// Binds `backend` on `options.listen` with `options.workers` workers and starts serving.
/// Fails before serving anything if the address cannot be bound.
pub fn start(backend: Backend, options: &ServeOptions) -> anyhow::Result<RunningServer> {
    if options.workers == 0 {
        bail!("--workers must be at least 1");
    }
    let tls = options.tls.as_ref().map(acceptor).transpose()?;
    let first = bind_shared(options.listen)
        .with_context(|| format!("cannot listen on {}", options.listen))?;
    let local_addr = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..options.workers {
        listeners.push(
            bind_shared(local_addr).with_context(|| format!("cannot listen on {local_addr}"))?,
        );
    }

    let shared = SharedState::new(backend);
    let (shutdown, _) = watch::channel(false);
    let mut workers = Vec::with_capacity(listeners.len());
    for (index, listener) in listeners.into_iter().enumerate() {
        let app = shared.app_for_worker(options);
        let shutdown_rx = shutdown.subscribe();
        let deadline = options.shutdown_deadline;
        let tls = tls.clone();
        let handle = std::thread::Builder::new()
            .name(format!("{backend}-worker-{index}"))
            .spawn(move || run_worker(listener, app, tls, shutdown_rx, deadline))
            .context("cannot spawn a worker thread")?;
        workers.push(handle);
    }
    info!(%backend, %local_addr, workers = options.workers, tls = tls.is_some(), "serving");
    Ok(RunningServer {
        backend,
        local_addr,
        shutdown,
        workers,
    })
}

/// TLS 1.2 and 1.3 with ALPN `h2` preferred, then `http/1.1`. Errors name the file at fault.
fn acceptor(files: &TlsFiles) -> anyhow::Result<TlsAcceptor> {
    let identity = tls::Identity {
        cert: &files.cert,
        key: &files.key,
    };
    let config = tls::server_config(identity, None, &[tls::ALPN_H2, tls::ALPN_HTTP11])
        .context("cannot set up TLS")?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// State that all workers of one server must share (customers are one registry).
enum SharedState {
    Customers(customers::Customers),
    Other(Backend),
}

impl SharedState {
    fn new(backend: Backend) -> Self {
        match backend {
            Backend::Customers => SharedState::Customers(customers::Customers::seeded()),
            other => SharedState::Other(other),
        }
    }

    fn app_for_worker(&self, options: &ServeOptions) -> App {
        match self {
            SharedState::Customers(store) => App::Customers(store.clone()),
            SharedState::Other(Backend::Petstore) => App::Petstore,
            SharedState::Other(Backend::Downstream) => App::Downstream,
            SharedState::Other(Backend::Passthrough) => App::Passthrough(Box::new(
                passthrough::Passthrough::new(&options.downstream, options.downstream_timeout),
            )),
            SharedState::Other(Backend::Static) => App::Static(static_body::StaticBody::new(
                options.static_size,
                options.static_delay,
            )),
            SharedState::Other(Backend::Customers) => unreachable!("customers are shared state"),
        }
    }
}

fn run_worker(
    listener: StdListener,
    app: App,
    tls: Option<TlsAcceptor>,
    shutdown: watch::Receiver<bool>,
    deadline: Duration,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            warn!(%err, "cannot build a worker runtime");
            return;
        }
    };
    runtime.block_on(async move {
        match TcpListener::from_std(listener) {
            Ok(listener) => serve(listener, app, tls, shutdown, deadline).await,
            Err(err) => warn!(%err, "cannot register the listener"),
        }
    });
}

async fn serve(
    listener: TcpListener,
    app: App,
    tls: Option<TlsAcceptor>,
    mut shutdown: watch::Receiver<bool>,
    deadline: Duration,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = shutdown.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    // Small responses must not wait for Nagle.
                    let _ = stream.set_nodelay(true);
                    let (app, shutdown) = (app.clone(), shutdown.clone());
                    match &tls {
                        None => connections.spawn(serve_connection(stream, app, shutdown, Some(H2C))),
                        Some(tls) => connections.spawn(serve_tls(stream, tls.clone(), app, shutdown)),
                    };
                    // Reap finished connections so the set stays as small as the live ones.
                    while connections.try_join_next().is_some() {}
                }
                Err(err) => {
                    warn!(%err, "accept failed");
                    tokio::time::sleep(ACCEPT_ERROR_PAUSE).await;
                }
            }
        }
    }
    drop(listener);
    let drained = tokio::time::timeout(deadline, async {
        while connections.join_next().await.is_some() {}
    });
    if drained.await.is_err() {
        warn!(
            ?deadline,
            open = connections.len(),
            "shutdown deadline passed; closing the remaining connections"
        );
    }
}

/// A plain connection that opened with the HTTP/2 preface.
const H2C: H2c<TcpStream> =
    |stream, app, shutdown| boxed(|| http2::serve_connection(stream, app, shutdown));

/// Builds a connection's future out of line, on the heap. A protocol's
/// state is kilobytes: built inside a task's poll function, it would make
/// every poll of that task reserve (and probe) as much stack, and an
/// HTTP/1.1 task would carry an h2 connection's size.
#[inline(never)]
fn boxed<F: Future<Output = ()> + Send + 'static>(
    make: impl FnOnce() -> F,
) -> Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(make())
}

/// The TLS handshake (bounded, abandoned on shutdown), then the protocol ALPN chose.
async fn serve_tls(stream: TcpStream, tls: TlsAcceptor, app: App, shutdown: watch::Receiver<bool>) {
    let mut signal = shutdown.clone();
    let handshake = tokio::time::timeout(http2::HANDSHAKE_TIMEOUT, tls.accept(stream));
    let stream = tokio::select! {
        accepted = handshake => match accepted {
            Ok(Ok(stream)) => stream,
            Ok(Err(err)) => return debug!(%err, "TLS handshake failed"),
            Err(_) => return debug!("TLS handshake timed out"),
        },
        _ = signal.changed() => return,
    };
    if stream.get_ref().1.alpn_protocol() == Some(tls::ALPN_H2) {
        boxed(|| http2::serve_connection(stream, app, shutdown)).await;
    } else {
        // Over TLS, HTTP/2 is chosen by ALPN or not at all (RFC 9113 3.2).
        boxed(|| serve_connection(stream, app, shutdown, None)).await;
    }
}
