//! The HTTP/1.1 server loop: accepts connections, bounds each one in time, caps how many are
//! open, answers 503 while the application is still starting, and drains on shutdown.
//!
//! `axum::serve` has no header, idle or body timeouts and no connection cap, so this module
//! drives hyper's HTTP/1 connection itself. Each connection has a small watchdog:
//!
//! - **idle**: no request in flight (a new connection that sends nothing, or a kept-alive one
//!   between requests) → closed after `idle_timeout`;
//! - **head**: from the first byte of a request until its headers are parsed → closed after
//!   `header_read_timeout` (a trickled header cannot hold the connection);
//! - **busy**: a request is with the application; the body read (`JsonBody`, 408) and the
//!   whole request (`request_timeout`, 503 here) have their own limits.
//!
//! hyper answers a request it cannot parse (400, 414 URI too long, 431 headers too large)
//! itself, with an empty body. [`Watched`] recognises such a response on the way out (a
//! response head that no request of ours produced) and writes the CONTRACT envelope with an
//! `X-Request-Id` in its place.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode};
use axum::response::IntoResponse;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::error::Error;
use dropslot_core::config::NetLimits;

/// What the server routes to: nothing yet while the application starts (every request but
/// `/healthz` is a 503), then the application's router.
pub type RouterSlot = Arc<OnceLock<super::HttpService>>;

/// Serves `listener` until `stop` turns true, then stops accepting, lets in-flight requests
/// finish for at most `grace` and closes what is left.
pub async fn serve(
    listener: TcpListener,
    net: NetLimits,
    router: RouterSlot,
    mut stop: watch::Receiver<bool>,
    grace: Duration,
) {
    let permits = Arc::new(Semaphore::new(net.max_connections));
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.wait_for(|s| *s) => break,
            // Reap finished connection tasks so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: back off briefly instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            connections.spawn(refuse(stream));
            continue;
        };
        let (router, stop) = (router.clone(), stop.clone());
        connections.spawn(async move {
            connection(stream, peer, router, net, stop).await;
            drop(permit);
        });
    }
    drop(listener);
    let drained = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(grace, drained).await.is_err() {
        tracing::warn!("grace period over; closing remaining connections");
        connections.abort_all();
    }
}

