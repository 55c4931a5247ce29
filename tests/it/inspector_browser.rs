//! The inspector in a real browser: headless Chromium driven through
//! chromedriver's WebDriver HTTP API (a few plain requests). Skipped, with
//! a message, where Chromium or chromedriver is not installed (Debian:
//! `apt-get install chromium chromium-driver`; `.ci/run` installs them).
//!
//! `cargo test --test inspector_browser -- --ignored` also writes the
//! docs' screenshot, `docs/inspector.png`.

use crate::common;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::inspector::*;
use crate::common::Proxy;
use serde_json::{json, Value};

/// Where Debian installs them; `CODEMODE_CHROMIUM` and
/// `CODEMODE_CHROMEDRIVER` name others.
fn binaries() -> Option<(String, String)> {
    let chromium =
        std::env::var("CODEMODE_CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into());
    let driver =
        std::env::var("CODEMODE_CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
    let present = PathBuf::from(&chromium).exists() && PathBuf::from(&driver).exists();
    common::needs::needs(
        present,
        &format!("Chromium and chromedriver ({chromium}, {driver}; or set CODEMODE_CHROMIUM and CODEMODE_CHROMEDRIVER)"),
        "apt-get install chromium chromium-driver",
    )
    .then_some((chromium, driver))
}

/// chromedriver, serving WebDriver on a port of its own until dropped.
struct Driver {
    child: Child,
    base: String,
    chromium: String,
    profile: PathBuf,
    http: reqwest::Client,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

impl Driver {
    async fn start() -> Option<Driver> {
        let (chromium, driver) = binaries()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let profile = std::env::temp_dir().join(format!(
            "codemode-inspector-chromium-{}-{port}",
            std::process::id()
        ));
        let d = Driver {
            child,
            base: format!("http://127.0.0.1:{port}"),
            chromium,
            profile,
            http: crate::common::http_client(),
        };
        let started = Instant::now();
        loop {
            let ready = d.http.get(format!("{}/status", d.base)).send().await;
            if let Ok(res) = ready {
                let v: Value = res.json().await.unwrap_or_default();
                if v["value"]["ready"] == true {
                    return Some(d);
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "chromedriver did not start"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A fresh browser: its own profile, flags that keep it off the
    /// (closed) network.
    async fn session(&self, width: u32, height: u32) -> Session<'_> {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--hide-scrollbars",
        ];
        let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        args.push(format!("--user-data-dir={}", self.profile.display()));
        args.push(format!("--window-size={width},{height}"));
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": self.chromium, "args": args},
        }}});
        let res = self
            .http
            .post(format!("{}/session", self.base))
            .json(&caps)
            .send()
            .await
            .unwrap();
        let v: Value = res.json().await.unwrap();
        let id = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {v}"))
            .to_owned();
        Session { driver: self, id }
    }
}

/// One browser window.
struct Session<'a> {
    driver: &'a Driver,
    id: String,
}

