//! The fetch stage through the binary: local inputs, corrupt CSVs, and downloads from HTTP
//! servers on 127.0.0.1 that each test starts itself (good, wrong hash, truncated, 404, 500
//! then success, stall, redirects, the Hugging Face layout via HF_ENDPOINT).

use fs_err as fs;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn dark_triad() -> Vec<u8> {
    fs::read(repo().join("data/jobcannon/dark_triad.csv")).unwrap()
}

// ---------------------------------------------------------------- loopback HTTP server

/// What the test server does with one request.
#[derive(Clone)]
enum Reply {
    Ok(Vec<u8>),
    Status(u16),
    /// Announce `declared` bytes, send `body`, close.
    Truncated {
        body: Vec<u8>,
        declared: usize,
    },
    Redirect(String),
    /// Accept and send nothing for this long.
    Stall(Duration),
}

struct Server {
    addr: SocketAddr,
    paths: Arc<Mutex<Vec<String>>>,
}

impl Server {
    fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }
    fn hits(&self) -> usize {
        self.paths.lock().unwrap().len()
    }
}

/// Serve on `ip`:0. The handler sees the 0-based request count and the path. The server
/// stops by itself after 64 connections or 60 seconds.
fn serve(ip: &str, handler: impl Fn(usize, &str) -> Reply + Send + 'static) -> Server {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let addr = listener.local_addr().unwrap();
    listener.set_nonblocking(true).unwrap();
    let paths = Arc::new(Mutex::new(Vec::new()));
    let seen = paths.clone();
    thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        let count = AtomicUsize::new(0);
        while Instant::now() < deadline && count.load(Ordering::SeqCst) < 64 {
            match listener.accept() {
                Ok((stream, _)) => {
                    let n = count.fetch_add(1, Ordering::SeqCst);
                    let Some(path) = read_request_path(&stream) else {
                        continue;
                    };
                    seen.lock().unwrap().push(path.clone());
                    let reply = handler(n, &path);
                    thread::spawn(move || answer(stream, reply));
                }
                Err(_) => thread::sleep(Duration::from_millis(5)),
            }
        }
    });
    Server { addr, paths }
}

fn read_request_path(stream: &TcpStream) -> Option<String> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let mut r = BufReader::new(stream);
    let mut first = String::new();
    r.read_line(&mut first).ok()?;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).ok()? == 0 || line == "\r\n" {
            break;
        }
    }
    first.split_whitespace().nth(1).map(str::to_string)
}

fn answer(mut s: TcpStream, reply: Reply) {
    let head = |status: &str, len: usize, extra: &str| {
        format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\n{extra}Connection: close\r\n\r\n")
    };
    let _ = match reply {
        Reply::Ok(body) => s
            .write_all(head("200 OK", body.len(), "").as_bytes())
            .and_then(|_| s.write_all(&body)),
        Reply::Status(code) => {
            let reason = match code {
                404 => "Not Found",
                500 => "Internal Server Error",
                _ => "Whatever",
            };
            s.write_all(head(&format!("{code} {reason}"), 2, "").as_bytes())
                .and_then(|_| s.write_all(b"no"))
        }
        Reply::Truncated { body, declared } => s
            .write_all(head("200 OK", declared, "").as_bytes())
            .and_then(|_| s.write_all(&body)),
        Reply::Redirect(to) => {
            s.write_all(head("302 Found", 0, &format!("Location: {to}\r\n")).as_bytes())
        }
        Reply::Stall(d) => {
            thread::sleep(d);
            Ok(())
        }
    };
    let _ = s.flush();
}

// ---------------------------------------------------------------- running the binary

struct Env {
    dir: tempfile::TempDir,
}

impl Env {
    fn new() -> Env {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("data")).unwrap();
        fs::write(dir.path().join("data/dark_triad.csv"), dark_triad()).unwrap();
        Env { dir }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// Write pipeline.toml with the given [fetch] body and inputs, and run `fetch`.
    fn fetch(&self, fetch: &str, inputs: &str, hf_endpoint: Option<&str>) -> Output {
        let text = format!("[study]\nname = \"test\"\n\n[fetch]\n{fetch}\n\n{inputs}");
        fs::write(self.path("pipeline.toml"), text).unwrap();
        let mut c = Command::new(env!("CARGO_BIN_EXE_protospread"));
        c.arg("--config")
            .arg(self.path("pipeline.toml"))
            .arg("--out")
            .arg(self.path("out"))
            .arg("--json")
            .arg("fetch")
            .env_remove("HF_ENDPOINT");
        if let Some(e) = hf_endpoint {
            c.env("HF_ENDPOINT", e);
        }
        c.output().unwrap()
    }
}

