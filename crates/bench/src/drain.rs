//! Rows that cannot inherit a backlog. A row that saturates its system
//! (thousands of users in front of a backend that answers a few hundred
//! requests a second) ends with that backend still working through the
//! requests its users left: a blocking server keeps serving a queue
//! whose clients have gone. The next row would start on a busy backend
//! and measure the previous row's backlog as its own latency.
//!
//! So before each row of such a group, the bench sends the row's own
//! request to the row's own target (through the proxy when the row is
//! behind one), on a fresh connection, until one is answered within
//! [`bound`] of the target's unloaded latency, or [`DRAIN_BOUND`] runs
//! out (the row then carries a "not comparable" reason). A backend that
//! answers in order answers the probe only once the requests before it
//! are done: when it comes back as fast as unloaded, nothing was queued.
//! The unloaded latency is the fastest probe a target ever answered; the
//! first ones run before the group loads anything.

use std::{
    collections::HashMap,
    io::{Read, Write},
    net::{SocketAddr, TcpStream},
    time::{Duration, Instant},
};

use anyhow::{bail, Context};
use bytes::{Bytes, BytesMut};
use load::{request_bytes, LoadConfig, Protocol, ResponseReader, Scheme};

use crate::{results::Drain, stage::Bench};

/// The longest the bench waits for a target to drain before a row.
pub(crate) const DRAIN_BOUND: Duration = Duration::from_secs(60);
/// Probes that measure a target's unloaded latency, the fastest kept.
const UNLOADED_PROBES: usize = 3;
/// After a probe that failed outright (refused, reset), before the next.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// A probe of a row's target with the row's own request.
#[derive(Debug, Clone)]
pub(crate) struct DrainProbe {
    addr: SocketAddr,
    request: Bytes,
    head: bool,
}

/// How fast a drained target answers: half again its unloaded latency,
/// and at least 5 ms more (a fast backend's answer jitters by that much on
/// a busy machine).
pub(crate) fn bound(unloaded: Duration) -> Duration {
    (unloaded * 3 / 2).max(unloaded + Duration::from_millis(5))
}

impl DrainProbe {
    /// The first request of `load` sent to its target; `None` unless the
    /// load is plain HTTP/1.1 (the saturating groups' loads are).
    pub(crate) fn of(load: &LoadConfig) -> Option<Self> {
        if load.protocol != Protocol::Http1 || load.target.scheme != Scheme::Http {
            return None;
        }
        let spec = load.requests.first()?;
        let addr = format!("{}:{}", load.target.host, load.target.port)
            .parse()
            .ok()?;
        Some(Self {
            addr,
            request: request_bytes(spec, &load.target, &load.headers, &load.body),
            head: spec.method == http::Method::HEAD,
        })
    }

    /// The target probed.
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// One exchange on a fresh connection: how long its answer took, or
    /// why there was none (not 2xx or 3xx, closed, not within `timeout`).
    pub(crate) fn once(&self, timeout: Duration) -> anyhow::Result<Duration> {
        let started = Instant::now();
        let timeout = timeout.max(Duration::from_millis(10));
        let mut conn = TcpStream::connect_timeout(&self.addr, timeout)
            .with_context(|| format!("cannot connect to {}", self.addr))?;
        conn.set_nodelay(true)?;
        conn.write_all(&self.request)?;
        let mut reader = ResponseReader::default();
        let mut buf = BytesMut::with_capacity(8192);
        let mut chunk = [0u8; 8192];
        loop {
            let left = timeout.saturating_sub(started.elapsed());
            if left.is_zero() {
                bail!("no answer within {timeout:?}");
            }
            conn.set_read_timeout(Some(left))?;
            let n = match conn.read(&mut chunk) {
                Ok(0) => match reader.finish_at_eof() {
                    Some(done) => return answered(done.status, started),
                    None => bail!("closed before the answer"),
                },
                Ok(n) => n,
                Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(err) if is_timeout(&err) => bail!("no answer within {timeout:?}"),
                Err(err) => return Err(err.into()),
            };
            buf.extend_from_slice(&chunk[..n]);
            if let Some(done) = reader
                .advance(&mut buf, self.head)
                .map_err(anyhow::Error::msg)?
            {
                return answered(done.status, started);
            }
        }
    }
}

