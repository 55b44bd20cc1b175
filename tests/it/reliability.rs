//! Fault injection (issue 10): protospread never destroys what it did not write, a run is all
//! or nothing even under `kill -9`, concurrent writers are refused, administer cannot lose
//! records or leak a key, bag trusts nothing, and no number makes it panic.
//!
//! Everything runs on copies in temporary folders with the release binary; servers are
//! loopback stubs started here. The repository is never modified.

use protospread_testutils::output_text as text;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

const BIN: &str = env!("CARGO_BIN_EXE_protospread");

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn sha256(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The repository's pipeline.toml with every `data/` path made absolute, plus `extra` TOML,
/// written to `dir/name`.
fn config_in(dir: &Path, name: &str, extra: &str) -> PathBuf {
    let text = fs_err::read_to_string(repo().join("pipeline.toml")).unwrap();
    let data = format!("\"{}/data/", repo().display());
    let text = text.replace("\"data/", &data);
    let p = dir.join(name);
    fs_err::write(&p, format!("{text}\n{extra}")).unwrap();
    p
}

fn protospread(config: &Path, out: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("--config")
        .arg(config)
        .arg("--out")
        .arg(out)
        .arg("--quiet")
        .args(args)
        .output()
        .unwrap()
}

/// A temporary folder holding the repository's configuration (`p.toml`, [`config_in`]) and
/// the output of one successful `run` (`out/`): the start of every test on a finished run.
fn ran() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let d = tempfile::tempdir().unwrap();
    let cfg = config_in(d.path(), "p.toml", "");
    let out = d.path().join("out");
    let o = protospread(&cfg, &out, &["run"]);
    assert!(o.status.success(), "{}", text(&o));
    (d, cfg, out)
}

/// Every regular file below `dir` (relative path -> bytes), symlinks not followed.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = fs_err::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file() {
                let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
                m.insert(rel, fs_err::read(&p).unwrap());
            }
        }
    }
    m
}

/// [`snapshot`] without the lock file, whose content is the pid of the last process that took
/// the lock.
fn outputs(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut m = snapshot(dir);
    m.remove(".protospread.lock");
    m
}

/// `sha256sum -c SHA256SUMS` in `out` passes, and every output file (not the cache, not
/// protospread's hidden files, not the stage manifests) is listed: all files of one run.
/// Returns the manifest text.
fn assert_complete(out: &Path, context: &str) -> String {
    let o = Command::new("sha256sum")
        .args(["-c", "--quiet", "SHA256SUMS"])
        .current_dir(out)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{context}: sha256sum -c failed\n{}",
        text(&o)
    );
    let manifest = fs_err::read_to_string(out.join("SHA256SUMS")).unwrap();
    let listed: Vec<&str> = manifest.lines().map(|l| &l[66..]).collect();
    for rel in snapshot(out).keys() {
        let name = rel.rsplit('/').next().unwrap();
        if rel.starts_with("cache/") || name.starts_with('.') || name == "SHA256SUMS" {
            continue;
        }
        assert!(
            listed.contains(&rel.as_str()),
            "{context}: {rel} is not listed in SHA256SUMS"
        );
    }
    for s in ["fetch", "score", "aggregate", "report"] {
        let o = Command::new("sha256sum")
            .args(["-c", "--quiet", "SHA256SUMS"])
            .current_dir(out.join(s))
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{context}: {s}/SHA256SUMS\n{}",
            text(&o)
        );
    }
    manifest
}

/// Temporaries (`.NAME.PID.tmp`, `.NAME.PID.part`) anywhere below `dir`.
fn temporaries(dir: &Path) -> Vec<String> {
    let mut v = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs_err::read_dir(&d).unwrap().flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if n.starts_with('.') && (n.ends_with(".tmp") || n.ends_with(".part")) {
                v.push(e.path().display().to_string());
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            }
        }
    }
    v
}

/// `verify --checksums sums` of the repository's configuration with `TMPDIR` set to `tmp`.
fn verify_with_tmpdir(sums: &Path, tmp: &Path) -> Output {
    Command::new(BIN)
        .arg("--config")
        .arg(repo().join("pipeline.toml"))
        .args(["verify", "--checksums"])
        .arg(sums)
        .env("TMPDIR", tmp)
        .output()
        .unwrap()
}

/// No temporary is left below `dir` ([`temporaries`]).
fn assert_no_temporaries(dir: &Path) {
    let left = temporaries(dir);
    assert!(left.is_empty(), "{left:?}");
}