/// `[[inputs]]` for the local copy of dark_triad.csv.
fn local_input() -> String {
    format!(
        "[[inputs]]\nname = \"local_dt\"\nrole = \"human\"\ninstrument = \"dark_triad\"\npath = \"data/dark_triad.csv\"\nsha256 = \"{}\"\n",
        sha(&dark_triad())
    )
}

fn url_input(name: &str, instrument: &str, url: &str, sha256: &str) -> String {
    format!(
        "[[inputs]]\nname = \"{name}\"\nrole = \"human\"\ninstrument = \"{instrument}\"\nurl = \"{url}\"\nsha256 = \"{sha256}\"\n"
    )
}

const FAST: &str = "timeout_seconds = 2\nretries = 2";

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    assert!(o.status.success(), "fetch failed: {}", stderr(o));
    // `--json` prints one object with one member per command.
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["fetch"].clone()
}

/// Every file below `dir` (dot files included) with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    if !dir.exists() {
        return m;
    }
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                m.insert(
                    format!("{}/", p.strip_prefix(dir).unwrap().display()),
                    vec![],
                );
                stack.push(p);
            } else {
                m.insert(
                    p.strip_prefix(dir).unwrap().display().to_string(),
                    fs::read(&p).unwrap(),
                );
            }
        }
    }
    m
}

/// A prepared folder: one good run with a local input and one download, so that both
/// out/fetch and the cache hold something a bad run must leave alone.
fn prepared() -> (Env, String) {
    let env = Env::new();
    let eq = fs::read(repo().join("data/jobcannon/eq.csv")).unwrap();
    let eq_sha = sha(&eq);
    let good = serve("127.0.0.1", move |_, _| Reply::Ok(eq.clone()));
    let inputs = format!(
        "{}{}",
        local_input(),
        url_input("eq_remote", "eq", &good.url("/eq.csv"), &eq_sha)
    );
    json(&env.fetch(FAST, &inputs, None));
    assert!(env.path(&format!("out/cache/{eq_sha}/eq.csv")).is_file());
    // Later runs keep the cached eq input (no server needed any more) and add a bad one.
    (env, inputs)
}

/// Run a failing fetch on a prepared folder: non-zero exit, one error line naming the input
/// and containing `needles`, cache and outputs byte-identical.
fn assert_fails_cleanly(env: &Env, fetch: &str, inputs: &str, hf: Option<&str>, needles: &[&str]) {
    let before_out = snapshot(&env.path("out/fetch"));
    let before_cache = snapshot(&env.path("out/cache"));
    let o = env.fetch(fetch, inputs, hf);
    let err = stderr(&o);
    assert!(!o.status.success(), "expected failure, got success: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    for n in needles {
        assert!(err.contains(n), "missing {n:?} in: {err}");
    }
    assert_eq!(
        snapshot(&env.path("out/fetch")),
        before_out,
        "out/fetch changed"
    );
    assert_eq!(
        snapshot(&env.path("out/cache")),
        before_cache,
        "cache changed"
    );
}

// ---------------------------------------------------------------- HTTP cases

