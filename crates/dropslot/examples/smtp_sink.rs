//! A minimal SMTP sink for `scripts/notify-bench.sh`: it accepts every message and writes one
//! JSON line per message (`{"message_id": …, "rcpt_tos": […]}`, the format of the tests' aiosmtpd
//! server in `--light` mode) to the log file, flushed before its "250". It exists because the
//! aiosmtpd server takes ~170 messages/s and most of a core: on this 2-core machine it measured
//! itself, not dropslot. This one costs a few microseconds a message, as a remote relay would
//! cost the service's machine nothing.
//!
//! ```text
//! cargo run --release -p dropslot --example smtp_sink -- 127.0.0.1:2525 /tmp/smtp.jsonl
//! ```
//!
//! Prints `ready` once it listens. Plain SMTP only (no TLS, no AUTH); loopback only; every
//! read is bounded (a line by 64 KiB, a message by 10 MiB, an idle connection by 60 s).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const IDLE: Duration = Duration::from_secs(60);
const MAX_LINE: usize = 64 * 1024;
const MAX_MESSAGE: usize = 10 * 1024 * 1024;

type Log = Arc<Mutex<std::fs::File>>;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(path)) = (args.next(), args.next()) else {
        eprintln!("usage: smtp_sink ADDR:PORT LOG");
        std::process::exit(2);
    };
    let listener = TcpListener::bind(&addr).await.expect("the address binds");
    assert!(listener.local_addr().unwrap().ip().is_loopback(), "loopback only");
    let file = std::fs::OpenOptions::new().create(true).append(true).open(&path).expect("the log opens");
    let log: Log = Arc::new(Mutex::new(file));
    println!("ready");
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let log = log.clone();
        tokio::spawn(async move {
            let _ = session(stream, log).await;
        });
    }
}

/// One line (CRLF included), bounded in size and time; `None` at EOF.
async fn line(r: &mut BufReader<tokio::net::tcp::OwnedReadHalf>, buf: &mut Vec<u8>) -> std::io::Result<Option<()>> {
    buf.clear();
    let n = tokio::time::timeout(IDLE, r.read_until(b'\n', buf))
        .await
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "idle"))??;
    if n == 0 {
        return Ok(None);
    }
    if buf.len() > MAX_LINE {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "line too long"));
    }
    Ok(Some(()))
}

async fn session(stream: TcpStream, log: Log) -> std::io::Result<()> {
    let (r, mut w) = stream.into_split();
    let mut r = BufReader::new(r);
    w.write_all(b"220 sink ESMTP\r\n").await?;
    let mut buf = Vec::with_capacity(1024);
    let mut rcpts: Vec<String> = Vec::new();
    while line(&mut r, &mut buf).await?.is_some() {
        let text = String::from_utf8_lossy(&buf);
        let verb = text.get(..4).unwrap_or("").to_ascii_uppercase();
        match verb.as_str() {
            "EHLO" => w.write_all(b"250-sink\r\n250-8BITMIME\r\n250 PIPELINING\r\n").await?,
            "HELO" | "NOOP" => w.write_all(b"250 OK\r\n").await?,
            "MAIL" | "RSET" => {
                rcpts.clear();
                w.write_all(b"250 OK\r\n").await?;
            }
            "RCPT" => {
                let to = text.split_once('<').and_then(|(_, rest)| rest.split_once('>')).map(|(a, _)| a.to_string());
                rcpts.push(to.unwrap_or_default());
                w.write_all(b"250 OK\r\n").await?;
            }
            "DATA" => {
                w.write_all(b"354 End data with <CR><LF>.<CR><LF>\r\n").await?;
                let mut id = String::new();
                let mut size = 0;
                let mut in_headers = true;
                loop {
                    if line(&mut r, &mut buf).await?.is_none() {
                        return Ok(());
                    }
                    size += buf.len();
                    if size > MAX_MESSAGE {
                        w.write_all(b"552 Message too large\r\n").await?;
                        return Ok(());
                    }
                    if buf == b".\r\n" {
                        break;
                    }
                    if in_headers {
                        if buf == b"\r\n" {
                            in_headers = false;
                        } else if buf.len() > 11 && buf[..11].eq_ignore_ascii_case(b"message-id:") {
                            id = String::from_utf8_lossy(&buf[11..]).trim().to_string();
                        }
                    }
                }
                let record = serde_json::json!({"message_id": id, "rcpt_tos": rcpts});
                {
                    let mut f = log.lock().unwrap();
                    writeln!(f, "{record}")?;
                }
                rcpts.clear();
                w.write_all(b"250 OK queued\r\n").await?;
            }
            "QUIT" => {
                w.write_all(b"221 Bye\r\n").await?;
                return Ok(());
            }
            _ => w.write_all(b"502 Command not implemented\r\n").await?,
        }
    }
    Ok(())
}