/// The pid of a process that has exited.
fn dead_pid() -> u32 {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

#[test]
fn kill_9_at_ten_moments_leaves_the_previous_complete_output() {
    let d = tempfile::tempdir().unwrap();
    let a = config_in(d.path(), "a.toml", "");
    // A parameter changed since the previous run: the report title and the verdict share, so
    // the report and aggregate outputs of the two configurations differ.
    let b = config_in(
        d.path(),
        "b.toml",
        "[report]\ntitle = \"Run B\"\n\n[aggregate]\nverdict_share = 0.77\n",
    );
    let out = d.path().join("out");
    let started = Instant::now();
    let o = protospread(&a, &out, &["run"]);
    let span = started.elapsed();
    assert!(o.status.success(), "{}", text(&o));
    let manifest_a = assert_complete(&out, "first run");

    let mut seen_b = None;
    for k in 0..10u32 {
        let delay = span.mul_f64(f64::from(k) / 10.0 * 1.2);
        let mut child = Command::new(BIN)
            .arg("--config")
            .arg(&b)
            .arg("--out")
            .arg(&out)
            .args(["--quiet", "run"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        // SIGKILL: no destructor, no cleanup runs.
        let _ = child.kill();
        child.wait().unwrap();
        let ctx = format!("kill after {delay:?}");
        let m = assert_complete(&out, &ctx);
        if m != manifest_a {
            if let Some(prev) = &seen_b {
                assert_eq!(&m, prev, "{ctx}: a third state");
            }
            seen_b = Some(m);
            // Back to A, so that the next kill again interrupts a run that changes outputs.
            let o = protospread(&a, &out, &["run"]);
            assert!(o.status.success(), "{}", text(&o));
            assert_eq!(assert_complete(&out, "restore"), manifest_a);
        }
    }
    let o = protospread(&b, &out, &["run"]);
    assert!(o.status.success(), "next run after the kills: {}", text(&o));
    let manifest_b = assert_complete(&out, "final run");
    assert_ne!(
        manifest_a, manifest_b,
        "the parameter change must change outputs"
    );
    if let Some(m) = seen_b {
        assert_eq!(
            m, manifest_b,
            "a killed run switched in something else than run B"
        );
    }
    assert_no_temporaries(d.path());
}

#[test]
fn a_foreign_out_folder_is_refused_and_untouched() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config_in(d.path(), "p.toml", "");
    let mine = d.path().join("mine");
    fs_err::create_dir_all(mine.join("report")).unwrap();
    fs_err::write(mine.join("notes.txt"), b"mine").unwrap();
    fs_err::write(mine.join("report/draft.md"), b"mine too").unwrap();
    fs_err::write(mine.join("table.parquet"), b"not protospread's").unwrap();
    let before = snapshot(&mine);
    for cmd in ["run", "fetch", "report", "aggregate"] {
        let o = protospread(&cfg, &mine, &[cmd]);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {}", text(&o));
        assert!(
            stderr(&o).contains("not created by protospread"),
            "{}",
            text(&o)
        );
        assert_eq!(snapshot(&mine), before, "{cmd} changed a foreign folder");
    }
}

#[test]
fn out_inside_the_source_tree_or_the_inputs_is_refused() {
    let repo = repo();
    let cfg = repo.join("pipeline.toml");
    for (out, needle) in [
        (repo.join("crates"), "not created by protospread"),
        (repo.join("crates/fetch/new-out"), "inside the source tree"),
        (repo.join("data"), "contains the input"),
        (repo.join("data/jobcannon/out"), "inside the source tree"),
    ] {
        let existed = out.exists();
        let o = protospread(&cfg, &out, &["fetch"]);
        assert_eq!(o.status.code(), Some(1), "{}: {}", out.display(), text(&o));
        assert!(
            stderr(&o).contains(needle),
            "{}: {}",
            out.display(),
            text(&o)
        );
        assert_eq!(out.exists(), existed, "{} was created", out.display());
    }
}

#[test]
fn a_file_protospread_did_not_write_in_a_stage_folder_stops_the_stage() {
    let (_d, cfg, out) = ran();
    fs_err::write(out.join("report/my-notes.md"), b"keep me").unwrap();
    let before = outputs(&out);
    for cmd in ["report", "run"] {
        let o = protospread(&cfg, &out, &[cmd]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            stderr(&o).contains("my-notes.md") && stderr(&o).contains("not listed"),
            "{}",
            text(&o)
        );
        assert_eq!(outputs(&out), before);
    }
    // Other folders protospread does not write (here: a user's folder) survive a run.
    fs_err::remove_file(out.join("report/my-notes.md")).unwrap();
    fs_err::create_dir_all(out.join("administer")).unwrap();
    fs_err::write(out.join("administer/m.jsonl"), b"records").unwrap();
    let o = protospread(&cfg, &out, &["run"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(
        fs_err::read(out.join("administer/m.jsonl")).unwrap(),
        b"records"
    );
    fs_err::remove_dir_all(out.join("administer")).unwrap();
    assert_complete(&out, "run with a user folder");
}

#[test]
fn a_second_writer_is_refused_while_the_lock_is_held() {
    let (_d, cfg, out) = ran();
    let before = outputs(&out);
    // This test process plays the first run: it holds the lock with its pid in the file.
    let mut lock = fs_err::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(out.join(".protospread.lock"))
        .unwrap();
    lock.try_lock().unwrap();
    lock.set_len(0).unwrap();
    writeln!(lock, "{}", std::process::id()).unwrap();
    for cmd in ["run", "fetch", "score", "aggregate", "report"] {
        let o = protospread(&cfg, &out, &[cmd]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        let e = stderr(&o);
        assert!(
            e.contains("another protospread process")
                && e.contains(&format!("pid {}", std::process::id())),
            "{e}"
        );
    }
    assert_eq!(outputs(&out), before);
    drop(lock);
    let o = protospread(&cfg, &out, &["run"]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn temporaries_of_dead_processes_are_removed_and_only_those() {
    let (d, cfg, out) = ran();
    let dead = dead_pid();
    let alive = std::process::id();
    fs_err::create_dir_all(out.join("cache")).unwrap();
    let planted_dead = [
        out.join(format!("cache/.{}.{dead}.part", "a".repeat(64))),
        out.join(format!("report/.verdict.csv.{dead}.tmp")),
        out.join(format!(".SHA256SUMS.{dead}.tmp")),
    ];
    for p in &planted_dead {
        fs_err::write(p, b"partial").unwrap();
    }
    // A dead run's staging folder beside out/, holding the download cache it had moved in.
    let staging = d.path().join(format!(".out.{dead}.tmp"));
    fs_err::create_dir_all(staging.join("score")).unwrap();
    fs_err::write(staging.join(".protospread"), b"marker").unwrap();
    fs_err::write(staging.join("score/x.parquet"), b"half").unwrap();
    // Dead runs killed before their marker was written: empty, or holding only the marker's
    // half-written temporary (removed); and an unmarked one with a file of someone else's (kept).
    let dead2 = dead_pid();
    let dead3 = dead_pid();
    let unmarked_empty = d.path().join(format!(".out.{dead2}.tmp"));
    fs_err::create_dir_all(&unmarked_empty).unwrap();
    let unmarked_half = d.path().join(format!(".out.{dead3}.tmp"));
    fs_err::create_dir_all(&unmarked_half).unwrap();
    fs_err::write(
        unmarked_half.join(format!("..protospread.{dead3}.tmp")),
        b"mar",
    )
    .unwrap();
    let foreign = d.path().join(format!(".out.{}.tmp", dead_pid()));
    fs_err::create_dir_all(&foreign).unwrap();
    fs_err::write(foreign.join("mine.txt"), b"a user's file").unwrap();
    let live = out.join(format!("cache/.{}.{alive}.part", "b".repeat(64)));
    fs_err::write(&live, b"in progress").unwrap();
    let user = d.path().join(format!(".notes.{dead}.txt"));
    fs_err::write(&user, b"not a temporary name").unwrap();

    let o = protospread(&cfg, &out, &["run"]);
    assert!(o.status.success(), "{}", text(&o));
    for p in &planted_dead {
        assert!(!p.exists(), "{} left", p.display());
    }
    assert!(!staging.exists());
    assert!(!unmarked_empty.exists());
    assert!(!unmarked_half.exists());
    assert!(foreign.join("mine.txt").exists());
    assert!(live.exists(), "a live process's download was removed");
    assert!(user.exists());
    assert_complete(&out, "after cleanup");
}

#[test]
fn a_failed_run_leaves_the_previous_output() {
    let (d, _, out) = ran();
    let before = outputs(&out);
    // A report section that cannot be rendered fails the last stage, after fetch, score and
    // aggregate have written their new folders in the staging area.
    let bad = config_in(
        d.path(),
        "bad.toml",
        "[report]\ntables = [\"score/no_such_table.parquet\"]\n",
    );
    let o = protospread(&bad, &out, &["run"]);
    assert_ne!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(outputs(&out), before);
    assert_no_temporaries(d.path());
}

#[test]
fn os_errors_are_printed_once() {
    let d = tempfile::tempdir().unwrap();
    let o = Command::new(BIN)
        .arg("--config")
        .arg(d.path().join("missing.toml"))
        .arg("fetch")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert_eq!(e.matches("No such file or directory").count(), 1, "{e}");
    assert!(e.contains("missing.toml"), "{e}");
}

#[test]
fn duplicate_human_ids_are_refused_with_file_row_and_column() {
    let d = tempfile::tempdir().unwrap();
    let src = fs_err::read_to_string(repo().join("data/jobcannon/dark_triad.csv")).unwrap();
    let mut lines: Vec<&str> = src.lines().collect();
    let first_id = lines[1].split(',').next().unwrap().to_string();
    let copied = lines[2].replacen(lines[2].split(',').next().unwrap(), &first_id, 1);
    lines[2] = &copied;
    let csv = format!("{}\n", lines.join("\n"));
    fs_err::write(d.path().join("dt.csv"), &csv).unwrap();
    let cfg = d.path().join("p.toml");
    fs_err::write(
        &cfg,
        format!(
            "[study]\nname = \"t\"\n\n[[inputs]]\nname = \"dt\"\nrole = \"human\"\ninstrument = \"dark_triad\"\npath = \"dt.csv\"\nsha256 = \"{}\"\n",
            sha256(csv.as_bytes())
        ),
    )
    .unwrap();
    let o = protospread(&cfg, &d.path().join("out"), &["fetch"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let e = stderr(&o);
    assert!(
        e.contains("dt.csv")
            && e.contains("row 2 (line 3), column 1 `id`")
            && e.contains(&format!("duplicate id {first_id}")),
        "{e}"
    );
}

#[test]
fn huge_item_count_in_the_configuration_is_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config_in(d.path(), "p.toml", "");
    let text_cfg = fs_err::read_to_string(&cfg).unwrap().replacen(
        "[study]",
        "[answers]\nextra_tests = [{ name = \"x\", items = 4000000000 }]\n\n[study]",
        1,
    );
    fs_err::write(&cfg, text_cfg).unwrap();
    let o = protospread(&cfg, &d.path().join("out"), &["run"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        stderr(&o).contains("items = 4000000000 is out of range"),
        "{}",
        text(&o)
    );
}

#[test]
fn verify_leaves_no_temporary_folder_after_a_manifest_error() {
    let d = tempfile::tempdir().unwrap();
    let tmp = d.path().join("tmp");
    fs_err::create_dir_all(&tmp).unwrap();
    let sums = d.path().join("checksums");
    fs_err::create_dir_all(&sums).unwrap();
    fs_err::write(sums.join("inputs.sha256"), "not a manifest\n").unwrap();
    fs_err::write(sums.join("outputs.sha256"), "not a manifest\n").unwrap();
    let o = verify_with_tmpdir(&sums, &tmp);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(fs_err::read_dir(&tmp).unwrap().count(), 0);
}

// ---- bag ------------------------------------------------------------------------------------

#[test]
fn bag_refuses_tampered_outputs_symlinks_and_impossible_dates() {
    let (d, cfg, out) = ran();
    let bag = |name: &str, date: &str| {
        protospread(
            &cfg,
            &out,
            &["bag", d.path().join(name).to_str().unwrap(), "--date", date],
        )
    };
    let o = bag("b1", "2025-13-45");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("not a calendar date"), "{}", text(&o));
    assert!(!d.path().join("b1").exists());

    let o = bag("ok", "2025-02-03");
    assert!(o.status.success(), "{}", text(&o));

    fs_err::os::unix::fs::symlink("/etc/hostname", out.join("hostname")).unwrap();
    let o = bag("b2", "2025-02-03");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("symlink"), "{}", text(&o));
    assert!(!d.path().join("b2").exists());
    fs_err::remove_file(out.join("hostname")).unwrap();

    let verdict = out.join("report/verdict.csv");
    let mut bytes = fs_err::read(&verdict).unwrap();
    bytes.extend_from_slice(b"tampered\n");
    fs_err::write(&verdict, bytes).unwrap();
    let o = bag("b3", "2025-02-03");
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        stderr(&o).contains("verdict.csv") && stderr(&o).contains("does not match"),
        "{}",
        text(&o)
    );
    assert!(!d.path().join("b3").exists());
}

// ---- administer -----------------------------------------------------------------------------

/// A loopback chat-completions stub: every request gets `status` and a body made by `body`
/// from the request's headers (as received, one per line) and body. Stops with the test.
fn stub(status: u16, body: fn(&str, &str) -> String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            std::thread::spawn(move || serve_one(stream, status, body));
        }
    });
    format!("http://{addr}/v1")
}

fn serve_one(mut stream: TcpStream, status: u16, body: fn(&str, &str) -> String) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut headers = String::new();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() {
            return;
        }
        let h = h.trim_end().to_string();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        headers.push_str(&h);
        headers.push('\n');
    }
    let mut req = vec![0u8; len];
    if reader.read_exact(&mut req).is_err() {
        return;
    }
    let b = body(&headers, &String::from_utf8_lossy(&req));
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        b.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(b.as_bytes());
}

fn answer(_: &str, _: &str) -> String {
    serde_json::json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "3"}, "finish_reason": "stop"}]
    })
    .to_string()
}