#[test]
fn good_download_is_cached_and_second_run_needs_no_network() {
    let env = Env::new();
    let body = dark_triad();
    let digest = sha(&body);
    let server = serve("127.0.0.1", move |_, _| Reply::Ok(body.clone()));
    let inputs = url_input(
        "dt",
        "dark_triad",
        &server.url("/files/dark_triad.csv"),
        &digest,
    );
    let first = json(&env.fetch(FAST, &inputs, None));
    assert_eq!(first["inputs"][0]["origin"], "download");
    assert_eq!(first["human_rows"]["dark_triad"], 155);
    assert_eq!(server.hits(), 1);
    let cached = env.path(&format!("out/cache/{digest}/dark_triad.csv"));
    assert_eq!(fs::read(&cached).unwrap(), dark_triad());
    let out1 = snapshot(&env.path("out/fetch"));
    assert!(out1.contains_key("human/dark_triad.parquet"));

    let second = json(&env.fetch(FAST, &inputs, None));
    assert_eq!(second["inputs"][0]["origin"], "cache");
    assert_eq!(server.hits(), 1, "second run must not touch the network");
    assert_eq!(snapshot(&env.path("out/fetch")), out1);

    // The same file imported from a local path gives the same rows and columns (the bytes
    // differ only in the provenance metadata, which names each run's own configuration).
    let env2 = Env::new();
    json(&env2.fetch(FAST, &local_input(), None));
    let (schema_local, local) =
        protospread_core::read_parquet(&env2.path("out/fetch/human/dark_triad.parquet")).unwrap();
    let (schema_url, url) =
        protospread_core::read_parquet(&env.path("out/fetch/human/dark_triad.parquet")).unwrap();
    assert_eq!(schema_local.fields(), schema_url.fields());
    assert_eq!(local, url);
}

#[test]
fn wrong_hash_is_refused() {
    let (env, inputs) = prepared();
    let server = serve("127.0.0.1", |_, _| Reply::Ok(b"not the file\n".to_vec()));
    let bad = url_input(
        "dt_bad",
        "dark_triad",
        &server.url("/dt.csv"),
        &sha(&dark_triad()),
    );
    let inputs = inputs.replace(&local_input(), "") + &bad;
    assert_fails_cleanly(
        &env,
        FAST,
        &inputs,
        None,
        &["input 'dt_bad'", "sha256 mismatch", &sha(b"not the file\n")],
    );
    assert_eq!(server.hits(), 1, "a hash mismatch is not retried");
}

#[test]
fn truncated_body_is_refused() {
    let (env, inputs) = prepared();
    let body = dark_triad();
    let digest = sha(&body);
    let half = body[..body.len() / 2].to_vec();
    let declared = body.len();
    let server = serve("127.0.0.1", move |_, _| Reply::Truncated {
        body: half.clone(),
        declared,
    });
    let bad = url_input("dt_cut", "dark_triad", &server.url("/dt.csv"), &digest);
    let inputs = inputs.replace(&local_input(), "") + &bad;
    assert_fails_cleanly(
        &env,
        "timeout_seconds = 2\nretries = 1",
        &inputs,
        None,
        &[
            "input 'dt_cut'",
            "truncated body",
            &format!("received {} of {declared} bytes", declared / 2),
            "after 2 attempts",
        ],
    );
    assert_eq!(server.hits(), 2);
}

#[test]
fn not_found_is_not_retried() {
    let (env, inputs) = prepared();
    let server = serve("127.0.0.1", |_, _| Reply::Status(404));
    let bad = url_input(
        "dt_404",
        "dark_triad",
        &server.url("/missing.csv"),
        &sha(b"x"),
    );
    let inputs = inputs.replace(&local_input(), "") + &bad;
    assert_fails_cleanly(
        &env,
        FAST,
        &inputs,
        None,
        &["input 'dt_404'", "HTTP 404 Not Found", "/missing.csv"],
    );
    assert_eq!(server.hits(), 1);
}

#[test]
fn failed_download_into_a_fresh_folder_creates_nothing() {
    let env = Env::new();
    let server = serve("127.0.0.1", |_, _| Reply::Status(404));
    let bad = url_input("dt", "dark_triad", &server.url("/dt.csv"), &sha(b"x"));
    let o = env.fetch(FAST, &bad, None);
    assert!(!o.status.success());
    assert!(!env.path("out").exists(), "{}", stderr(&o));
}

#[test]
fn server_error_is_retried_a_bounded_number_of_times() {
    let (env, inputs) = prepared();
    let server = serve("127.0.0.1", |_, _| Reply::Status(500));
    let bad = url_input("dt_500", "dark_triad", &server.url("/dt.csv"), &sha(b"x"));
    let inputs = inputs.replace(&local_input(), "") + &bad;
    assert_fails_cleanly(
        &env,
        FAST,
        &inputs,
        None,
        &["input 'dt_500'", "HTTP 500", "after 3 attempts"],
    );
    assert_eq!(server.hits(), 3, "retries = 2 means three attempts");
}

