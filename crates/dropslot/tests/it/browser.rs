//! A real browser for the tests: Debian's `chromium`, driven through `chromedriver` with
//! `fantoccini`, headless, one private instance per test. `scripts/test-deps.sh` installs
//! both and `axe-core` (npm), which [`Browser::assert_accessible`] injects into the page.
//!
//! Every wait is bounded: chromedriver must say it started within 20 s, chromium within 30 s,
//! a page must load and a script (axe's run) finish within 20 s, and an element must appear
//! within 10 s. Dropping a `Browser` ends its chromium and chromedriver. Browser tests are
//! named `browser_*`: `.config/nextest.toml` runs at most two at once and ends one after 60 s.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// A desktop window and a phone-sized one (an iPhone 12's CSS pixels).
pub const DESKTOP: (u32, u32) = (1280, 900);
pub const PHONE: (u32, u32) = (390, 844);

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
const ELEMENT_WAIT: Duration = Duration::from_secs(10);

pub struct Browser {
    client: Client,
    driver: Child,
    size: (u32, u32),
    /// chromedriver's endpoint for Chrome `DevTools` commands in this session.
    cdp: String,
}

/// Where `scripts/test-deps.sh` puts axe-core (`DROPSLOT_AXE_JS` overrides it).
fn axe_path() -> PathBuf {
    std::env::var_os("DROPSLOT_AXE_JS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/browser-deps/node_modules/axe-core/axe.min.js"),
        PathBuf::from,
    )
}

/// Starts chromedriver on a free port and waits for its "started" line. The port is free
/// when picked but another process may take it before chromedriver binds it: a chromedriver
/// that exits at once is started again on another port, three times at most.
fn start_driver() -> (Child, u16) {
    assert!(
        std::path::Path::new(CHROMEDRIVER).exists() && std::path::Path::new(CHROMIUM).exists(),
        "{CHROMEDRIVER} and {CHROMIUM} are missing: run scripts/test-deps.sh"
    );
    for _ in 0..3 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let mut driver = Command::new(CHROMEDRIVER)
            .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let stdout = driver.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads chromedriver's output to its end (so it never blocks on a full pipe); the
        // channel closes when chromedriver exits.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("started successfully") {
                    let _ = tx.send(());
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(()) => return (driver, port),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                let _ = driver.kill();
                let _ = driver.wait();
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                let _ = driver.kill();
                let _ = driver.wait();
                panic!("chromedriver did not start within 20 s");
            }
        }
    }
    panic!("chromedriver exited at start three times (port taken?)");
}

/// The element was replaced by a script between finding and using it.
fn stale(e: &fantoccini::error::CmdError) -> bool {
    matches!(e, fantoccini::error::CmdError::Standard(w) if w.error == fantoccini::error::ErrorStatus::StaleElementReference)
}

impl Browser {
    /// A fresh headless chromium with a window of `(width, height)` CSS pixels.
    pub async fn start(size: (u32, u32)) -> Browser {
        Self::start_with(size, &[]).await
    }

    /// Like [`Browser::start`], with more chromium switches (a fake camera, for one).
    pub async fn start_with((width, height): (u32, u32), extra: &[String]) -> Browser {
        let (driver, port) = start_driver();
        let mut caps = serde_json::Map::new();
        let mut args: Vec<String> = [
            "--headless=new",
            "--no-sandbox",
            "--disable-dev-shm-usage",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--hide-scrollbars",
        ]
        .map(String::from)
        .to_vec();
        args.push(format!("--window-size={width},{height}"));
        args.extend(extra.iter().cloned());
        caps.insert("goog:chromeOptions".into(), json!({"binary": CHROMIUM, "args": args}));
        // W3C timeouts: a page load or a script (axe's run) that takes longer fails the test
        // instead of hanging it.
        caps.insert("timeouts".into(), json!({"pageLoad": 20_000, "script": 20_000, "implicit": 0}));
        let mut builder = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
        builder.capabilities(caps);
        let url = format!("http://127.0.0.1:{port}");
        let client = tokio::time::timeout(Duration::from_secs(30), builder.connect(&url))
            .await
            .expect("chromium starts within 30 s")
            .expect("a WebDriver session");
        let session = client.session_id().await.expect("session id").expect("a session");
        let cdp = format!("{url}/session/{session}/goog/cdp/execute");
        let browser = Browser { client, driver, size: (width, height), cdp };
        browser.viewport(height).await;
        browser
    }