fn echo_headers(headers: &str, _: &str) -> String {
    serde_json::json!({"error": {"message": "bad request", "received_headers": headers}})
        .to_string()
}

fn administer(dir: &Path, base_url: &str, out: &Path, extra: &[&str], key: Option<&str>) -> Output {
    let mut c = Command::new(BIN);
    c.current_dir(dir)
        .arg("--config")
        .arg(repo().join("pipeline.toml"))
        .args(["administer", "--base-url", base_url, "--model", "m", "--to"])
        .arg(out)
        .args(["--conditions", "S0", "--retries", "0"])
        .args(extra);
    if let Some(k) = key {
        c.env("PROTOSPREAD_TEST_KEY", k)
            .args(["--api-key-env", "PROTOSPREAD_TEST_KEY"]);
    }
    c.output().unwrap()
}

#[test]
fn administer_refuses_a_file_that_is_not_its_own_and_touches_nothing() {
    let d = tempfile::tempdir().unwrap();
    let url = stub(200, answer);
    for content in [
        "{\"a\":1}",
        "{\"a\":1}\n{\"b\":2}",
        "just notes, no newline",
    ] {
        let f = d.path().join("one.jsonl");
        fs_err::write(&f, content).unwrap();
        let o = administer(d.path(), &url, &f, &["--items", "1"], None);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            stderr(&o).contains("not a stored-answer file"),
            "{}",
            text(&o)
        );
        assert_eq!(fs_err::read_to_string(&f).unwrap(), content);
    }
}