#[test]
fn server_error_then_success() {
    let env = Env::new();
    let body = dark_triad();
    let digest = sha(&body);
    let server = serve("127.0.0.1", move |n, _| {
        if n == 0 {
            Reply::Status(500)
        } else {
            Reply::Ok(body.clone())
        }
    });
    let inputs = url_input("dt", "dark_triad", &server.url("/dt.csv"), &digest);
    let v = json(&env.fetch(FAST, &inputs, None));
    assert_eq!(v["inputs"][0]["origin"], "download");
    assert_eq!(server.hits(), 2);
}

#[test]
fn stalled_server_times_out() {
    let (env, inputs) = prepared();
    let server = serve("127.0.0.1", |_, _| Reply::Stall(Duration::from_secs(8)));
    let bad = url_input("dt_stall", "dark_triad", &server.url("/dt.csv"), &sha(b"x"));
    let inputs = inputs.replace(&local_input(), "") + &bad;
    let start = Instant::now();
    assert_fails_cleanly(
        &env,
        "timeout_seconds = 1\nretries = 0",
        &inputs,
        None,
        &["input 'dt_stall'", "timed out"],
    );
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(server.hits(), 1);
}

#[test]
fn redirect_to_another_host_is_refused_unless_allowed() {
    let (env, inputs) = prepared();
    let body = dark_triad();
    let digest = sha(&body);
    let other = serve("127.0.0.2", move |_, _| Reply::Ok(body.clone()));
    let target = other.url("/cdn/dark_triad.csv");
    let t2 = target.clone();
    let origin = serve("127.0.0.1", move |_, _| Reply::Redirect(t2.clone()));
    let bad = url_input("dt_redir", "dark_triad", &origin.url("/dt.csv"), &digest);
    let inputs = inputs.replace(&local_input(), "") + &bad;
    assert_fails_cleanly(
        &env,
        FAST,
        &inputs,
        None,
        &[
            "input 'dt_redir'",
            "refusing redirect to another host (127.0.0.2)",
            &target,
        ],
    );
    assert_eq!(other.hits(), 0, "the other host was never contacted");
    assert_eq!(origin.hits(), 1, "a refused redirect is not retried");

    // Listed in allowed_redirect_hosts, the same redirect is followed.
    let v = json(&env.fetch(
        &format!("{FAST}\nallowed_redirect_hosts = [\"127.0.0.2\"]"),
        &inputs,
        None,
    ));
    assert_eq!(v["inputs"][1]["origin"], "download");
    assert_eq!(other.hits(), 1);
}

#[test]
fn same_host_redirect_is_followed() {
    let env = Env::new();
    let body = dark_triad();
    let digest = sha(&body);
    let server = serve("127.0.0.1", move |_, path| {
        if path == "/old/dt.csv" {
            Reply::Redirect("../new/dt.csv".to_string())
        } else if path == "/new/dt.csv" {
            Reply::Ok(body.clone())
        } else {
            Reply::Status(404)
        }
    });
    let inputs = url_input("dt", "dark_triad", &server.url("/old/dt.csv"), &digest);
    json(&env.fetch(FAST, &inputs, None));
    assert_eq!(
        *server.paths.lock().unwrap(),
        vec!["/old/dt.csv".to_string(), "/new/dt.csv".to_string()]
    );
}

// ---------------------------------------------------------------- Hugging Face layout

fn hf_input(commit: &str) -> String {
    format!(
        "[[inputs]]\nname = \"hf_dt\"\nrole = \"human\"\ninstrument = \"dark_triad\"\nsha256 = \"{}\"\nhf = {{ repo = \"PeterKol/jobcannon-psychometric-responses\", commit = \"{commit}\", file = \"data/dark_triad.csv\" }}\n",
        sha(&dark_triad())
    )
}