impl Session<'_> {
    async fn command(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let url = format!("{}/session/{}{path}", self.driver.base, self.id);
        let mut req = self.driver.http.request(method, url);
        if body != Value::Null {
            req = req.json(&body);
        }
        let v: Value = req.send().await.unwrap().json().await.unwrap();
        v["value"].clone()
    }

    async fn open(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", json!({"url": url}))
            .await;
    }

    /// Runs `script` (a function body) in the page; its return value.
    async fn eval(&self, script: &str) -> Value {
        self.command(
            reqwest::Method::POST,
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    /// Runs `script` until it returns something truthy; that value.
    async fn wait_for(&self, what: &str, script: &str) -> Value {
        let started = Instant::now();
        loop {
            let v = self.eval(script).await;
            if !(v.is_null() || v == false || v == "") {
                return v;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the page never showed {what}; it shows: {}",
                self.eval("return document.body.innerText").await
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn screenshot(&self) -> Vec<u8> {
        let v = self
            .command(reqwest::Method::GET, "/screenshot", Value::Null)
            .await;
        base64_decode(v.as_str().expect("a screenshot"))
    }

    async fn close(self) {
        self.command(reqwest::Method::DELETE, "", Value::Null).await;
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let clean: Vec<u8> = text
        .bytes()
        .filter(|c| !matches!(c, b'=' | b'\n' | b'\r'))
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= u32::from(value(*c)) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

async fn signed_in(session: &Session<'_>, proxy: &Proxy) {
    session
        .open(&proxy.url(&format!("/codemode/inspector?token={TOKEN}")))
        .await;
    session
        .wait_for(
            "that it is live",
            "return document.getElementById('live')?.textContent === 'live'",
        )
        .await;
    let url = session.eval("return location.href").await;
    assert_eq!(
        url,
        proxy.url("/codemode/inspector"),
        "the token left the address bar"
    );
}

#[tokio::test]
async fn the_page_shows_a_program_with_its_calls_as_it_runs_without_a_reload() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let p = program_model(Api::Chat).await;
    let proxy = inspected_proxy(&p, &[]).await;
    let session = driver.session(1440, 1000).await;
    signed_in(&session, &proxy).await;
    session
        .eval("window.stillTheSamePage = true; return true")
        .await;
    let rows = session
        .eval("return document.querySelectorAll('#executions tbody tr').length")
        .await;
    assert_eq!(rows, 0);

    run_program(&proxy, Api::Chat, &[("x-codemode-scope", "browser")]).await;

    let row = session
        .wait_for(
            "the program, finished, with its calls",
            "const r = document.querySelector('#executions tbody tr'); \
             return r && r.innerText.includes('finished') && r.innerText.includes('read ×2') && r.innerText",
        )
        .await;
    assert!(row.as_str().unwrap().contains("browser"), "{row}");
    session
        .eval("document.querySelector('#executions tbody tr').click(); return true")
        .await;
    let detail = session
        .wait_for(
            "the execution opened",
            "const d = document.getElementById('detail'); \
             return d.querySelectorAll('table.calls tbody tr').length === 2 && d.innerText",
        )
        .await;
    let detail = detail.as_str().unwrap();
    assert!(detail.contains("console.log('read two files')"), "{detail}");
    assert!(detail.contains("return a + ' ' + b;"), "{detail}");
    let tools = session
        .eval("return [...document.querySelectorAll('#detail table.calls tbody tr')].map(r => r.dataset.tool)")
        .await;
    assert_eq!(tools, json!(["read", "read"]));
    assert!(!detail.contains("alpha-secret"), "no payloads unless asked");
    assert_eq!(
        session
            .eval("return window.stillTheSamePage === true")
            .await,
        true,
        "the page was not reloaded"
    );

    // What the model sees, for a Responses body.
    session
        .eval(
            "document.querySelector('nav button[data-tab=dryrun]').click(); \
             document.querySelector('button[data-example=responses]').click(); \
             document.getElementById('dryrun').requestSubmit(); return true",
        )
        .await;
    let out = session
        .wait_for(
            "the dry run",
            "const o = document.getElementById('dryrun-out').textContent; return o.includes('Tools on the wire') && o",
        )
        .await;
    let out = out.as_str().unwrap();
    assert!(out.contains("dialect responses"), "{out}");
    assert!(out.contains("run_code (function)"), "{out}");
    assert!(out.contains("declare const tools"), "the SDK: {out}");
    session.close().await;
}

#[tokio::test]
async fn without_the_token_the_page_asks_for_it_and_shows_no_data() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let p = program_model(Api::Chat).await;
    let proxy = inspected_proxy(&p, &[]).await;
    run_program(&proxy, Api::Chat, &[]).await;
    let session = driver.session(1200, 800).await;
    for path in [
        "/codemode/inspector",
        "/codemode/inspector?token=not-the-token-0000000000",
    ] {
        session.open(&proxy.url(path)).await;
        let page = session
            .wait_for(
                "the login form",
                "return document.querySelector('input[name=token]') && document.body.innerText",
            )
            .await;
        let page = page.as_str().unwrap();
        assert!(page.contains("CODEMODE_ADMIN_TOKEN"), "{page}");
        assert!(!page.contains("read"), "no data: {page}");
        let tables = session
            .eval("return document.querySelectorAll('table').length")
            .await;
        assert_eq!(tables, 0);
    }
    let status = session
        .eval("const r = new XMLHttpRequest(); r.open('GET', '/codemode/api/executions', false); r.send(); return r.status")
        .await;
    assert_eq!(
        status, 401,
        "the API stays closed to the page without a session"
    );
    session.close().await;
}

/// Writes `docs/inspector.png`: three programs (one per dialect) and a
/// repaired denial, one program open.
#[tokio::test]
#[ignore = "writes docs/inspector.png; run with --ignored"]
async fn writes_the_docs_screenshot() {
    let Some(driver) = Driver::start().await else {
        return;
    };
    let server = all_models().await;
    let proxy = inspected_proxy(&server, &[]).await;
    run_program(&proxy, Api::Chat, &[("x-codemode-scope", "ci-agent")]).await;
    let body = json!({"model": "gpt-test", "messages": [{"role": "user", "content": "Read a.txt"}],
                      "tools": common::agent::fs_tools()});
    let res = proxy.chat(&body, &[("x-codemode-scope", "ci-agent")]).await;
    assert_eq!(res.status(), 200);
    run_program(
        &proxy,
        Api::Messages,
        &[("x-codemode-scope", "claude-code")],
    )
    .await;
    run_program(&proxy, Api::Responses, &[("x-codemode-scope", "codex")]).await;
    let session = driver.session(1440, 1040).await;
    signed_in(&session, &proxy).await;
    session
        .wait_for(
            "three finished programs",
            "return [...document.querySelectorAll('#executions tbody tr')].filter(r => r.innerText.includes('finished')).length === 3",
        )
        .await;
    session
        .eval("document.querySelector('#executions tbody tr[data-id=\"3\"]').click(); return true")
        .await;
    session
        .wait_for(
            "the execution opened",
            "return document.querySelectorAll('#detail table.calls tbody tr').length === 2",
        )
        .await;
    let png = session.screenshot().await;
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/inspector.png");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, png).unwrap();
    eprintln!("wrote {}", path.display());
    session.close().await;
}
