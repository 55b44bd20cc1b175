//! `protospread administer` against chat-completions servers started by the tests on 127.0.0.1.
//!
//! The loopback server identifies a request by the sha256 of its body; the binary records that
//! same hash (`request_sha256`) with every record, so the tests can tie each stored record to
//! the exact request the server received.

use protospread_testutils::output_text as text;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_protospread");

fn sha256(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

/// A request as the server received it.
#[derive(Debug, Clone)]
struct Seen {
    sha: String,
    body: String,
    auth: Option<String>,
    path: String,
}

/// What the server does with a request.
enum Resp {
    /// Status, extra headers, body.
    Send(u16, Vec<(String, String)>, String),
    /// Wait this long, then answer normally (a stall longer than the client's timeout).
    StallThenOk(Duration),
    /// Never answer until the server is released (a request in flight at a kill).
    Hold,
}

/// `nth` counts how often this exact body was received before (0 on the first time);
/// `total` counts all requests received before this one.
type Behaviour = dyn Fn(&Seen, usize, usize) -> Resp + Send + Sync;

struct Server {
    base_url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    released: Arc<AtomicBool>,
}

fn ok_body(seen: &Seen) -> String {
    // The reply names the request it answers, so a test can check the pairing.
    serde_json::json!({
        "id": "x",
        "object": "chat.completion",
        "model": "served-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("3 ({})", &seen.sha[..12])}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}
    })
    .to_string()
}

fn read_request(stream: &mut TcpStream) -> Option<Seen> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut line = String::new();
    reader.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut len = 0usize;
    let mut auth = None;
    loop {
        let mut h = String::new();
        reader.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        let k = k.trim().to_ascii_lowercase();
        if k == "content-length" {
            len = v.trim().parse().ok()?;
        }
        if k == "authorization" {
            auth = Some(v.trim().to_string());
        }
    }
    let mut body = vec![0u8; len];
    reader.read_exact(&mut body).ok()?;
    Some(Seen {
        sha: sha256(&body),
        body: String::from_utf8(body).ok()?,
        auth,
        path,
    })
}

fn write_response(stream: &mut TcpStream, status: u16, headers: &[(String, String)], body: &str) {
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body.as_bytes());
    let _ = stream.flush();
}

impl Server {
    fn start(behaviour: Arc<Behaviour>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let released = Arc::new(AtomicBool::new(false));
        let (seen2, released2) = (seen.clone(), released.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let (seen, released, behaviour) =
                    (seen2.clone(), released2.clone(), behaviour.clone());
                std::thread::spawn(move || {
                    let Some(req) = read_request(&mut stream) else {
                        return;
                    };
                    let (nth, total) = {
                        let mut log = seen.lock().unwrap();
                        let nth = log.iter().filter(|s| s.sha == req.sha).count();
                        let total = log.len();
                        log.push(req.clone());
                        (nth, total)
                    };
                    match behaviour(&req, nth, total) {
                        Resp::Send(status, headers, body) => {
                            write_response(&mut stream, status, &headers, &body);
                        }
                        Resp::StallThenOk(d) => {
                            std::thread::sleep(d);
                            write_response(&mut stream, 200, &[], &ok_body(&req));
                        }
                        Resp::Hold => {
                            // Bounded: a test releases or ends well within this.
                            let until = Instant::now() + Duration::from_secs(120);
                            while !released.load(Ordering::SeqCst) && Instant::now() < until {
                                std::thread::sleep(Duration::from_millis(20));
                            }
                        }
                    }
                });
            }
        });
        Server {
            base_url: format!("http://{addr}/v1"),
            seen,
            released,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.released.store(true, Ordering::SeqCst);
    }
}

fn ok() -> Arc<Behaviour> {
    Arc::new(|s: &Seen, _, _| Resp::Send(200, vec![], ok_body(s)))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A folder with a pipeline.toml whose [administer] uses the shipped IPIP-50 file and short
/// retry waits.
fn workdir(extra: &str) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let inst = repo().join("data/instruments/ipip50.toml");
    fs_err::write(
        d.path().join("pipeline.toml"),
        format!(
            "[study]\nname = \"loopback\"\n\n[administer]\ninstruments = [{:?}]\nretry_backoff_ms = 10\n{extra}",
            inst.display().to_string()
        ),
    )
    .unwrap();
    d
}