#[test]
fn hugging_face_layout_via_hf_endpoint() {
    let env = Env::new();
    let body = dark_triad();
    let want = format!(
        "/datasets/PeterKol/jobcannon-psychometric-responses/resolve/{COMMIT}/data/dark_triad.csv"
    );
    let w = want.clone();
    let server = serve("127.0.0.1", move |_, path| {
        if path == w {
            Reply::Ok(body.clone())
        } else {
            Reply::Status(404)
        }
    });
    // The configured endpoint is dead (port 9 on loopback): HF_ENDPOINT must win, and its
    // trailing slash is stripped as huggingface_hub does.
    let fetch = format!("{FAST}\nhf_endpoint = \"http://127.0.0.1:9\"");
    let endpoint = format!("http://{}/", server.addr);
    let v = json(&env.fetch(&fetch, &hf_input(COMMIT), Some(&endpoint)));
    assert_eq!(
        v["inputs"][0]["source"],
        format!("http://{}{want}", server.addr)
    );
    assert_eq!(*server.paths.lock().unwrap(), vec![want]);

    // Without HF_ENDPOINT the configured endpoint is used.
    let env2 = Env::new();
    let fetch = format!("{FAST}\nhf_endpoint = \"http://{}\"", server.addr);
    json(&env2.fetch(&fetch, &hf_input(COMMIT), None));
    assert_eq!(server.hits(), 2);
}

#[test]
fn hugging_face_revision_must_be_a_commit() {
    let revs = [
        "main".to_string(),
        "v1.0".to_string(),
        COMMIT[..39].to_string(),
        format!("{COMMIT}0"),
        COMMIT.replace('a', "g"),
    ];
    for rev in &revs {
        let env = Env::new();
        let o = env.fetch(FAST, &hf_input(rev), Some("http://127.0.0.1:9"));
        let err = stderr(&o);
        assert!(!o.status.success());
        assert!(
            err.contains("40-hex") && err.contains("hf_dt"),
            "{rev}: {err}"
        );
        assert!(!env.path("out").exists(), "{rev}: nothing written");
    }
}

// ---------------------------------------------------------------- corrupt CSV inputs

/// Corrupt copies of dark_triad.csv, each with the text its error must contain.
fn corruptions() -> Vec<(&'static str, Vec<u8>, Vec<&'static str>)> {
    let text = String::from_utf8(dark_triad()).unwrap();
    let lines: Vec<&str> = text.split('\n').collect();
    let with_line = |i: usize, new: &str| {
        let mut l: Vec<String> = lines.iter().map(|s| s.to_string()).collect();
        l[i] = new.to_string();
        l.join("\n").into_bytes()
    };
    let fields = |i: usize| lines[i].split(',').map(str::to_string).collect::<Vec<_>>();
    let mut missing = fields(5);
    missing.pop();
    let mut extra = fields(7);
    extra.push("3".into());
    let mut x = fields(2);
    x[10] = "x".into(); // q3
    let mut wide = fields(4);
    wide[8] = "300".into(); // q1
    let mut ts = fields(3);
    ts[1] = "2026-04-13 12:22:19".into();
    let mut non_utf8 = with_line(
        3,
        &lines[3].replacen("machiavellianism", "machiavellianis?", 1),
    );
    let pos = non_utf8.iter().position(|b| *b == b'?').unwrap();
    non_utf8[pos] = 0xff;
    let no_q18: Vec<u8> = lines
        .iter()
        .map(|l| l.rsplit_once(',').map(|(a, _)| a).unwrap_or(*l))
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes();
    vec![
        (
            "missing column",
            with_line(5, &missing.join(",")),
            vec!["row 5 (line 6), column 26 `q18`: missing"],
        ),
        (
            "extra column",
            with_line(7, &extra.join(",")),
            vec!["row 7 (line 8), column 27", "extra column"],
        ),
        (
            "x in an answer",
            with_line(2, &x.join(",")),
            vec!["row 2 (line 3), column 11 `q3`: `x` is not an integer"],
        ),
        (
            "out of Int8 range",
            with_line(4, &wide.join(",")),
            vec!["row 4 (line 5), column 9 `q1`: `300` is outside -128..=127"],
        ),
        (
            "bad timestamp",
            with_line(3, &ts.join(",")),
            vec!["row 3 (line 4), column 2 `created_at`", "RFC 3339"],
        ),
        ("empty file", Vec::new(), vec!["empty file"]),
        (
            "not UTF-8",
            non_utf8,
            vec!["row 3 (line 4), column 5 `top_result`: not UTF-8"],
        ),
        (
            "header without q18",
            no_q18,
            vec!["header (line 1), column 26: missing column `q18`"],
        ),
    ]
}