fn answered(status: u16, started: Instant) -> anyhow::Result<Duration> {
    let took = started.elapsed();
    if !(200..400).contains(&status) {
        bail!("answered {status}");
    }
    Ok(took)
}

fn is_timeout(err: &std::io::Error) -> bool {
    matches!(
        err.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// The fastest answer each target gave, its unloaded latency.
#[derive(Debug, Default)]
pub(crate) struct Unloaded(HashMap<SocketAddr, Duration>);

impl Unloaded {
    fn seen(&mut self, addr: SocketAddr, took: Duration) {
        let fastest = self.0.entry(addr).or_insert(took);
        *fastest = (*fastest).min(took);
    }

    fn of(&self, addr: SocketAddr) -> Option<Duration> {
        self.0.get(&addr).copied()
    }
}

impl Bench<'_> {
    /// Measures the unloaded latency of every target among `probes` not
    /// measured yet: the fastest of a few probes, before any load. A
    /// target that does not answer is left to [`Bench::drain`], which
    /// will say so.
    pub(crate) fn measure_unloaded<'p>(&mut self, probes: impl Iterator<Item = &'p DrainProbe>) {
        for probe in probes {
            if self.unloaded.of(probe.addr).is_some() {
                continue;
            }
            for _ in 0..UNLOADED_PROBES {
                if let Ok(took) = probe.once(DRAIN_BOUND) {
                    self.unloaded.seen(probe.addr, took);
                }
            }
        }
    }

    /// Waits until `probe`'s target answers within [`bound`] of its
    /// unloaded latency, at most [`DRAIN_BOUND`]; what it found.
    pub(crate) fn drain(&mut self, probe: &DrainProbe) -> Drain {
        let started = Instant::now();
        let mut probes = 0;
        let mut last = Duration::ZERO;
        loop {
            let left = DRAIN_BOUND.saturating_sub(started.elapsed());
            if left.is_zero() {
                break;
            }
            probes += 1;
            match probe.once(left) {
                Ok(took) => {
                    last = took;
                    self.unloaded.seen(probe.addr, took);
                    let unloaded = self.unloaded.of(probe.addr).unwrap_or(took);
                    if took <= bound(unloaded) {
                        return self.drained(probe, started, probes, took, true);
                    }
                }
                Err(_) => {
                    last = started.elapsed();
                    std::thread::sleep(RETRY_PAUSE.min(left));
                }
            }
        }
        self.drained(probe, started, probes, last, false)
    }

    fn drained(
        &self,
        probe: &DrainProbe,
        started: Instant,
        probes: u64,
        last: Duration,
        drained: bool,
    ) -> Drain {
        Drain {
            waited_s: started.elapsed().as_secs_f64(),
            probes,
            probe_us: last.as_micros() as u64,
            unloaded_us: self
                .unloaded
                .of(probe.addr)
                .map_or(0, |d| d.as_micros() as u64),
            drained,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drained_target_answers_within_half_again_its_unloaded_latency() {
        let ms = Duration::from_millis;
        assert_eq!(bound(ms(300)), ms(450));
        assert_eq!(bound(ms(10)), ms(15));
        assert_eq!(
            bound(Duration::from_micros(100)),
            Duration::from_micros(5_100)
        );
    }

    #[test]
    fn only_plain_http1_loads_are_probed() {
        let url = [(
            http::Method::POST,
            "http://127.0.0.1:9/passthrough/message".into(),
        )];
        let mut load = LoadConfig::new(&url).expect("valid");
        load.body = Bytes::from_static(b"{}");
        let probe = DrainProbe::of(&load).expect("HTTP/1.1");
        assert_eq!(probe.addr(), SocketAddr::from(([127, 0, 0, 1], 9)));
        let request = String::from_utf8_lossy(&probe.request);
        assert!(
            request.starts_with("POST /passthrough/message HTTP/1.1\r\n"),
            "{request}"
        );
        assert!(
            request.ends_with("Content-Length: 2\r\n\r\n{}"),
            "{request}"
        );
        load.protocol = Protocol::Http2;
        assert!(DrainProbe::of(&load).is_none());
    }
}
