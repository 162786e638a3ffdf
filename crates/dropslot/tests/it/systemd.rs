//! `serve` under systemd's `Type=notify`: the real binary tells a datagram socket standing in
//! for the service manager `READY=1` once `/readyz` answers 200, and `STOPPING=1` on SIGTERM.

use std::os::unix::net::UnixDatagram;
use std::process::Command;
use std::time::{Duration, Instant};

/// The next notification, waited for at most 30 s.
fn next_notification(socket: &UnixDatagram) -> String {
    socket.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut buf = [0u8; 4096];
    let n = socket.recv(&mut buf).expect("a notification within 30 s");
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn serve_notifies_systemd_when_ready_and_when_stopping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    let test_db = crate::common::TestDb::fresh();
    let notify = path.display().to_string();
    let (child, base, _) = crate::cli::spawn_serve_with(&test_db.url(), &[("NOTIFY_SOCKET", &notify)]);
    let mut serve = crate::cli::Serve(child);

    let ready = next_notification(&socket);
    assert!(ready.lines().any(|l| l == "READY=1"), "{ready:?}");
    assert!(ready.lines().any(|l| l.starts_with("STATUS=listening on http://127.0.0.1:")), "{ready:?}");
    // At the moment READY=1 arrives, readiness already holds.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let status = rt.block_on(async { reqwest::get(format!("{base}/readyz")).await.unwrap().status() });
    assert_eq!(status, 200);

    let pid = serve.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert_eq!(next_notification(&socket).trim_end(), "STOPPING=1");
    let deadline = Instant::now() + Duration::from_secs(15);
    while serve.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "serve did not stop after SIGTERM");
        std::thread::park_timeout(Duration::from_millis(50));
    }
}