#[test]
fn corrupt_csvs_fail_with_file_row_column_and_leave_outputs() {
    let env = Env::new();
    json(&env.fetch(FAST, &local_input(), None));
    let before = snapshot(&env.path("out/fetch"));
    assert!(before.contains_key("human/dark_triad.parquet"));
    for (what, bytes, needles) in corruptions() {
        fs::write(env.path("data/bad.csv"), &bytes).unwrap();
        let inputs = format!(
            "[[inputs]]\nname = \"bad_dt\"\nrole = \"human\"\ninstrument = \"dark_triad\"\npath = \"data/bad.csv\"\nsha256 = \"{}\"\n",
            sha(&bytes)
        );
        let o = env.fetch(FAST, &inputs, None);
        let err = stderr(&o);
        assert!(!o.status.success(), "{what}: accepted");
        assert_eq!(err.trim_end().lines().count(), 1, "{what}: one line: {err}");
        assert!(
            err.contains("input 'bad_dt'") && err.contains("bad.csv"),
            "{what}: {err}"
        );
        for n in needles {
            assert!(err.contains(n), "{what}: missing {n:?} in {err}");
        }
        assert_eq!(
            snapshot(&env.path("out/fetch")),
            before,
            "{what}: outputs changed"
        );
    }
}

// ---------------------------------------------------------------- the real pipeline.toml

#[test]
fn repository_pipeline_fetch_is_verified_deterministic_and_sha256sum_clean() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_protospread"))
            .current_dir(repo())
            .args(["--json", "--out"])
            .arg(&out)
            .arg("fetch")
            .env_remove("HF_ENDPOINT")
            .output()
            .unwrap()
    };
    let v = json(&run());
    for (inst, rows) in [
        ("big_five", 880),
        ("riasec", 1455),
        ("dark_triad", 155),
        ("multiple_intelligences", 498),
    ] {
        assert_eq!(v["human_rows"][inst], rows, "{inst}");
        assert!(out.join(format!("fetch/human/{inst}.parquet")).is_file());
    }
    // Every input is listed, and each answers input went through the stored-answer importer.
    let inputs = v["inputs"].as_array().unwrap();
    assert!(inputs.len() >= 4);
    for i in inputs {
        assert_eq!(i["origin"], "local");
        let output = out.join("fetch").join(i["output"].as_str().unwrap());
        assert!(output.is_file(), "{output:?}");
        if i["role"] == "answers" {
            assert!(i["rows"].as_u64().unwrap() > 0, "{i}");
            assert!(output.to_string_lossy().ends_with(".parquet"));
        }
    }
    let check = Command::new("sha256sum")
        .args(["-c", "--strict", "SHA256SUMS"])
        .current_dir(out.join("fetch"))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    let listed = String::from_utf8_lossy(&check.stdout).lines().count();
    assert_eq!(listed, v["files"].as_u64().unwrap() as usize);
    let first = snapshot(&out.join("fetch"));
    json(&run());
    assert_eq!(snapshot(&out.join("fetch")), first, "second run differs");

    // The text summary names what was written.
    let o = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .current_dir(repo())
        .arg("--out")
        .arg(&out)
        .arg("fetch")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("880 rows (big_five)"), "{text}");
    assert!(text.contains("SHA256SUMS"), "{text}");
    let quiet = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .current_dir(repo())
        .args(["--quiet", "--out"])
        .arg(&out)
        .arg("fetch")
        .output()
        .unwrap();
    assert!(quiet.status.success() && quiet.stdout.is_empty() && quiet.stderr.is_empty());
}

#[test]
fn removed_input_leaves_no_stale_output() {
    let env = Env::new();
    fs::copy(
        repo().join("data/jobcannon/eq.csv"),
        env.path("data/eq.csv"),
    )
    .unwrap();
    let eq = format!(
        "[[inputs]]\nname = \"eq\"\nrole = \"human\"\ninstrument = \"eq\"\npath = \"data/eq.csv\"\nsha256 = \"{}\"\n",
        sha(&fs::read(env.path("data/eq.csv")).unwrap())
    );
    json(&env.fetch(FAST, &format!("{}{eq}", local_input()), None));
    assert!(env.path("out/fetch/human/eq.parquet").is_file());
    let v = json(&env.fetch(FAST, &local_input(), None));
    assert_eq!(v["removed"][0], "human/eq.parquet");
    assert!(!env.path("out/fetch/human/eq.parquet").exists());
    let sums = fs::read_to_string(env.path("out/fetch/SHA256SUMS")).unwrap();
    assert!(!sums.contains("eq.parquet"), "{sums}");
}