#[test]
fn administer_never_stores_or_prints_the_key() {
    let d = tempfile::tempdir().unwrap();
    let url = stub(400, echo_headers);
    let f = d.path().join("a.jsonl");
    let key = "sk-test-0123456789abcdef";
    let o = administer(d.path(), &url, &f, &["--items", "1,2"], Some(key));
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let stored = fs_err::read_to_string(&f).unwrap();
    assert!(stored.contains("HTTP 400"), "{stored}");
    assert!(
        stored.contains("<redacted>"),
        "the echo is kept, redacted: {stored}"
    );
    for (what, s) in [("file", stored.as_str()), ("output", &text(&o))] {
        assert!(!s.contains("0123456789abcdef"), "key in the {what}: {s}");
    }
}

#[test]
fn a_second_administer_on_the_same_file_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let url = stub(200, answer);
    let f = d.path().join("a.jsonl");
    let o = administer(d.path(), &url, &f, &["--items", "1"], None);
    assert!(o.status.success(), "{}", text(&o));
    let before = fs_err::read(&f).unwrap();
    let held = fs_err::OpenOptions::new().append(true).open(&f).unwrap();
    held.try_lock().unwrap();
    let o = administer(d.path(), &url, &f, &["--items", "2"], None);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        stderr(&o).contains("another `protospread administer`"),
        "{}",
        text(&o)
    );
    assert_eq!(fs_err::read(&f).unwrap(), before);
    drop(held);
    let o = administer(d.path(), &url, &f, &["--items", "2"], None);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn administer_items_outside_the_instrument_are_an_error() {
    let d = tempfile::tempdir().unwrap();
    let url = stub(200, answer);
    let f = d.path().join("a.jsonl");
    let o = administer(d.path(), &url, &f, &["--items", "0,999"], None);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        stderr(&o).contains("--items: 0 is not an item"),
        "{}",
        text(&o)
    );
    assert!(!f.exists());
}

// ---- no number makes protospread panic or abort ---------------------------------------------

mod numbers {
    use super::*;
    use proptest::prelude::*;

    /// The process ended by itself with 0, 1, 2 or 64 (usage) and printed no panic.
    fn clean_exit(o: &Output) -> Result<(), TestCaseError> {
        prop_assert!(
            matches!(o.status.code(), Some(0..=2 | 64)),
            "killed or aborted: {}",
            text(o)
        );
        prop_assert!(!stderr(o).contains("panicked"), "{}", text(o));
        Ok(())
    }

    fn any_number() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<u64>().prop_map(|v| v.to_string()),
            (0u64..5000).prop_map(|v| v.to_string()),
            any::<i64>().prop_map(|v| v.to_string()),
            Just("18446744073709551616".to_string()),
            Just("0".to_string()),
        ]
    }

    const KEYS: &[&str] = &[
        "[fetch] timeout_seconds",
        "[fetch] retries",
        "[aggregate] target_partitions",
        "[administer] concurrency",
        "[administer] timeout_seconds",
        "[administer] retries",
        "[administer] retry_backoff_ms",
        "[administer] max_tokens_single",
        "[administer] max_tokens_whole",
        "[administer] st1_samples",
        "[sweep] num_fewshot",
        "[answers] extra_tests items",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        #[test]
        fn configuration_numbers(key in 0..KEYS.len(), value in any_number()) {
            let d = tempfile::tempdir().unwrap();
            let (section, name) = KEYS[key].split_once(' ').unwrap();
            let body = if name == "items" {
                format!("[answers]\nextra_tests = [{{ name = \"x\", items = {value} }}]\n")
            } else {
                format!("{section}\n{name} = {value}\n")
            };
            let cfg = d.path().join("p.toml");
            fs_err::write(&cfg, format!("[study]\nname = \"t\"\n\n{body}")).unwrap();
            // A dry run loads and checks the whole configuration, plans, and sends nothing.
            let o = Command::new(BIN)
                .arg("--config").arg(&cfg)
                .args(["administer", "--dry-run", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                       "--instrument"])
                .arg(repo().join("data/instruments/ipip50.toml"))
                .output().unwrap();
            clean_exit(&o)?;
        }

        #[test]
        fn command_line_numbers(
            flag in prop::sample::select(vec!["--concurrency", "--timeout", "--retries", "--items"]),
            value in any_number(),
        ) {
            let o = Command::new(BIN)
                .arg("--config").arg(repo().join("pipeline.toml"))
                .args(["administer", "--dry-run", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                       flag, &value])
                .output().unwrap();
            clean_exit(&o)?;
        }
    }
}

// ---- report table names, single stages and the top SHA256SUMS -------------------------------

/// Issue 10 item 9: a `[report]` table whose file stem is `report` would be rendered over
/// `report.md`. It is a configuration error, found before any stage runs (nothing is fetched,
/// scored or written), naming the table; `out/` and a fresh `--out` are left as they were.
#[test]
fn a_report_table_named_report_is_refused_before_anything_runs() {
    let (d, _, out) = ran();
    let before = outputs(&out);
    // A real Parquet table outside out/, listed by absolute path, so only its name is wrong.
    let table = d.path().join("extra/report.parquet");
    fs_err::create_dir_all(table.parent().unwrap()).unwrap();
    fs_err::copy(out.join("score/norms.parquet"), &table).unwrap();
    let bad = config_in(
        d.path(),
        "bad.toml",
        &format!(
            "[report]\ntables = [\"score/norms.parquet\", \"{}\"]\n",
            table.display()
        ),
    );
    let fresh = d.path().join("fresh");
    for (cmd, dir) in [("run", &out), ("report", &out), ("run", &fresh)] {
        // Not quiet: a stage that ran would have printed its summary.
        let o = Command::new(BIN)
            .arg("--config")
            .arg(&bad)
            .arg("--out")
            .arg(dir)
            .arg(cmd)
            .output()
            .unwrap();
        let ctx = format!("{cmd} --out {}", dir.display());
        assert_eq!(o.status.code(), Some(1), "{ctx}: {}", text(&o));
        let e = stderr(&o);
        assert!(
            e.contains(&table.display().to_string()) && e.contains("`report.md`"),
            "{ctx}: {}",
            text(&o)
        );
        assert!(o.stdout.is_empty(), "{ctx}: a stage ran: {}", text(&o));
    }
    assert_eq!(outputs(&out), before);
    assert!(!fresh.exists());
    assert_no_temporaries(d.path());
}