    /// Sends a Chrome `DevTools` command to the page (network conditions, input events).
    pub async fn cdp(&self, cmd: &str, params: Value) -> Value {
        let res = reqwest::Client::new()
            .post(&self.cdp)
            .json(&json!({"cmd": cmd, "params": params}))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .expect("chromedriver answers");
        let ok = res.status().is_success();
        let body: Value = res.json().await.unwrap_or_default();
        assert!(ok, "{cmd}: {body}");
        body["value"].clone()
    }

    /// Clicks `css` on this page (no new page expected). An element that a script redrew
    /// between finding and clicking it is found again (three times at most).
    pub async fn tap(&self, css: &str) {
        for _ in 0..3 {
            match self.find(css).await.click().await {
                Ok(()) => return,
                Err(e) if stale(&e) => {}
                Err(e) => panic!("tap {css}: {e}"),
            }
        }
        panic!("tap {css}: redrawn three times under the click");
    }

    /// Waits until the script `condition` (an expression) is true on the page, within 10 s.
    pub async fn wait_until(&self, condition: &str) {
        let deadline = std::time::Instant::now() + ELEMENT_WAIT;
        let script = format!("try {{ return !!({condition}); }} catch (e) {{ return false; }}");
        loop {
            if matches!(self.client.execute(&script, vec![]).await, Ok(Value::Bool(true))) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "not true within 10 s on {}: {condition}",
                self.current_url().await
            );
            tokio::task::yield_now().await;
        }
    }

    /// Runs the asynchronous script `script` (it calls `done(value)`, the last argument).
    pub async fn eval_async(&self, script: &str) -> Value {
        let wrapped = format!("const done = arguments[arguments.length - 1]; {script}");
        self.client.execute_async(&wrapped, vec![]).await.unwrap_or_else(|e| panic!("script {script}: {e}"))
    }

    /// Emulates a viewport of this browser's width and `height` CSS pixels (a headless
    /// window cannot be narrower than 500 px, so a phone is emulated, as a phone: touch
    /// and the mobile viewport rules).
    async fn viewport(&self, height: u32) {
        let (width, _) = self.size;
        let params = json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600});
        let res = reqwest::Client::new()
            .post(&self.cdp)
            .json(&json!({"cmd": "Emulation.setDeviceMetricsOverride", "params": params}))
            .timeout(Duration::from_secs(10))
            .send()
            .await
            .expect("chromedriver answers");
        assert!(res.status().is_success(), "set the viewport: {}", res.text().await.unwrap_or_default());
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    pub async fn current_url(&self) -> String {
        self.client.current_url().await.expect("current URL").to_string()
    }

    async fn find(&self, css: &str) -> fantoccini::elements::Element {
        match self.client.wait().at_most(ELEMENT_WAIT).for_element(Locator::Css(css)).await {
            Ok(e) => e,
            Err(e) => panic!("no element {css} on {}: {e}", self.current_url().await),
        }
    }

    /// Types `text` into the input `css` (cleared first). An input that a script redrew
    /// meanwhile is found again (three times at most).
    pub async fn fill(&self, css: &str, text: &str) {
        for _ in 0..3 {
            let e = self.find(css).await;
            match e.clear().await {
                Ok(()) => {}
                Err(err) if stale(&err) => continue,
                Err(err) => panic!("clear {css}: {err}"),
            }
            match e.send_keys(text).await {
                Ok(()) => return,
                Err(err) if stale(&err) => {}
                Err(err) => panic!("type into {css}: {err}"),
            }
        }
        panic!("type into {css}: redrawn three times meanwhile");
    }

    /// Sends keys to the element `css` as a person types them (`WebDriver`'s key codes:
    /// `\u{E015}` is the down arrow, `\u{E00D}` the space bar).
    pub async fn keys(&self, css: &str, keys: &str) {
        self.find(css).await.send_keys(keys).await.unwrap_or_else(|e| panic!("keys to {css}: {e}"));
    }

    /// Chooses the file at `path` in the file input `css`.
    pub async fn choose_file(&self, css: &str, path: &std::path::Path) {
        let path = path.to_str().expect("a UTF-8 path");
        self.find(css).await.send_keys(path).await.unwrap_or_else(|e| panic!("choose {path} in {css}: {e}"));
    }

    /// Chooses the option with `value` in the select `css`.
    pub async fn select(&self, css: &str, value: &str) {
        self.find(css).await.select_by_value(value).await.unwrap_or_else(|e| panic!("select {value} in {css}: {e}"));
    }

    /// Clicks the link or submit button `css`, and returns once the page it leads to has
    /// loaded (a new document, fully parsed), within a bound.
    pub async fn click(&self, css: &str) {
        let target = self.find(css).await;
        self.eval("window.__dropslot_old_page = true; return true").await;
        target.click().await.unwrap_or_else(|e| panic!("click {css}: {e}"));
        let deadline = std::time::Instant::now() + ELEMENT_WAIT;
        loop {
            // The old document's marker is gone once the new one is there (a script error
            // while the page is being replaced counts as "not yet").
            let ready = self
                .client
                .execute(
                    "return window.__dropslot_old_page === undefined && document.readyState === 'complete'",
                    vec![],
                )
                .await;
            if matches!(ready, Ok(Value::Bool(true))) {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "clicking {css} led to no new page");
            tokio::task::yield_now().await;
        }
    }

    /// The visible text of `css`.
    pub async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.expect("text")
    }

    pub async fn attr(&self, css: &str, name: &str) -> String {
        self.find(css).await.attr(name).await.expect("attribute").unwrap_or_default()
    }

    /// How many elements `css` matches now (no waiting).
    pub async fn count(&self, css: &str) -> usize {
        self.client.find_all(Locator::Css(css)).await.expect("find_all").len()
    }

    /// Runs `script` (a function body; `return` gives the value) in the page.
    pub async fn eval(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.unwrap_or_else(|e| panic!("script {script}: {e}"))
    }

    /// The axe-core violations of serious or critical impact on the current page.
    pub async fn violations(&self) -> Vec<Value> {
        let path = axe_path();
        let source = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (scripts/test-deps.sh installs axe-core)", path.display()));
        self.client.execute(&source, vec![]).await.expect("axe-core loads");
        let run = "const done = arguments[arguments.length - 1];
                   axe.run(document, {resultTypes: ['violations']})
                      .then(r => done(r.violations))
                      .catch(e => done([{id: 'axe-error', impact: 'critical', help: String(e), nodes: []}]));";
        let found = self.client.execute_async(run, vec![]).await.expect("axe.run answers");
        found
            .as_array()
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
            .collect()
    }

    /// Fails with a readable list when the page has a serious or critical axe violation.
    pub async fn assert_accessible(&self, page: &str) {
        let bad = self.violations().await;
        let lines: Vec<String> = bad
            .iter()
            .map(|v| {
                let targets: Vec<String> =
                    v["nodes"].as_array().into_iter().flatten().map(|n| n["target"].to_string()).collect();
                format!("{} ({}): {} at {}", v["id"], v["impact"], v["help"], targets.join(", "))
            })
            .collect();
        assert!(lines.is_empty(), "{page}: accessibility violations:\n{}", lines.join("\n"));
    }

    /// With `DROPSLOT_SCREENSHOTS=<folder>`, saves the whole page as `<folder>/<name>.png`
    /// (the window grows to the page's height for the shot); otherwise does nothing.
    pub async fn screenshot(&self, name: &str) {
        let Some(dir) = std::env::var_os("DROPSLOT_SCREENSHOTS") else { return };
        let height = self.eval("return document.documentElement.scrollHeight").await.as_u64().unwrap_or(900) as u32;
        let (_, h) = self.size;
        self.viewport(height.clamp(h, 6000)).await;
        let png = self.client.screenshot().await.expect("screenshot");
        self.viewport(h).await;
        let path = PathBuf::from(dir).join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

impl Drop for Browser {
    /// Ends chromium (chromedriver's children) and chromedriver itself.
    fn drop(&mut self) {
        let pid = self.driver.id().to_string();
        let _ = Command::new("pkill").args(["-KILL", "-P", &pid]).status();
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