/// Over the connection cap: a 503 envelope, then close.
async fn refuse(mut stream: TcpStream) {
    let bytes =
        raw_response(StatusCode::SERVICE_UNAVAILABLE, "The server has too many open connections; retry shortly.");
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(&bytes).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

const IDLE: u8 = 0;
const HEAD: u8 = 1;
const BUSY: u8 = 2;

/// One connection's watchdog state, shared by its I/O wrapper and its service. The I/O
/// side only stores: nothing wakes the watchdog task per request. The watchdog wakes at the
/// deadline, and at least every [`Watch::tick`], so a deadline moved earlier (idle → head)
/// is still met exactly: it is never more than a tick away from the moment it was set.
struct Watch {
    origin: Instant,
    phase: AtomicU8,
    /// Milliseconds after `origin` at which an idle or head phase expires.
    deadline_ms: AtomicU64,
    /// Bytes of a response were written since the watchdog last looked (a slow reader's
    /// response still being written keeps an idle connection open).
    wrote: AtomicBool,
    /// Responses handed to hyper whose head has not been written yet.
    unwritten: AtomicU32,
    net: NetLimits,
}

impl Watch {
    fn new(net: NetLimits) -> Watch {
        let w = Watch {
            origin: Instant::now(),
            phase: AtomicU8::new(IDLE),
            deadline_ms: AtomicU64::new(0),
            wrote: AtomicBool::new(false),
            unwritten: AtomicU32::new(0),
            net,
        };
        w.arm(net.idle_timeout);
        w
    }

    /// How often the watchdog looks at least: a head deadline set between two looks is at
    /// most this far away, and an idle connection's writes are judged over half its timeout.
    fn tick(&self) -> Duration {
        self.net.header_read_timeout.min(self.net.idle_timeout / 2).max(Duration::from_millis(10))
    }

    fn arm(&self, after: Duration) {
        let at = (self.origin.elapsed() + after).as_millis() as u64;
        self.deadline_ms.store(at, Ordering::Relaxed);
    }

    fn deadline(&self) -> Instant {
        self.origin + Duration::from_millis(self.deadline_ms.load(Ordering::Relaxed))
    }

    /// The watchdog's look: true when the connection is to be closed. An idle connection
    /// whose response was still being written since the last look gets a new idle period.
    fn expired(&self, now: Instant) -> bool {
        let wrote = self.wrote.swap(false, Ordering::Relaxed);
        let phase = self.phase.load(Ordering::Relaxed);
        if phase == BUSY || now < self.deadline() {
            return false;
        }
        if phase == IDLE && wrote {
            self.arm(self.net.idle_timeout);
            return false;
        }
        true
    }

    /// Bytes arrived: an idle connection starts reading a request head.
    fn read(&self) {
        if self.phase.compare_exchange(IDLE, HEAD, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            self.arm(self.net.header_read_timeout);
        }
    }

    /// Bytes of a response left: noted for the watchdog's next look (no clock read here).
    fn wrote(&self) {
        if !self.wrote.load(Ordering::Relaxed) {
            self.wrote.store(true, Ordering::Relaxed);
        }
    }

    fn begin(&self) {
        self.phase.store(BUSY, Ordering::Relaxed);
    }

    fn end(&self) {
        self.unwritten.fetch_add(1, Ordering::Relaxed);
        self.arm(self.net.idle_timeout);
        self.phase.store(IDLE, Ordering::Relaxed);
    }

    /// A response head is being written: true if it is one of ours.
    fn take_response(&self) -> bool {
        self.unwritten.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
    }
}

async fn connection(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    router: RouterSlot,
    net: NetLimits,
    mut stop: watch::Receiver<bool>,
) {
    let watch = Arc::new(Watch::new(net));
    let io = TokioIo::new(Watched { inner: stream, watch: watch.clone(), rewrite: None });
    let service = Service { router, watch: watch.clone(), net, peer };
    let mut builder = hyper::server::conn::http1::Builder::new();
    // The watchdog does the header timeout: hyper's would also cut kept-alive idle time.
    builder.header_read_timeout(None).keep_alive(true);
    let mut conn = builder.serve_connection(io, service);
    let mut stopping = false;
    let tick = watch.tick();
    let done = loop {
        // A request with the application has its own timeout: only the tick then.
        let next_tick = Instant::now() + tick;
        let look =
            if watch.phase.load(Ordering::Relaxed) == BUSY { next_tick } else { watch.deadline().min(next_tick) };
        tokio::select! {
            // Done with HTTP (the client closed, or hyper closes after a response): the
            // socket comes back for a lingering close instead of being dropped.
            done = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => break done,
            () = tokio::time::sleep_until(look) => {
                if watch.expired(Instant::now()) {
                    return; // dropping the connection closes the socket
                }
            }
            _ = stop.wait_for(|s| *s), if !stopping => {
                stopping = true;
                Pin::new(&mut conn).graceful_shutdown();
            }
        }
    };
    if done.is_ok() {
        linger(conn.into_parts().io.into_inner().inner, net.linger_bytes).await;
    }
}

/// How long a lingering close reads at most.
pub const LINGER_TIME: Duration = Duration::from_secs(5);

/// A lingering close (RFC 9112 §9.6): the response is whole, so the write side is shut
/// (the client reads it to its end), then whatever the client is still sending is read and
/// thrown away, up to `bytes` (`NetLimits::linger_bytes`: twice the largest body a route
/// takes) or [`LINGER_TIME`], before the socket closes. Closing with unread bytes would make
/// the kernel reset the connection, and a client that writes its whole body before reading
/// (an early 413, 401, 415 or 429) would get a broken pipe instead of the answer. A client
/// that has sent everything reads the end and closes at once.
async fn linger(mut stream: TcpStream, bytes: usize) {
    use tokio::io::AsyncReadExt;
    if stream.shutdown().await.is_err() {
        return;
    }
    let mut buf = vec![0u8; 64 << 10];
    let mut left = bytes;
    let _ = tokio::time::timeout(LINGER_TIME, async {
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    })
    .await;
}

/// The per-connection service: routes to the application, or answers 503 while it starts.
#[derive(Clone)]
struct Service {
    router: RouterSlot,
    watch: Arc<Watch>,
    net: NetLimits,
    peer: std::net::SocketAddr,
}

impl hyper::service::Service<Request<Incoming>> for Service {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        self.watch.begin();
        // The peer's address, for what is limited per client address (label and tracking URLs).
        req.extensions_mut().insert(axum::extract::ConnectInfo(self.peer));
        let id = request_id(&mut req);
        let (watch, timeout) = (self.watch.clone(), self.net.request_timeout);
        let Some(router) = self.router.get() else {
            let res = if req.uri().path() == "/healthz" {
                crate::error::envelope(200, "ok", &serde_json::json!({}))
            } else {
                with_id(Error::Unavailable("starting").into_response(), &id)
            };
            watch.end();
            return Box::pin(std::future::ready(Ok(res)));
        };
        let routed = router.call(req.map(Body::new));
        Box::pin(async move {
            let res = tokio::time::timeout(timeout, routed).await.unwrap_or_else(|_| {
                tracing::warn!(request_id = ?id, "request timed out");
                with_id(Error::Unavailable("request timed out").into_response(), &id)
            });
            watch.end();
            Ok(res)
        })
    }
}

/// The request's own `X-Request-Id`, else a new one, which the request then carries: the one
/// place a request gets its id (the router's stack copies it onto the response).
fn request_id<B>(req: &mut Request<B>) -> HeaderValue {
    if let Some(id) = req.headers().get("x-request-id") {
        return id.clone();
    }
    let id = new_request_id();
    req.headers_mut().insert("x-request-id", id.clone());
    id
}