// ---------------------------------------------------------------- large human CSVs

/// dark_triad.csv's data rows repeated with fresh ids to `n` rows, the ids in the order
/// `order` gives (row i gets id `order(i)`).
fn dark_triad_rows(n: usize, order: impl Fn(usize) -> i64) -> Vec<u8> {
    let text = String::from_utf8(dark_triad()).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let rows: Vec<&str> = lines.map(|l| l.split_once(',').unwrap().1).collect();
    let mut out = format!("{header}\n");
    for i in 0..n {
        out.push_str(&format!("{},{}\n", order(i), rows[i % rows.len()]));
    }
    out.into_bytes()
}

/// Fetch `csv` as the dark_triad input of a fresh folder; the output table's columns.
fn fetch_dark_triad(csv: &[u8]) -> Result<Vec<arrow::array::ArrayRef>, String> {
    let env = Env::new();
    fs::write(env.path("data/dark_triad.csv"), csv).unwrap();
    let input = format!(
        "[[inputs]]\nname = \"local_dt\"\nrole = \"human\"\ninstrument = \"dark_triad\"\npath = \"data/dark_triad.csv\"\nsha256 = \"{}\"\n",
        sha(csv)
    );
    let o = env.fetch(FAST, &input, None);
    if !o.status.success() {
        return Err(stderr(&o));
    }
    let (schema, batches) =
        protospread_core::read_parquet(&env.path("out/fetch/human/dark_triad.parquet")).unwrap();
    Ok(arrow::compute::concat_batches(&schema, &batches)
        .unwrap()
        .columns()
        .to_vec())
}

/// Issue 10: a human CSV is imported batch by batch (a 1 GiB file is never held whole), in id
/// order whatever the file's order, with the same rows as the whole file parsed at once.
#[test]
fn large_human_csvs_stream_in_batches_and_come_out_in_id_order() {
    let n = 2 * protospread_fetch::HUMAN_BATCH_ROWS + 123;
    let sorted = dark_triad_rows(n, |i| i as i64 + 1);
    let inst = protospread_core::instrument_by_name("dark_triad").unwrap();
    let whole = protospread_fetch::import_human_csv(Path::new("x"), &sorted, inst).unwrap();
    assert_eq!(fetch_dark_triad(&sorted).unwrap(), whole.columns());
    // The same rows with the ids descending, and shuffled: sorted by id on the way out.
    let descending = dark_triad_rows(n, |i| (n - i) as i64);
    let shuffled = dark_triad_rows(n, |i| ((i * 7919) % n) as i64 + 1);
    for csv in [descending, shuffled] {
        let got = fetch_dark_triad(&csv).unwrap();
        let expected = protospread_fetch::import_human_csv(Path::new("x"), &csv, inst).unwrap();
        assert_eq!(got, expected.columns());
        let ids = got[0]
            .as_any()
            .downcast_ref::<arrow::array::Int64Array>()
            .unwrap();
        assert!(ids.values().windows(2).all(|w| w[0] < w[1]));
        assert_eq!(ids.len(), n);
    }
}

/// A repeated id is found wherever it falls: in an ascending file, after the file's order
/// broke, and between two out-of-order rows; the error names both rows.
#[test]
fn a_repeated_id_is_refused_in_any_order_and_batch() {
    let n = protospread_fetch::HUMAN_BATCH_ROWS + 10;
    type IdOf = Box<dyn Fn(usize) -> i64>;
    let cases: Vec<(IdOf, usize, usize, i64)> = vec![
        // ids 1..n-1 then id 5 again in the last row (a later batch).
        (
            Box::new(move |i| if i == n - 1 { 5 } else { i as i64 + 1 }),
            n,
            5,
            5,
        ),
        // descending, then the id of row 4 again.
        (
            Box::new(move |i| {
                if i == n - 1 {
                    (n - 3) as i64
                } else {
                    (n - i) as i64
                }
            }),
            n,
            4,
            (n - 3) as i64,
        ),
    ];
    for (order, row, first, id) in cases {
        let err = fetch_dark_triad(&dark_triad_rows(n, order)).unwrap_err();
        assert!(
            err.contains(&format!(
                "row {row} (line {}), column 1 `id`: duplicate id {id} (first in row {first})",
                row + 1
            )),
            "{err}"
        );
    }
}