/// The top manifest's entries below `stage/`.
fn listed_under(manifest: &str, stage: &str) -> Vec<String> {
    manifest
        .lines()
        .filter(|l| l[66..].starts_with(&format!("{stage}/")))
        .map(str::to_string)
        .collect()
}

/// `sha256sum -c SHA256SUMS` passes in `out`.
fn sums_pass(out: &Path) -> bool {
    Command::new("sha256sum")
        .args(["-c", "--quiet", "SHA256SUMS"])
        .current_dir(out)
        .status()
        .unwrap()
        .success()
}

/// A single stage after `run`: the top SHA256SUMS lists the new stage files and never a stage
/// made from outputs that have since changed; such stages are named as stale, and `bag`
/// refuses the mixed folder. Running the stale stages brings back one consistent out/, the
/// same as a fresh `run`. A failed stage leaves the top manifest as it was.
#[test]
fn single_stages_keep_the_top_manifest_to_consistent_stages() {
    let d = tempfile::tempdir().unwrap();
    let a = config_in(d.path(), "a.toml", "");
    let b = config_in(d.path(), "b.toml", "[aggregate]\nverdict_share = 0.77\n");
    let out = d.path().join("out");
    let o = protospread(&a, &out, &["run"]);
    assert!(o.status.success(), "{}", text(&o));
    let top_a = assert_complete(&out, "run A");

    // The same score again: nothing downstream is stale, the manifest is unchanged.
    let o = protospread(&a, &out, &["score"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        !stderr(&o).contains("stale") && !stderr(&o).contains("warning"),
        "{}",
        text(&o)
    );
    assert_eq!(assert_complete(&out, "score again"), top_a);

    // A changed aggregate: report/ was made from the previous aggregate tables.
    let o = protospread(&b, &out, &["aggregate"]);
    assert!(o.status.success(), "{}", text(&o));
    let e = stderr(&o);
    assert!(
        e.contains("warning:") && e.contains(&out.join("report").display().to_string()),
        "{}",
        text(&o)
    );
    assert!(sums_pass(&out), "sha256sum -c after aggregate alone");
    let top = fs_err::read_to_string(out.join("SHA256SUMS")).unwrap();
    assert!(listed_under(&top, "report").is_empty(), "{top}");
    assert_eq!(listed_under(&top, "fetch"), listed_under(&top_a, "fetch"));
    assert_eq!(listed_under(&top, "score"), listed_under(&top_a, "score"));
    assert_ne!(
        listed_under(&top, "aggregate"),
        listed_under(&top_a, "aggregate")
    );
    let o = protospread(
        &b,
        &out,
        &[
            "bag",
            d.path().join("bag").to_str().unwrap(),
            "--date",
            "2025-02-03",
        ],
    );
    assert_eq!(
        o.status.code(),
        Some(1),
        "bag of a mixed out/: {}",
        text(&o)
    );
    assert!(!d.path().join("bag").exists());

    // A report made from the new aggregate: one consistent out/ again, whose aggregate and
    // report files are those of a fresh run B (fetch and score files carry the configuration's
    // hash in their Parquet metadata, so they differ from run B's, and so do the report's
    // copies of the score files: they are the bytes of this out/score/).
    let o = protospread(&b, &out, &["report"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(!stderr(&o).contains("warning"), "{}", text(&o));
    let top_b = assert_complete(&out, "report after aggregate");
    let fresh = d.path().join("fresh");
    let o = protospread(&b, &fresh, &["run"]);
    assert!(o.status.success(), "{}", text(&o));
    let top_fresh = assert_complete(&fresh, "run B");
    assert_eq!(
        listed_under(&top_b, "aggregate"),
        listed_under(&top_fresh, "aggregate")
    );
    // Of a report file, its line; of a copy of a score file, whether it has that file's hash.
    let report_files = |top: &str| -> Vec<String> {
        listed_under(top, "report")
            .into_iter()
            .map(|l| {
                let score = format!("score/{}", &l[73..]);
                top.lines()
                    .find(|s| l.ends_with(".parquet") && s[66..] == score)
                    .map_or(l.clone(), |s| {
                        format!("{}: same bytes {}", &l[66..], s[..64] == l[..64])
                    })
            })
            .collect()
    };
    let files = report_files(&top_b);
    assert!(
        files.iter().any(|l| l.ends_with(": same bytes true")),
        "{files:?}"
    );
    assert_eq!(files, report_files(&top_fresh));

    // A failed stage (scorer parity broken by a key edit) changes nothing, the manifest
    // included.
    let key = fs_err::read_to_string(repo().join("data/scoring_key.csv")).unwrap();
    let bad_key = d.path().join("bad_key.csv");
    fs_err::write(
        &bad_key,
        key.lines()
            .map(|l| {
                if l.starts_with("big_five,30,") {
                    let mut f: Vec<&str> = l.split(',').collect();
                    f[4] = "2";
                    f.join(",")
                } else {
                    l.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
            + "\n",
    )
    .unwrap();
    let c = fs_err::read_to_string(&b).unwrap().replace(
        &format!("{}/data/scoring_key.csv", repo().display()),
        &bad_key.display().to_string(),
    );
    let c_path = d.path().join("c.toml");
    fs_err::write(&c_path, c).unwrap();
    let before = outputs(&out);
    let o = protospread(&c_path, &out, &["score"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert_eq!(outputs(&out), before);
    assert_no_temporaries(d.path());
}

// ---- issue 42: second pass -------------------------------------------------------------------

/// A key with a `/` (JSON-escaped as `\/` by many servers) and fragments that must never be
/// stored or printed.
const KEY42: &str = "sk-ab/cd9f8e7d6c5b4a3210";
const KEY42_FRAGMENTS: [&str; 4] = ["cd9f8e7d", "9f8e7d6c", "7d6c5b4a", "5b4a3210"];

/// A 401 that echoes the key as a JSON string: `sk-ab\/cd...`.
fn echo_key_json(_: &str, _: &str) -> String {
    serde_json::json!({"error": {"message": format!("invalid api key provided: {KEY42}")}})
        .to_string()
        .replace('/', "\\/")
}

/// A 401 that escapes every character of the key as `\uXXXX`, nested in a string that is
/// itself JSON.
fn echo_key_unicode(_: &str, _: &str) -> String {
    let esc: String = KEY42
        .chars()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    format!(
        r#"{{"error":{{"message":"invalid key {esc}","inner":"{{\"key\":\"{}\"}}"}}}}"#,
        esc.replace('\\', "\\\\")
    )
}

/// A 400 with the key percent-encoded in a URL.
fn echo_key_percent(_: &str, _: &str) -> String {
    let enc: String = KEY42.bytes().map(|b| format!("%{b:02X}")).collect();
    serde_json::json!({"error": {"message": "bad request", "url": format!("https://x/?key={enc}")}})
        .to_string()
}

/// A 200 whose reply, model and usage echo the key without its `sk-` prefix.
fn answer_echoing_key(_: &str, _: &str) -> String {
    let bare = KEY42.trim_start_matches("sk-");
    serde_json::json!({
        "model": format!("m-{bare}"),
        "system_fingerprint": bare.to_uppercase(),
        "usage": {"note": format!("key {bare}"), bare: 1},
        "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("3 (your key is {bare})")}, "finish_reason": "stop"}]
    })
    .to_string()
}

/// Issue 42 case 1: the key is redacted however the server encodes it, in every field, before
/// anything is written.
#[test]
fn administer_redacts_the_key_however_the_server_encodes_it() {
    let d = tempfile::tempdir().unwrap();
    type Server = (u16, fn(&str, &str) -> String, Option<i32>);
    let servers: [Server; 4] = [
        (401, echo_key_json, Some(2)),
        (401, echo_key_unicode, Some(2)),
        (400, echo_key_percent, Some(2)),
        (200, answer_echoing_key, Some(0)),
    ];
    for (k, (status, body, code)) in servers.into_iter().enumerate() {
        let url = stub(status, body);
        let f = d.path().join(format!("a{k}.jsonl"));
        let o = administer(d.path(), &url, &f, &["--items", "1"], Some(KEY42));
        assert_eq!(o.status.code(), code, "server {k}: {}", text(&o));
        let stored = fs_err::read_to_string(&f).unwrap();
        assert!(stored.contains("<redacted>"), "server {k}: {stored}");
        for (what, s) in [("file", stored.as_str()), ("output", &text(&o))] {
            for frag in KEY42_FRAGMENTS {
                assert!(
                    !s.to_lowercase().contains(frag),
                    "server {k}: key fragment {frag} in the {what}: {s}"
                );
            }
        }
    }
}

/// Issue 42 case 7: administer refuses an --out that is a symlink or a device before sending
/// any request; the link and its target are untouched.
#[test]
fn administer_refuses_a_link_or_a_device_as_out_before_sending() {
    let d = tempfile::tempdir().unwrap();
    // Any request reaching the server is recorded in this file by the test below.
    let url = stub(200, answer);
    let target = d.path().join("real.jsonl");
    let ok = administer(d.path(), &url, &target, &["--items", "1"], None);
    assert!(ok.status.success(), "{}", text(&ok));
    let before = fs_err::read(&target).unwrap();
    let link = d.path().join("link.jsonl");
    fs_err::os::unix::fs::symlink(&target, &link).unwrap();
    // A server that would count requests: none may arrive.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let silent = format!("http://{}/v1", listener.local_addr().unwrap());
    let null = d.path().join("null.jsonl");
    fs_err::os::unix::fs::symlink("/dev/null", &null).unwrap();
    for out in [link.clone(), null, PathBuf::from("/dev/null")] {
        let o = administer(d.path(), &silent, &out, &["--items", "1,2"], None);
        assert_eq!(o.status.code(), Some(1), "{}: {}", out.display(), text(&o));
        if out != Path::new("/dev/null") {
            assert!(stderr(&o).contains("not a regular file"), "{}", text(&o));
        }
        assert!(
            listener.accept().is_err(),
            "{}: a request was sent",
            out.display()
        );
    }
    assert!(fs_err::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(fs_err::read(&target).unwrap(), before);
}

/// Issue 42 case 2: protospread never writes or deletes through a link: a lock file that is a
/// link, a cache that is a link to a folder with temporaries' names, a staging folder's name
/// beside out/ that is a link to a user's folder.
#[test]
fn no_write_or_deletion_through_a_link() {
    let (d, cfg, out) = ran();
    let before = outputs(&out);

    // The lock file is a link to a user's file.
    let precious = d.path().join("v");
    fs_err::write(&precious, b"precious\n").unwrap();
    let _ = fs_err::remove_file(out.join(".protospread.lock"));
    fs_err::os::unix::fs::symlink(&precious, out.join(".protospread.lock")).unwrap();
    for cmd in ["run", "score"] {
        let o = protospread(&cfg, &out, &[cmd]);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {}", text(&o));
        assert!(stderr(&o).contains("symlink"), "{cmd}: {}", text(&o));
        assert_eq!(fs_err::read(&precious).unwrap(), b"precious\n");
    }
    fs_err::remove_file(out.join(".protospread.lock")).unwrap();

    // The cache is a link to a user's folder holding files with temporaries' names.
    let dead = dead_pid();
    let user = d.path().join("userdir");
    fs_err::create_dir_all(&user).unwrap();
    let planted = [
        user.join(format!(".x.{dead}.part")),
        user.join(format!(".y.{dead}.tmp")),
    ];
    for p in &planted {
        fs_err::write(p, b"mine").unwrap();
    }
    fs_err::os::unix::fs::symlink(&user, out.join("cache")).unwrap();
    let o = protospread(&cfg, &out, &["run"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("symlink"), "{}", text(&o));
    for p in &planted {
        assert!(p.exists(), "{} was deleted through the link", p.display());
    }
    fs_err::remove_file(out.join("cache")).unwrap();
    assert_eq!(outputs(&out), before);

    // A link named like a dead run's staging folder, to a folder that looks like one.
    let user2 = d.path().join("D");
    fs_err::create_dir_all(user2.join("cache")).unwrap();
    fs_err::copy(out.join(".protospread"), user2.join(".protospread")).unwrap();
    fs_err::write(user2.join("thesis.txt"), b"x").unwrap();
    fs_err::write(user2.join("cache/c.bin"), b"c").unwrap();
    let staging = d.path().join(format!(".out.{}.tmp", dead_pid()));
    fs_err::os::unix::fs::symlink(&user2, &staging).unwrap();
    let o = protospread(&cfg, &out, &["run"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(user2.join("thesis.txt").exists(), "thesis.txt deleted");
    assert!(user2.join("cache/c.bin").exists(), "D/cache moved");
    assert!(!out.join("cache").exists(), "D/cache moved into out/");
    assert!(
        fs_err::symlink_metadata(&staging).is_ok(),
        "the link was removed"
    );
    assert_complete(&out, "after the links");
}

/// `[[inputs]]` TOML for an answers file at `path` with any sha256 (the checks under test come
/// before or instead of the hash).
fn answers_input(name: &str, path: &Path, sha: &str) -> String {
    format!(
        "[[inputs]]\nname = \"{name}\"\nrole = \"answers\"\nlabel = \"simulated\"\npath = \"{}\"\nsha256 = \"{sha}\"\n",
        path.display()
    )
}

/// The first `n` records of the simulated answers as a Parquet file at `path`, every column
/// text except `list_column` (if any), which becomes list<string>.
fn answers_parquet(path: &Path, n: usize, list_column: Option<&str>) -> String {
    use arrow::array::{Array, ArrayRef, ListBuilder, StringArray, StringBuilder};
    use arrow::datatypes::{Field, Schema};
    use std::sync::Arc;
    let text =
        fs_err::read_to_string(repo().join("data/simulated/simulated_answers.jsonl")).unwrap();
    let rows: Vec<serde_json::Map<String, serde_json::Value>> = text
        .lines()
        .take(n.max(1))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let names: Vec<String> = rows[0].keys().cloned().collect();
    let rows = &rows[..n];
    let cell = |r: &serde_json::Map<String, serde_json::Value>, k: &str| match &r[k] {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        v => Some(v.to_string()),
    };
    let mut fields = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for k in &names {
        if Some(k.as_str()) == list_column {
            let mut b = ListBuilder::new(StringBuilder::new());
            for r in rows {
                b.values().append_option(cell(r, k));
                b.append(true);
            }
            let a = b.finish();
            fields.push(Field::new(k, a.data_type().clone(), true));
            cols.push(Arc::new(a));
        } else {
            let a: StringArray = rows.iter().map(|r| cell(r, k)).collect();
            fields.push(Field::new(k, arrow::datatypes::DataType::Utf8, true));
            cols.push(Arc::new(a));
        }
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = arrow::record_batch::RecordBatch::try_new(schema.clone(), cols).unwrap();
    let f = fs_err::File::create(path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(f, schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    sha256(&fs_err::read(path).unwrap())
}

/// Issue 42 cases 3 and 4: a Parquet answers file is read only with the format's own cell
/// types (a list column is refused, naming file and column), and a file without records is
/// an error naming it, as for CSV and JSON Lines. The same file with text columns imports.
#[test]
fn parquet_answers_with_list_columns_or_no_rows_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("extra.parquet");
    let sha = answers_parquet(&p, 20, None);
    let cfg = config_in(d.path(), "ok.toml", &answers_input("extra", &p, &sha));
    let o = protospread(&cfg, &d.path().join("out-ok"), &["fetch"]);
    assert!(o.status.success(), "text columns import: {}", text(&o));
    for (k, (rows, list)) in [(20, Some("model")), (20, Some("reply")), (0, None)]
        .into_iter()
        .enumerate()
    {
        let p = d.path().join(format!("bad{k}.parquet"));
        let sha = answers_parquet(&p, rows, list);
        let cfg = config_in(
            d.path(),
            &format!("p{k}.toml"),
            &answers_input("extra", &p, &sha),
        );
        let out = d.path().join(format!("out{k}"));
        let o = protospread(&cfg, &out, &["fetch"]);
        assert_eq!(o.status.code(), Some(1), "{k}: {}", text(&o));
        let e = stderr(&o);
        assert!(e.contains(&format!("bad{k}.parquet")), "{k}: {e}");
        match list {
            Some(c) => assert!(
                e.contains(&format!("column {c}")) && e.contains("List"),
                "{e}"
            ),
            None => assert!(e.contains("empty file (no records)"), "{e}"),
        }
        assert!(
            !out.exists(),
            "{k}: a failed fetch into a new folder left it"
        );
    }
}

/// Issue 42 case 6: inputs must be regular files: a FIFO and a link to /dev/zero are refused at
/// once instead of being read until killed.
#[test]
fn inputs_that_are_not_regular_files_are_refused_at_once() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo.jsonl");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let zero = d.path().join("zero.jsonl");
    fs_err::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for (k, p) in [fifo, zero].iter().enumerate() {
        let cfg = config_in(
            d.path(),
            &format!("p{k}.toml"),
            &answers_input("extra", p, &"0".repeat(64)),
        );
        let mut child = Command::new(BIN)
            .arg("--config")
            .arg(&cfg)
            .arg("--out")
            .arg(d.path().join(format!("out{k}")))
            .args(["--quiet", "fetch"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if started.elapsed().as_secs() > 60 {
                let _ = child.kill();
                panic!("{}: still reading after 60 s", p.display());
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        };
        let mut e = String::new();
        child.stderr.take().unwrap().read_to_string(&mut e).unwrap();
        assert_eq!(status.code(), Some(1), "{e}");
        assert!(e.contains("not a regular file"), "{e}");
    }
}

/// Scratch folders of protospread in `tmp`.
fn scratch(tmp: &Path) -> Vec<String> {
    fs_err::read_dir(tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("protospread-"))
        .collect()
}

/// Issue 42 case 5: scratch folders of killed processes are removed by the next run; Ctrl-C
/// and SIGTERM remove this run's scratch folders and lock; a failed run leaves no lock; a
/// failed `verify` removes its folder.
#[test]
fn no_leftovers_after_kills_signals_and_failures() {
    let d = tempfile::tempdir().unwrap();
    let tmp = d.path().join("tmp");
    fs_err::create_dir_all(&tmp).unwrap();
    let cfg = config_in(d.path(), "p.toml", "");
    let out = d.path().join("out");
    let run = |c: &Path, args: &[&str]| {
        Command::new(BIN)
            .arg("--config")
            .arg(c)
            .arg("--out")
            .arg(&out)
            .arg("--quiet")
            .args(args)
            .env("TMPDIR", &tmp)
            .output()
            .unwrap()
    };
    // What kill -9 leaves: scratch folders of dead processes; the next run removes them.
    let dead = dead_pid();
    for kind in ["import", "aggregate", "verify"] {
        let s = tmp.join(format!("protospread-{kind}-{dead}-AbC123"));
        fs_err::create_dir_all(s.join("sub")).unwrap();
        fs_err::write(s.join("sub/validated.parquet"), b"x").unwrap();
    }
    let theirs = tmp.join("protospread-notes");
    fs_err::create_dir_all(&theirs).unwrap();
    let o = run(&cfg, &["run"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(scratch(&tmp), ["protospread-notes"], "dead scratch left");
    fs_err::remove_dir(&theirs).unwrap();
    assert!(
        !out.join(".protospread.lock").exists(),
        "lock left by a run"
    );

    // A failed run leaves no lock file.
    let bad = config_in(
        d.path(),
        "bad.toml",
        "[report]\ntables = [\"score/no_such_table.parquet\"]\n",
    );
    let o = run(&bad, &["run"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        !out.join(".protospread.lock").exists(),
        "lock left by a failed run"
    );

    // SIGINT and SIGTERM while the aggregate stage holds its scratch folder.
    for sig in ["-INT", "-TERM"] {
        let mut child = Command::new(BIN)
            .arg("--config")
            .arg(&cfg)
            .arg("--out")
            .arg(&out)
            .args(["--quiet", "run"])
            .env("TMPDIR", &tmp)
            .spawn()
            .unwrap();
        let started = Instant::now();
        while scratch(&tmp).is_empty() {
            assert!(
                child.try_wait().unwrap().is_none(),
                "{sig}: the run ended before its scratch folder was seen"
            );
            assert!(started.elapsed().as_secs() < 60);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let kill = Command::new("kill")
            .arg(sig)
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(kill.success());
        let status = child.wait().unwrap();
        assert!(!status.success(), "{sig}: {status:?}");
        assert!(scratch(&tmp).is_empty(), "{sig}: {:?}", scratch(&tmp));
        assert!(!out.join(".protospread.lock").exists(), "{sig}: lock left");
        // The next run cleans what the signal left beside out/ and succeeds.
        let o = run(&cfg, &["run"]);
        assert!(o.status.success(), "{}", text(&o));
        assert_complete(&out, sig);
    }

    // A failed verify (a changed checksum) removes its regenerated folder.
    let sums = d.path().join("checksums");
    fs_err::create_dir_all(&sums).unwrap();
    for f in ["inputs.sha256", "outputs.sha256"] {
        fs_err::copy(repo().join("checksums").join(f), sums.join(f)).unwrap();
    }
    let outputs_sums = fs_err::read_to_string(sums.join("outputs.sha256")).unwrap();
    let changed = format!("{}{}", "0".repeat(64), &outputs_sums[64..]);
    fs_err::write(sums.join("outputs.sha256"), changed).unwrap();
    let o = verify_with_tmpdir(&sums, &tmp);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("removed"), "{}", text(&o));
    assert!(scratch(&tmp).is_empty(), "{:?}", scratch(&tmp));
}

/// Issue 42 item 8: an out/ holding only a lock file (of a failed or killed run) is
/// protospread's; a lock held on a brand-new out/ gets the lock message; verify works with
/// the temporary folder inside a source tree; a fresh subfolder of an input's folder is a
/// valid --out; a redirect to another scheme says so.
#[test]
fn messages_name_the_real_cause() {
    let d = tempfile::tempdir().unwrap();
    let cfg = config_in(d.path(), "p.toml", "");

    let out = d.path().join("only-lock");
    fs_err::create_dir_all(&out).unwrap();
    fs_err::write(out.join(".protospread.lock"), b"12345\n").unwrap();
    let o = protospread(&cfg, &out, &["fetch"]);
    assert!(o.status.success(), "{}", text(&o));

    let fresh = d.path().join("fresh");
    fs_err::create_dir_all(&fresh).unwrap();
    let lock = fs_err::File::create(fresh.join(".protospread.lock")).unwrap();
    lock.try_lock().unwrap();
    let o = protospread(&cfg, &fresh, &["run"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        stderr(&o).contains("another protospread process"),
        "{}",
        text(&o)
    );
    drop(lock);

    // The temporary folder inside a source tree (a folder with a Cargo.toml).
    let project = d.path().join("project");
    fs_err::create_dir_all(project.join("tmp")).unwrap();
    fs_err::write(project.join("Cargo.toml"), b"[package]\n").unwrap();
    let o = Command::new(BIN)
        .arg("--config")
        .arg(repo().join("pipeline.toml"))
        .arg("verify")
        .env("TMPDIR", project.join("tmp"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(scratch(&project.join("tmp")).is_empty());

    // Inputs and outputs under one working folder: a new subfolder of an input's folder.
    let work = d.path().join("work");
    let cp = Command::new("cp")
        .arg("-r")
        .arg(repo().join("data"))
        .arg(&work)
        .status()
        .unwrap();
    assert!(cp.success());
    let wcfg = d.path().join("wcfg.toml");
    let text_cfg = fs_err::read_to_string(repo().join("pipeline.toml")).unwrap();
    fs_err::write(
        &wcfg,
        text_cfg.replace("\"data/", &format!("\"{}/", work.display())),
    )
    .unwrap();
    let inside = work.join("jobcannon/out");
    let o = protospread(&wcfg, &inside, &["fetch"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = protospread(&wcfg, &inside, &["fetch"]);
    assert!(o.status.success(), "again: {}", text(&o));
    let theirs = work.join("jobcannon/theirs");
    fs_err::create_dir_all(&theirs).unwrap();
    fs_err::write(theirs.join("notes.txt"), b"mine").unwrap();
    let o = protospread(&wcfg, &theirs, &["fetch"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert_eq!(fs_err::read_dir(&theirs).unwrap().count(), 1);

    // A redirect to ftp:// is named as such, not as a redirect loop.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 302 Found\r\nLocation: ftp://127.0.0.1/x.jsonl\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
        }
    });
    let extra = format!(
        "[[inputs]]\nname = \"remote\"\nrole = \"answers\"\nlabel = \"simulated\"\nurl = \"http://{addr}/x.jsonl\"\nsha256 = \"{}\"\n",
        "0".repeat(64)
    );
    let rcfg = config_in(d.path(), "r.toml", &extra);
    let o = protospread(&rcfg, &d.path().join("rout"), &["fetch"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        stderr(&o).contains("only http:// and https://") && !stderr(&o).contains("redirects"),
        "{}",
        text(&o)
    );
}

/// Issue 42 case 6: `aggregate --partitions` and `[aggregate] target_partitions` are bounded at
/// 16 with a clear error, before any work (64, and at times 32, run out of the default memory
/// pool on the embedded study).
#[test]
fn aggregate_partitions_are_bounded_with_a_clear_error() {
    let (d, cfg, out) = ran();
    let before = outputs(&out);
    let started = Instant::now();
    let o = protospread(&cfg, &out, &["aggregate", "--partitions", "1024"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("maximum of 16"), "{}", text(&o));
    assert!(stderr(&o).len() < 300, "{}", text(&o));
    assert!(
        started.elapsed().as_secs() < 10,
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(outputs(&out), before);
    let big = config_in(
        d.path(),
        "big.toml",
        "[aggregate]\ntarget_partitions = 1024\n",
    );
    let o = protospread(&big, &out, &["aggregate"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(stderr(&o).contains("target_partitions"), "{}", text(&o));
    let o = protospread(&cfg, &out, &["aggregate", "--partitions", "8"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(outputs(&out), before, "8 partitions give the same bytes");
}
