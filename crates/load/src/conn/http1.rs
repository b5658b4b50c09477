//! The HTTP/1.1 exchange of a [`Client`]: requests written in batches of
//! `pipeline` (closed model) or each when due into a free slot (open
//! model), responses read in order and timed, a stalled write or read
//! given up at the timeout.

use std::{sync::atomic::Ordering, time::Duration};

use bytes::{Bytes, BytesMut};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    time::Instant,
};

use super::{Client, SessionEnd};
use crate::{
    figures::{ErrorKind, Timing},
    response::ResponseReader,
};

const READ_RESERVE: usize = 64 * 1024;

/// One HTTP/1.1 request of the rotation, ready to write.
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    pub bytes: Bytes,
    pub head: bool,
}

/// An HTTP/1.1 request written and not yet answered.
#[derive(Debug, Clone, Copy)]
pub(super) struct InFlight {
    intended: Instant,
    sent: Instant,
    /// When the first byte of its answer was read.
    first_byte: Option<Instant>,
    head: bool,
}

impl Client {
    /// An HTTP/1.1 session; returns how it ended and how many requests it lost.
    pub(super) async fn http1<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        stream: S,
        requests: &[Prepared],
    ) -> (SessionEnd, u64) {
        let end = self.session(stream, requests).await;
        let lost = self.in_flight.len() as u64;
        self.in_flight.clear();
        (end, lost)
    }

    /// Queues as many requests as are allowed now into `wbuf`. The closed
    /// model sends a new batch of `pipeline` requests only once the last
    /// batch is answered (wrk's pipeline.lua); the open model sends each
    /// request when it is due and a slot is free.
    fn fill(&mut self, wbuf: &mut Vec<u8>, requests: &[Prepared], now: Instant) {
        if self.schedule.is_none() && !self.in_flight.is_empty() {
            return;
        }
        while self.in_flight.len() < self.shared.pipeline {
            let Some(next) = self.take_next(now) else {
                return;
            };
            let request = &requests[next.index];
            wbuf.extend_from_slice(&request.bytes);
            self.in_flight.push_back(InFlight {
                intended: next.intended,
                sent: now,
                first_byte: None,
                head: request.head,
            });
        }
    }

    async fn session<S: AsyncRead + AsyncWrite + Unpin>(
        &mut self,
        mut stream: S,
        requests: &[Prepared],
    ) -> SessionEnd {
        let mut rbuf = BytesMut::with_capacity(READ_RESERVE);
        let mut wbuf = Vec::with_capacity(4096);
        let mut reader = ResponseReader::default();
        reader.set_capture(self.shared.checks.as_ref().and_then(|c| c.capture()));
        self.free_since = Instant::now();
        loop {
            self.fill(&mut wbuf, requests, Instant::now());
            if !wbuf.is_empty() {
                if let Some(end) = self.write(&mut stream, &wbuf).await {
                    return end;
                }
                wbuf.clear();
            }
            if self.in_flight.is_empty() {
                if self.shared.stopping()
                    || (self.schedule.is_none() && (self.pace.is_none() || self.spent))
                {
                    // Nothing to send any more: the budget is spent or the run
                    // is over (a thinking user has more to send).
                    return SessionEnd::Stop;
                }
                if self.off_duty(Instant::now()) {
                    return SessionEnd::OffDuty;
                }
            }
            if let Some(front) = self.in_flight.front() {
                self.arm_timer(front.sent + self.shared.timeout);
            }
            // The open model sends into any free slot; the closed model
            // (users too) only once the last batch is answered.
            let can_send = if self.schedule.is_some() {
                self.in_flight.len() < self.shared.pipeline
            } else {
                self.in_flight.is_empty()
            };
            let due = if can_send {
                self.next_due(Instant::now())
            } else {
                None
            };
            if let Some(due) = due {
                self.send_timer.reset(due);
            }
            if rbuf.capacity() - rbuf.len() < READ_RESERVE / 4 {
                rbuf.reserve(READ_RESERVE);
            }
            tokio::select! {
                biased;
                read = stream.read_buf(&mut rbuf) => {
                    let now = Instant::now();
                    match read {
                        Ok(0) => return self.at_eof(&mut reader),
                        Ok(n) => self.stats.borrow_mut().bytes(n, now),
                        Err(_) => return SessionEnd::Failed(ErrorKind::Read),
                    }
                    if let Some(end) = self.responses(&mut reader, &mut rbuf, now) {
                        return end;
                    }
                    // The read branch is polled first: a server that never
                    // pauses must not keep the stop from being seen.
                    if self.shared.stopping() {
                        return SessionEnd::Stop;
                    }
                }
                () = self.stop_signal.as_mut() => return SessionEnd::Stop,
                () = self.timer.as_mut() => {
                    let now = Instant::now();
                    match self.in_flight.front() {
                        Some(front) if now >= front.sent + self.shared.timeout => {
                            return SessionEnd::Failed(ErrorKind::Timeout)
                        }
                        // Early: park the timer until a request is in flight again.
                        _ => self.timer.as_mut().reset(now + Duration::from_secs(3600)),
                    }
                }
                () = &mut self.send_timer, if due.is_some() => {}
            }
        }
    }

    /// Writes a batch, giving up at the stop or when its oldest request
    /// times out (a server that stops reading must not hang the run).
    async fn write<S: AsyncWrite + Unpin>(
        &mut self,
        stream: &mut S,
        bytes: &[u8],
    ) -> Option<SessionEnd> {
        let deadline = self.in_flight.front().map_or_else(
            || Instant::now() + self.shared.timeout,
            |front| front.sent + self.shared.timeout,
        );
        self.arm_timer(deadline);
        let write = stream.write_all(bytes);
        tokio::pin!(write);
        loop {
            tokio::select! {
                biased;
                written = &mut write => return written.err().map(|_| SessionEnd::Failed(ErrorKind::Write)),
                () = self.stop_signal.as_mut() => return Some(SessionEnd::Stop),
                () = self.timer.as_mut() => {
                    if Instant::now() >= deadline {
                        return Some(SessionEnd::Failed(ErrorKind::Timeout));
                    }
                    self.timer.as_mut().reset(deadline);
                }
            }
        }
    }

    /// Records every response completed in `rbuf`.
    fn responses(
        &mut self,
        reader: &mut ResponseReader,
        rbuf: &mut BytesMut,
        now: Instant,
    ) -> Option<SessionEnd> {
        let mut completed = 0u64;
        let mut end = None;
        if self.in_flight.len() >= self.shared.pipeline {
            self.free_since = now;
        }
        {
            let mut stats = self.stats.borrow_mut();
            let checks = self.shared.checks.as_ref();
            while let Some(front) = self.in_flight.front_mut() {
                // Its answer began in this read, or in an earlier one.
                if front.first_byte.is_none() && !rbuf.is_empty() {
                    front.first_byte = Some(now);
                }
                let front = *front;
                match reader.advance(rbuf, front.head) {
                    Ok(Some(done)) => {
                        self.in_flight.pop_front();
                        let timing = Timing {
                            intended: front.intended,
                            sent: front.sent,
                            first_byte: front.first_byte.unwrap_or(now),
                            done: now,
                        };
                        let verdicts = checks
                            .map(|c| c.verdicts(done.status, reader.captured(), now - front.sent));
                        if stats.response(done.status, &timing, verdicts) {
                            self.answered += 1;
                        }
                        completed += 1;
                        if done.close {
                            end = Some(SessionEnd::Reconnect);
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(_) => {
                        end = Some(SessionEnd::Failed(ErrorKind::Parse));
                        break;
                    }
                }
            }
            if end.is_none() && self.in_flight.is_empty() && !rbuf.is_empty() {
                // Bytes nobody asked for.
                end = Some(SessionEnd::Failed(ErrorKind::Parse));
            }
        }
        self.progress.fetch_add(completed, Ordering::Relaxed);
        self.shared.finish(completed);
        if completed > 0 {
            self.rest(now);
        }
        end
    }

    fn at_eof(&mut self, reader: &mut ResponseReader) -> SessionEnd {
        let now = Instant::now();
        if let Some(done) = reader.finish_at_eof() {
            let Some(front) = self.in_flight.pop_front() else {
                return SessionEnd::Failed(ErrorKind::Parse);
            };
            let timing = Timing {
                intended: front.intended,
                sent: front.sent,
                first_byte: front.first_byte.unwrap_or(now),
                done: now,
            };
            let verdicts =
                self.shared.checks.as_ref().map(|checks| {
                    checks.verdicts(done.status, reader.captured(), now - front.sent)
                });
            if self
                .stats
                .borrow_mut()
                .response(done.status, &timing, verdicts)
            {
                self.answered += 1;
            }
            self.progress.fetch_add(1, Ordering::Relaxed);
            self.shared.finish(1);
            self.rest(now);
        }
        if self.in_flight.is_empty() {
            SessionEnd::Reconnect
        } else {
            SessionEnd::Failed(ErrorKind::Read)
        }
    }
}