/// 24 hex characters: 6 random bytes drawn once per process, then a 6-byte counter. Unique
/// across processes and restarts for log correlation, without a system call per request
/// (a `getrandom` each was 1.7 % of a preview's profile); request ids are not secrets.
fn new_request_id() -> HeaderValue {
    static PROCESS: std::sync::LazyLock<[u8; 6]> = std::sync::LazyLock::new(dropslot_core::ids::random_bytes::<6>);
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut bytes = [0u8; 12];
    bytes[..6].copy_from_slice(&*PROCESS);
    bytes[6..].copy_from_slice(&n.to_be_bytes()[2..]);
    HeaderValue::from_str(&dropslot_core::ids::hex(&bytes)).unwrap_or_else(|_| HeaderValue::from_static("0"))
}

fn with_id(mut res: Response<Body>, id: &HeaderValue) -> Response<Body> {
    res.headers_mut().insert("x-request-id", id.clone());
    res
}

/// A complete HTTP/1.1 response with the error envelope, written straight to a socket.
fn raw_response(status: StatusCode, message: &str) -> Vec<u8> {
    let body = crate::error::error_json(status.as_u16(), message, &crate::error::FieldErrors::new());
    let id = new_request_id();
    let retry = if status == StatusCode::SERVICE_UNAVAILABLE { "retry-after: 1\r\n" } else { "" };
    format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nx-request-id: {}\r\n{retry}connection: close\r\n\r\n{body}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len(),
        id.to_str().unwrap_or("0"),
    )
    .into_bytes()
}

/// The envelope that replaces hyper's empty answer to a request it could not parse.
fn protocol_error(head: &[u8]) -> Vec<u8> {
    let code = std::str::from_utf8(&head[9..12]).ok().and_then(|c| c.parse::<u16>().ok()).unwrap_or(400);
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_REQUEST);
    let message = match status {
        StatusCode::URI_TOO_LONG => "The request URI is too long.",
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => "The request headers are too large.",
        _ => "The request is not valid HTTP/1.1 (request line or headers could not be parsed).",
    };
    raw_response(status, message)
}

/// The connection's socket, watched: reads and writes feed the watchdog, and hyper's own
/// error responses are replaced by the envelope.
struct Watched {
    inner: TcpStream,
    watch: Arc<Watch>,
    /// A replacement being written: (bytes, written so far, length of hyper's buffer).
    rewrite: Option<(Vec<u8>, usize, usize)>,
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.watch.read();
        }
        res
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // hyper writes a response head at the start of a buffer (writes are flattened: this
        // type is not vectored). A head that no request produced is hyper's parse error.
        let head = buf.len() >= 12 && buf.starts_with(b"HTTP/1.") && buf[9] != b'1';
        if this.rewrite.is_none() && head && !this.watch.take_response() {
            this.rewrite = Some((protocol_error(buf), 0, buf.len()));
        }
        if let Some((bytes, written, original)) = &mut this.rewrite {
            while *written < bytes.len() {
                match Pin::new(&mut this.inner).poll_write(cx, &bytes[*written..]) {
                    Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                    Poll::Ready(Ok(n)) => *written += n,
                    Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                    Poll::Pending => return Poll::Pending,
                }
            }
            let original = *original;
            this.rewrite = None;
            return Poll::Ready(Ok(original));
        }
        let res = Pin::new(&mut this.inner).poll_write(cx, buf);
        if matches!(res, Poll::Ready(Ok(n)) if n > 0) {
            this.watch.wrote();
        }
        res
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> NetLimits {
        NetLimits {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1,
            linger_bytes: 1 << 20,
        }
    }

    /// The watchdog's looks, at chosen instants (no waiting): an idle connection closes at
    /// its deadline unless a response was still being written since the previous look, which
    /// gives it one more idle period; the write that follows every answer does not count once
    /// a look has passed; a request with the application is never closed by the watchdog.
    #[test]
    fn the_watchdog_closes_idle_connections_unless_a_response_is_still_being_written() {
        let w = Watch::new(limits());
        assert!(w.tick() <= Duration::from_secs(10), "a look at least every header timeout");
        w.begin();
        assert!(!w.expired(w.deadline() + Duration::from_secs(3600)), "busy: never the watchdog's");
        w.end();
        w.wrote(); // the answer's bytes, right after it
        let due = w.deadline();
        assert!(!w.expired(due - Duration::from_secs(30)), "before the deadline");
        assert!(w.expired(due), "no write since the last look: closed at the deadline");
        // A slow reader: bytes left since the last look, so another idle period.
        w.wrote();
        assert!(!w.expired(due));
        assert!(w.deadline() >= due);
        assert!(w.expired(w.deadline()), "and closed at the next deadline with no write since");
        // The first bytes of a request move the deadline to the header timeout.
        w.read();
        assert!(w.deadline() <= Instant::now() + Duration::from_secs(10));
        assert!(w.expired(w.deadline()), "a head not finished in time");
    }

    #[test]
    fn protocol_errors_become_envelopes() {
        let raw = protocol_error(b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n");
        let text = String::from_utf8(raw).unwrap();
        assert!(text.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{text}");
        assert!(text.contains("\r\nx-request-id: "), "{text}");
        let body: serde_json::Value = serde_json::from_str(text.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(body["code"], 431);
        assert_eq!(body["status"], "error");
    }
}