fn cmd(dir: &Path, server: &Server, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(BIN);
    c.current_dir(dir)
        .args(["--config", "pipeline.toml", "administer", "--base-url"])
        .arg(&server.base_url)
        .args(["--model", "test-model", "--to"])
        .arg(out)
        .args(extra)
        .env_remove("HTTP_PROXY")
        .env_remove("http_proxy")
        .env_remove("ALL_PROXY");
    c
}

fn run(dir: &Path, server: &Server, out: &Path, extra: &[&str]) -> Output {
    cmd(dir, server, out, extra).output().unwrap()
}

fn records(path: &Path) -> Vec<serde_json::Value> {
    fs_err::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A fresh [`workdir`] and one administer run against `server` recording into its
/// `a.jsonl`: the folder (kept alive), the records file and the run.
fn administer_once(server: &Server, args: &[&str]) -> (tempfile::TempDir, PathBuf, Output) {
    let d = workdir("");
    let out = d.path().join("a.jsonl");
    let o = run(d.path(), server, &out, args);
    (d, out, o)
}

#[test]
fn success_records_every_request_exactly_as_sent() {
    let server = Server::start(ok());
    let (d, out, o) = administer_once(&server, &["--conditions", "S0,SR,B0,BS1"]);
    assert!(o.status.success(), "{}", text(&o));
    let recs = records(&out);
    let seen = server.seen();
    assert_eq!(recs.len(), 50 + 50 + 1 + 1);
    assert_eq!(seen.len(), recs.len(), "each request sent once");
    let by_sha: BTreeMap<&str, &Seen> = seen.iter().map(|s| (s.sha.as_str(), s)).collect();
    for r in &recs {
        let sha = r["x_request_sha256"].as_str().unwrap();
        let s = by_sha.get(sha).expect("recorded request was received");
        assert_eq!(
            r["x_request_body"].as_str().unwrap(),
            s.body,
            "body as sent"
        );
        assert_eq!(s.path, "/v1/chat/completions");
        assert_eq!(s.auth, None);
        assert_eq!(r["reply"], format!("3 ({})", &sha[..12]));
        assert_eq!(r["error"], serde_json::Value::Null);
        assert_eq!(r["format_version"], 1);
        assert_eq!(r["model"], "test-model");
        assert_eq!(r["x_response_model"], "served-model");
        assert_eq!(r["x_usage"]["total_tokens"], 11);
        assert_eq!(r["x_attempts"], 1);
        assert_eq!(r["study"], "loopback");
        let body: serde_json::Value = serde_json::from_str(&s.body).unwrap();
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["temperature"].as_f64(), r["temperature"].as_f64());
        assert_eq!(body["seed"], r["x_seed"]);
    }
    // Canonical order after a finished run: condition order, then item.
    let conds: Vec<&str> = recs
        .iter()
        .map(|r| r["condition"].as_str().unwrap())
        .collect();
    assert_eq!(conds[0], "S0");
    assert_eq!(conds[50], "SR");
    assert_eq!(conds[100..], ["B0", "BS1"]);
    assert_eq!(recs[1]["item"], 2);
    // SR shows the options reversed; the record says so.
    let sr: serde_json::Value =
        serde_json::from_str(recs[50]["x_request_body"].as_str().unwrap()).unwrap();
    let content = sr["messages"][0]["content"].as_str().unwrap();
    assert!(content.contains("1. Very Accurate\n"), "{content}");
    assert_eq!(recs[50]["option_order"], "reversed");
    // B0 is the human order; BS1 a permutation recorded with its seed.
    assert_eq!(
        recs[100]["item_order"],
        (1..=50)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join(";")
    );
    assert_eq!(recs[100]["order_seed"], serde_json::Value::Null);
    assert_eq!(recs[101]["order_seed"], 101);
    let bs1: Vec<u32> = recs[101]["item_order"]
        .as_str()
        .unwrap()
        .split(';')
        .map(|x| x.parse().unwrap())
        .collect();
    let mut sorted = bs1.clone();
    sorted.sort();
    assert_eq!(sorted, (1..=50).collect::<Vec<_>>());
    assert_ne!(bs1, sorted);

    // A rerun sends nothing and leaves the file byte-identical.
    let before = fs_err::read(&out).unwrap();
    let o = run(d.path(), &server, &out, &["--conditions", "S0,SR,B0,BS1"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(server.seen().len(), recs.len(), "nothing sent again");
    assert_eq!(fs_err::read(&out).unwrap(), before);
}

#[test]
fn status_429_then_success_is_retried() {
    let server = Server::start(Arc::new(|s: &Seen, nth, _| {
        if nth == 0 {
            Resp::Send(429, vec![("Retry-After".into(), "0".into())], "{}".into())
        } else {
            Resp::Send(200, vec![], ok_body(s))
        }
    }));
    let (_d, out, o) = administer_once(&server, &["--conditions", "B0,B0r"]);
    assert!(o.status.success(), "{}", text(&o));
    let recs = records(&out);
    assert_eq!(recs.len(), 2);
    for r in &recs {
        assert_eq!(r["x_attempts"], 2);
        assert_eq!(r["x_http_status"], 200);
        assert_eq!(r["error"], serde_json::Value::Null);
    }
    assert_eq!(server.seen().len(), 4);
}

#[test]
fn status_500_then_success_is_retried() {
    let server = Server::start(Arc::new(|s: &Seen, nth, _| {
        if nth == 0 {
            Resp::Send(500, vec![], "boom".into())
        } else {
            Resp::Send(200, vec![], ok_body(s))
        }
    }));
    let (_d, out, o) = administer_once(&server, &["--conditions", "B0"]);
    assert!(o.status.success(), "{}", text(&o));
    let recs = records(&out);
    assert_eq!(recs[0]["x_attempts"], 2);
    assert_eq!(recs[0]["error"], serde_json::Value::Null);
}

#[test]
fn persistent_500_is_recorded_as_failed_and_retried_by_a_rerun() {
    let fail = Arc::new(AtomicBool::new(true));
    let f2 = fail.clone();
    let server = Server::start(Arc::new(move |s: &Seen, _, _| {
        if f2.load(Ordering::SeqCst) {
            Resp::Send(503, vec![], "overloaded".into())
        } else {
            Resp::Send(200, vec![], ok_body(s))
        }
    }));
    let (d, out, o) = administer_once(&server, &["--conditions", "B0", "--retries", "2"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let recs = records(&out);
    assert_eq!(recs.len(), 1);
    let err = recs[0]["error"].as_str().unwrap();
    assert!(
        err.contains("HTTP 503") && err.contains("after 3 attempts"),
        "{err}"
    );
    assert_eq!(recs[0]["reply"], "");
    assert_eq!(server.seen().len(), 3);
    fail.store(false, Ordering::SeqCst);
    let o = run(d.path(), &server, &out, &["--conditions", "B0"]);
    assert!(o.status.success(), "{}", text(&o));
    let recs = records(&out);
    assert_eq!(
        recs.len(),
        1,
        "the failure is replaced, not kept beside the answer"
    );
    assert_eq!(recs[0]["error"], serde_json::Value::Null);
    assert_eq!(server.seen().len(), 4);
}

#[test]
fn a_stall_times_out() {
    let server = Server::start(Arc::new(|_: &Seen, _, _| {
        Resp::StallThenOk(Duration::from_secs(15))
    }));
    let d = workdir("");
    let out = d.path().join("a.jsonl");
    let t = Instant::now();
    let o = run(
        d.path(),
        &server,
        &out,
        &["--conditions", "B0", "--timeout", "1", "--retries", "0"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    // Well under the 15 s stall: the 1 s timeout ended the request, not the server.
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    let recs = records(&out);
    let err = recs[0]["error"].as_str().unwrap();
    assert!(err.contains("timed out"), "{err}");
    assert_eq!(recs[0]["x_http_status"], serde_json::Value::Null);
}

#[test]
fn a_stall_then_success_is_retried() {
    let server = Server::start(Arc::new(|s: &Seen, nth, _| {
        if nth == 0 {
            Resp::StallThenOk(Duration::from_secs(5))
        } else {
            Resp::Send(200, vec![], ok_body(s))
        }
    }));
    let (_d, out, o) = administer_once(
        &server,
        &["--conditions", "B0", "--timeout", "1", "--retries", "1"],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(records(&out)[0]["x_attempts"], 2);
}

#[test]
fn malformed_json_body_is_a_recorded_error_not_retried() {
    let server = Server::start(Arc::new(|_: &Seen, _, _| {
        Resp::Send(200, vec![], "{\"choices\": [".into())
    }));
    let (_d, out, o) = administer_once(&server, &["--conditions", "B0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let recs = records(&out);
    assert!(recs[0]["error"].as_str().unwrap().contains("not JSON"));
    assert_eq!(recs[0]["x_http_status"], 200);
    assert_eq!(server.seen().len(), 1);
}

#[test]
fn reply_without_choices_is_a_recorded_error() {
    let server = Server::start(Arc::new(|_: &Seen, _, _| {
        Resp::Send(
            200,
            vec![],
            r#"{"object":"chat.completion","choices":[]}"#.into(),
        )
    }));
    let (_d, out, o) = administer_once(&server, &["--conditions", "B0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let recs = records(&out);
    assert!(recs[0]["error"].as_str().unwrap().contains("no choices"));
}

#[test]
fn api_key_comes_from_the_environment_and_is_never_written() {
    let server = Server::start(ok());
    let d = workdir("");
    let out = d.path().join("a.jsonl");
    let secret = "sk-test-3f9a1c0de5";
    let o = cmd(
        d.path(),
        &server,
        &out,
        &["--conditions", "B0", "--api-key-env", "PS_TEST_KEY"],
    )
    .env("PS_TEST_KEY", secret)
    .output()
    .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        server.seen()[0].auth.as_deref(),
        Some(format!("Bearer {secret}").as_str())
    );
    let file = fs_err::read_to_string(&out).unwrap();
    assert!(!file.contains(secret));
    assert!(!text(&o).contains(secret));
    // A named variable that is not set is an error, not an unauthenticated run.
    let o = cmd(
        d.path(),
        &server,
        &out,
        &["--conditions", "B0", "--api-key-env", "PS_TEST_KEY_UNSET"],
    )
    .env_remove("PS_TEST_KEY_UNSET")
    .output()
    .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("PS_TEST_KEY_UNSET is not set"),
        "{}",
        text(&o)
    );
}

#[test]
fn tests_without_public_texts_need_an_instrument_file() {
    let server = Server::start(ok());
    let (_d, out, o) = administer_once(&server, &["--tests", "big_five,riasec"]);
    assert_eq!(o.status.code(), Some(1));
    let t = text(&o);
    assert!(
        t.contains("riasec") && t.contains("not public") && t.contains("--instrument"),
        "{t}"
    );
    assert!(server.seen().is_empty());
    assert!(!out.exists());
}

#[test]
fn a_changed_request_is_not_mixed_into_an_old_file() {
    let server = Server::start(ok());
    let (_d, out, o) = administer_once(&server, &["--conditions", "B0"]);
    assert!(o.status.success(), "{}", text(&o));
    // Same request key, different body (max_tokens changed).
    let d2 = workdir("max_tokens_whole = 7\n");
    let o = run(d2.path(), &server, &out, &["--conditions", "B0"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("different request body"), "{}", text(&o));
    assert_eq!(server.seen().len(), 1);
}

/// Kill the binary (SIGKILL) after K replies, rerun, and account for every request.
#[test]
fn resume_after_kill_sends_no_answered_request_twice() {
    const K: usize = 12;
    const CONCURRENCY: usize = 3;
    let second_run = Arc::new(AtomicBool::new(false));
    let sr = second_run.clone();
    let server = Server::start(Arc::new(move |s: &Seen, _, total| {
        if sr.load(Ordering::SeqCst) || total < K {
            Resp::Send(200, vec![], ok_body(s))
        } else {
            Resp::Hold
        }
    }));
    let d = workdir("");
    let out = d.path().join("a.jsonl");
    let args = [
        "--conditions",
        "S0,B0",
        "--concurrency",
        &CONCURRENCY.to_string(),
    ];
    let mut child = cmd(d.path(), &server, &out, &args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until K replies are on disk and every worker is blocked on a held request.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let lines = fs_err::read_to_string(&out)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        if lines == K && server.seen().len() == K + CONCURRENCY {
            break;
        }
        assert!(Instant::now() < deadline, "run 1 did not reach {K} replies");
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let run1 = server.seen();
    assert_eq!(run1.len(), K + CONCURRENCY);
    let answered1: BTreeSet<String> = run1[..K].iter().map(|s| s.sha.clone()).collect();
    let in_flight: BTreeSet<String> = run1[K..].iter().map(|s| s.sha.clone()).collect();
    let recorded1: BTreeSet<String> = records(&out)
        .iter()
        .map(|r| r["x_request_sha256"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        recorded1, answered1,
        "exactly the answered requests are on disk"
    );
    assert_eq!(in_flight.len(), CONCURRENCY);

    // A kill in the middle of a write leaves a partial last line: the rerun must cut it off.
    fs_err::OpenOptions::new()
        .append(true)
        .open(&out)
        .unwrap()
        .write_all(b"{\"format_version\":1,\"stu")
        .unwrap();

    second_run.store(true, Ordering::SeqCst);
    let o = run(d.path(), &server, &out, &args);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("cut an incomplete last line"),
        "{}",
        text(&o)
    );
    let all = server.seen();
    let run2: Vec<String> = all[K + CONCURRENCY..]
        .iter()
        .map(|s| s.sha.clone())
        .collect();
    let final_recs = records(&out);
    let planned: BTreeSet<String> = final_recs
        .iter()
        .map(|r| r["x_request_sha256"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(final_recs.len(), 51);
    assert_eq!(planned.len(), 51, "one record per request");
    assert!(final_recs.iter().all(|r| r["error"].is_null()));
    // Run 2 sent exactly the requests without a recorded reply, each once.
    let run2_set: BTreeSet<String> = run2.iter().cloned().collect();
    assert_eq!(run2.len(), run2_set.len(), "no request sent twice in run 2");
    assert_eq!(
        run2_set,
        planned
            .difference(&recorded1)
            .cloned()
            .collect::<BTreeSet<_>>()
    );
    // Overall: every request received once, except those in flight at the kill: twice.
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for s in &all {
        *count.entry(s.sha.as_str()).or_default() += 1;
    }
    for sha in &planned {
        let expect = if in_flight.contains(sha) { 2 } else { 1 };
        assert_eq!(count[sha.as_str()], expect, "request {sha}");
    }
    assert_eq!(count.len(), 51);
}

/// Opt-in: three items to a real llama.cpp server (scripts/llama-server.sh start), e.g.
/// `PROTOSPREAD_LLAMA_URL=http://127.0.0.1:8088/v1 cargo test --release --test it -- --ignored administer::administer_real`
#[test]
#[ignore = "needs a running llama.cpp server: set PROTOSPREAD_LLAMA_URL"]
fn administer_real() {
    let url = std::env::var("PROTOSPREAD_LLAMA_URL")
        .expect("set PROTOSPREAD_LLAMA_URL, e.g. http://127.0.0.1:8088/v1");
    let model = std::env::var("PROTOSPREAD_LLAMA_MODEL")
        .unwrap_or_else(|_| "SmolLM2-135M-Instruct.Q4_1".to_string());
    let d = workdir("");
    let out = d.path().join("real.jsonl");
    let o = Command::new(BIN)
        .current_dir(d.path())
        .args([
            "--config",
            "pipeline.toml",
            "administer",
            "--base-url",
            &url,
        ])
        .args([
            "--model",
            &model,
            "--conditions",
            "S0",
            "--items",
            "1,2,3",
            "--to",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let recs = records(&out);
    assert_eq!(recs.len(), 3);
    for r in &recs {
        assert!(r["error"].is_null(), "{r}");
        assert!(r["x_usage"].is_object(), "{r}");
        assert!(r["x_elapsed_ms"].as_u64().is_some());
    }
}
