//! A backend that falls behind, as a blocking server does under more
//! users than its worker pool serves: every request it reads joins one
//! queue, and one worker answers them in order, one every `service`
//! time, whether or not their client is still there (a thread pool keeps
//! working through requests whose clients have gone). Its queue keeps a
//! history of its length over time, so that a test can say whether the
//! backend was still busy at a given moment.

use std::{
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
    sync::{mpsc, watch},
};

use crate::fake::{content_length, OK_RESPONSE};

/// A running backlogged backend; stops when dropped.
#[derive(Debug)]
pub struct BacklogServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct State {
    /// Requests read so far, with the moment each was read.
    arrivals: Vec<Instant>,
    /// Requests answered (their answer written, or their client gone).
    served: u64,
    /// Requests read and not yet answered, after each change, with when.
    pending: Vec<(Instant, u64)>,
}

impl State {
    fn waiting(&self) -> u64 {
        self.arrivals.len() as u64 - self.served
    }
}

impl BacklogServer {
    /// Answers one request every `service`, in the order read.
    pub fn start(service: Duration) -> Self {
        // Hundreds of users connect at once: a listen queue of 128 (the
        // std default) would drop their SYNs and delay them by a second.
        let socket = TcpSocket::new_v4().expect("a socket");
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind the backlog");
        let addr = socket.local_addr().expect("address");
        let state = Arc::new(Mutex::new(State::default()));
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::clone(&state);
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("backlog runtime");
            runtime.block_on(run(socket, service, shared, stopped));
        });
        Self {
            addr,
            state,
            stop,
            thread: Some(thread),
        }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Requests read so far.
    pub fn received(&self) -> u64 {
        self.lock().arrivals.len() as u64
    }

    /// Requests read at or after `from` and before `until` (`None`: now).
    pub fn received_between(&self, from: Instant, until: Option<Instant>) -> u64 {
        let state = self.lock();
        state
            .arrivals
            .iter()
            .filter(|&&at| at >= from && until.is_none_or(|until| at < until))
            .count() as u64
    }

    /// Requests read and not answered yet.
    pub fn pending(&self) -> u64 {
        self.lock().waiting()
    }

    /// Requests read and not answered at `at` (0 before the first).
    pub fn pending_at(&self, at: Instant) -> u64 {
        let state = self.lock();
        state
            .pending
            .iter()
            .take_while(|(when, _)| *when <= at)
            .last()
            .map_or(0, |(_, count)| *count)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for BacklogServer {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A request waiting for the worker: where its answer goes.
type Job = mpsc::UnboundedSender<()>;

async fn run(
    socket: TcpSocket,
    service: Duration,
    state: Arc<Mutex<State>>,
    mut stop: watch::Receiver<bool>,
) {
    let listener = socket.listen(4096).expect("listen");
    let (queue, jobs) = mpsc::unbounded_channel::<Job>();
    tokio::spawn(worker(jobs, service, Arc::clone(&state)));
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                tokio::spawn(connection(stream, queue.clone(), Arc::clone(&state)));
            }
        }
    }
}

/// The one worker: an answer every `service`, in order.
async fn worker(
    mut jobs: mpsc::UnboundedReceiver<Job>,
    service: Duration,
    state: Arc<Mutex<State>>,
) {
    while let Some(answer) = jobs.recv().await {
        tokio::time::sleep(service).await;
        let mut state = state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        state.served += 1;
        let waiting = state.waiting();
        state.pending.push((Instant::now(), waiting));
        drop(state);
        // A client that has gone gets nothing; its request still cost the time.
        let _ = answer.send(());
    }
}

/// Reads requests (heads and Content-Length bodies) into the queue and
/// writes each answer the worker gives, in order.
async fn connection(
    stream: TcpStream,
    queue: mpsc::UnboundedSender<Job>,
    state: Arc<Mutex<State>>,
) {
    let (mut reader, mut writer) = stream.into_split();
    let (answers, mut answered) = mpsc::unbounded_channel::<()>();
    tokio::spawn(async move {
        while answered.recv().await.is_some() {
            if writer.write_all(OK_RESPONSE).await.is_err() {
                // The client has gone: later answers are dropped here.
                while answered.recv().await.is_some() {}
                return;
            }
        }
    });
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
        while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let length = content_length(&buf[..end + 4]) as usize;
            if buf.len() < end + 4 + length {
                break;
            }
            buf.drain(..end + 4 + length);
            let mut shared = state
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let now = Instant::now();
            shared.arrivals.push(now);
            let waiting = shared.waiting();
            shared.pending.push((now, waiting));
            drop(shared);
            if queue.send(answers.clone()).is_err() {
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RawConn;

    #[tokio::test]
    async fn answers_in_order_one_at_a_time_and_keeps_its_queue_history() {
        let server = BacklogServer::start(Duration::from_millis(300));
        let before = Instant::now();
        let mut first = RawConn::connect(server.addr()).await;
        let mut second = RawConn::connect(server.addr()).await;
        first.send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(crate::until(Duration::from_secs(5), || async { server.received() == 1 }).await);
        second
            .send(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
            .await;
        assert!(crate::until(Duration::from_secs(5), || async { server.received() == 2 }).await);
        let both = Instant::now();
        assert_eq!(server.pending_at(both), 2);
        assert_eq!(second.read_response(false).await.status, 200);
        // The first was answered before the second: nothing waits now.
        assert_eq!(first.read_response(false).await.status, 200);
        assert!(before.elapsed() >= Duration::from_millis(600));
        assert_eq!(server.pending(), 0);
        assert_eq!(server.pending_at(Instant::now()), 0);
        assert_eq!(server.pending_at(before), 0);
        assert_eq!(server.received_between(before, Some(both)), 2);
        assert_eq!(server.received_between(both, None), 0);
    }
}
