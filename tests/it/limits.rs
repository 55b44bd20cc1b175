//! Input size limits (docs/reliability.md, "Size limits"): a cell, a record, a Parquet
//! footer, row-group count and page over its limit is refused with an error naming the file,
//! the row (or row group) and the column and the limit, before the memory is spent; an input
//! just under each limit is read. Big inputs are written to a temporary folder in pieces.

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;
use protospread_core::{
    MAX_CELL_BYTES, MAX_PARQUET_FOOTER_BYTES, MAX_PARQUET_PAGE_BYTES, MAX_PARQUET_ROW_GROUPS,
    MAX_RECORD_BYTES,
};
use protospread_fetch::import_file;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The first `n` simulated records as JSON objects.
fn records(n: usize) -> Vec<serde_json::Map<String, serde_json::Value>> {
    let text =
        fs_err::read_to_string(repo().join("data/simulated/simulated_answers.jsonl")).unwrap();
    text.lines()
        .take(n)
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn cell(r: &serde_json::Map<String, serde_json::Value>, k: &str) -> Option<String> {
    match r.get(k)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Null => None,
        v => Some(v.to_string()),
    }
}

/// Every key of `rs`, in order of first appearance.
fn keys(rs: &[serde_json::Map<String, serde_json::Value>]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for k in rs.iter().flat_map(|r| r.keys()) {
        if !names.contains(k) {
            names.push(k.clone());
        }
    }
    names
}

/// `n` bytes of `b`, written to `w` in pieces (never held whole).
fn fill(w: &mut impl Write, b: u8, n: usize) {
    let chunk = vec![b; 1 << 20];
    let mut left = n;
    while left > 0 {
        let k = left.min(chunk.len());
        w.write_all(&chunk[..k]).unwrap();
        left -= k;
    }
}

/// A CSV of 3 simulated records whose second record's reply is `reply_len` bytes of `a`.
fn csv_with_reply(path: &Path, reply_len: usize) {
    let rs = records(3);
    let names = keys(&rs);
    let mut w = std::io::BufWriter::new(fs_err::File::create(path).unwrap());
    writeln!(w, "{}", names.join(",")).unwrap();
    for (i, r) in rs.iter().enumerate() {
        for (j, k) in names.iter().enumerate() {
            if j > 0 {
                w.write_all(b",").unwrap();
            }
            if i == 1 && k == "reply" {
                fill(&mut w, b'a', reply_len);
            } else {
                w.write_all(cell(r, k).unwrap_or_default().as_bytes())
                    .unwrap();
            }
        }
        w.write_all(b"\n").unwrap();
    }
    w.flush().unwrap();
}

/// A JSON Lines file of 3 simulated records whose second record's reply is `reply_len` bytes
/// and which carries an extension key `x_pad` of `pad_len` bytes.
fn jsonl_with(path: &Path, reply_len: usize, pad_len: usize) {
    let rs = records(3);
    let mut w = std::io::BufWriter::new(fs_err::File::create(path).unwrap());
    for (i, r) in rs.iter().enumerate() {
        let mut r = r.clone();
        if i != 1 {
            writeln!(w, "{}", serde_json::Value::Object(r)).unwrap();
            continue;
        }
        r.remove("reply");
        let head = serde_json::Value::Object(r).to_string();
        w.write_all(&head.as_bytes()[..head.len() - 1]).unwrap();
        w.write_all(b",\"reply\":\"").unwrap();
        fill(&mut w, b'a', reply_len);
        w.write_all(b"\",\"x_pad\":\"").unwrap();
        fill(&mut w, b'p', pad_len);
        w.write_all(b"\"}\n").unwrap();
    }
    w.flush().unwrap();
}

/// The length of the second line of the JSON Lines file `path`.
fn second_line_len(path: &Path) -> usize {
    use std::io::BufRead;
    let mut r = std::io::BufReader::new(fs_err::File::open(path).unwrap());
    let mut buf = Vec::new();
    r.read_until(b'\n', &mut buf).unwrap();
    buf.clear();
    r.read_until(b'\n', &mut buf).unwrap();
    buf.len() - 1
}

/// The import's refusal of `path` over a limit, which keeps the limit's own error among its
/// causes.
fn limit_err(path: &Path) -> String {
    let Err(e) = import_file(path) else {
        panic!("{} was imported", path.display())
    };
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
    while let Some(c) = cause {
        if c.is::<protospread_core::TooLarge>() {
            return e.to_string();
        }
        cause = c.source();
    }
    panic!("{e}: no TooLarge among its causes")
}

fn import_err(path: &Path) -> String {
    match import_file(path) {
        Ok(_) => panic!("{} was imported", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn csv_cells_over_the_limit_are_refused_naming_row_and_column() {
    let d = tempfile::tempdir().unwrap();
    let ok = d.path().join("ok.csv");
    csv_with_reply(&ok, MAX_CELL_BYTES);
    let (_, batches) = import_file(&ok).expect("a cell of exactly the limit is read");
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 3);
    let bad = d.path().join("bad.csv");
    csv_with_reply(&bad, MAX_CELL_BYTES + 1);
    let e = limit_err(&bad);
    assert!(e.contains("bad.csv: row 2 (line 3), column reply: cell over the limit of 16 MiB (16,777,216 bytes) per cell"), "{e}");
    assert!(e.contains("shorten the cell"), "{e}");
}

#[test]
fn jsonl_lines_and_cells_over_the_limits_are_refused() {
    let d = tempfile::tempdir().unwrap();
    // A line of exactly the record limit, with a reply of exactly the cell limit.
    let ok = d.path().join("ok.jsonl");
    jsonl_with(&ok, MAX_CELL_BYTES, 0);
    let pad = MAX_RECORD_BYTES - second_line_len(&ok);
    jsonl_with(&ok, MAX_CELL_BYTES, pad);
    assert_eq!(second_line_len(&ok), MAX_RECORD_BYTES);
    let (_, batches) = import_file(&ok).expect("a line and a cell of exactly the limits");
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 3);

    let long = d.path().join("long.jsonl");
    jsonl_with(&long, MAX_CELL_BYTES, pad + 1);
    let e = limit_err(&long);
    assert!(
        e.contains("long.jsonl: row 2 (line 2), column -: record over the limit of 64 MiB (67,108,864 bytes) per record"),
        "{e}"
    );
    let cell = d.path().join("cell.jsonl");
    jsonl_with(&cell, MAX_CELL_BYTES + 1, 0);
    let e = limit_err(&cell);
    assert!(
        e.contains("cell.jsonl: row 2 (line 2), column reply: cell of 16,777,217 bytes over the limit of 16 MiB"),
        "{e}"
    );
}

/// A Parquet file of the first `n` simulated records, all columns text, with `props`; the
/// second record's reply is `reply_len` bytes when given.
fn answers_parquet(path: &Path, n: usize, reply_len: Option<usize>, props: WriterProperties) {
    let rs = records(n.max(1));
    let names = keys(&rs);
    let mut fields = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for k in &names {
        let a: StringArray = rs[..n]
            .iter()
            .enumerate()
            .map(|(i, r)| match reply_len {
                Some(len) if i == 1 && k == "reply" => Some("a".repeat(len)),
                _ => cell(r, k),
            })
            .collect();
        fields.push(Field::new(k, DataType::Utf8, true));
        cols.push(Arc::new(a));
    }
    let schema = Arc::new(Schema::new(fields));
    let batch = RecordBatch::try_new(schema.clone(), cols).unwrap();
    let f = fs_err::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(f, schema, Some(props)).unwrap();
    write_by_rows(&mut w, &batch);
    w.close().unwrap();
}

/// `batch` written a row at a time (the writer splits a batch larger than a row group
/// recursively, a stack frame per row group).
fn write_by_rows(w: &mut ArrowWriter<fs_err::File>, batch: &RecordBatch) {
    for i in 0..batch.num_rows() {
        w.write(&batch.slice(i, 1)).unwrap();
    }
}

fn plain() -> parquet::file::properties::WriterPropertiesBuilder {
    WriterProperties::builder().set_dictionary_enabled(false)
}

#[test]
fn parquet_cells_and_pages_over_the_limits_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let ok = d.path().join("ok.parquet");
    answers_parquet(&ok, 3, Some(MAX_CELL_BYTES), plain().build());
    let (_, batches) = import_file(&ok).expect("a cell of exactly the limit is read");
    assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 3);

    let cell = d.path().join("cell.parquet");
    answers_parquet(&cell, 3, Some(MAX_CELL_BYTES + 1), plain().build());
    let e = limit_err(&cell);
    assert!(
        e.contains(
            "cell.parquet: row 2, column reply: cell of 16,777,217 bytes over the limit of 16 MiB"
        ),
        "{e}"
    );

    // A page over the limit is refused from its header, before it is read.
    let page = d.path().join("page.parquet");
    answers_parquet(&page, 3, Some(MAX_PARQUET_PAGE_BYTES), plain().build());
    let e = import_err(&page);
    assert!(
        e.contains("page.parquet: row 1, column reply: row group 1 of 1: Parquet page of"),
        "{e}"
    );
    assert!(
        e.contains("over the limit of 64 MiB (67,108,864 bytes) per page"),
        "{e}"
    );
}

#[test]
fn parquet_row_groups_and_footers_over_the_limits_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let one_row = || plain().set_max_row_group_row_count(Some(1));
    let ok = d.path().join("ok.parquet");
    answers_parquet(&ok, MAX_PARQUET_ROW_GROUPS, None, one_row().build());
    let (_, batches) = import_file(&ok).expect("the most row groups are read");
    assert_eq!(
        batches.iter().map(|b| b.num_rows()).sum::<usize>(),
        MAX_PARQUET_ROW_GROUPS
    );
    let many = d.path().join("many.parquet");
    answers_parquet(&many, MAX_PARQUET_ROW_GROUPS + 1, None, one_row().build());
    let e = import_err(&many);
    assert!(
        e.contains("many.parquet: 10001 row groups, over the limit of 10000: rewrite the file with larger row groups"),
        "{e}"
    );

    // 30,000 row groups: refused for their number. (parquet-rs writes at most 32,767; other
    // writers more, which the same count from the tail refuses.)
    let huge = d.path().join("huge.parquet");
    let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int8, false)]));
    let mut w = ArrowWriter::try_new(
        fs_err::File::create(&huge).unwrap(),
        schema.clone(),
        Some(one_row().build()),
    )
    .unwrap();
    let batch = RecordBatch::try_new(
        schema,
        vec![Arc::new(arrow::array::Int8Array::from(vec![1; 30_000]))],
    )
    .unwrap();
    write_by_rows(&mut w, &batch);
    w.close().unwrap();
    let e = import_err(&huge);
    assert!(
        e.contains("huge.parquet: 30000 row groups, over the limit"),
        "{e}"
    );

    // Footers just under and just over the limit (their size is mostly key-value metadata).
    for (name, extra) in [("footer-ok.parquet", 0usize), ("footer.parquet", 1)] {
        let p = d.path().join(name);
        let with = |len: usize| {
            answers_parquet(
                &p,
                3,
                None,
                plain()
                    .set_key_value_metadata(Some(vec![parquet::file::metadata::KeyValue::new(
                        "x_pad".into(),
                        "p".repeat(len),
                    )]))
                    .build(),
            );
            footer_len(&p)
        };
        // The footer grows with the pad, and by a byte more where a length's varint does.
        let target = MAX_PARQUET_FOOTER_BYTES + extra;
        let mut len = target - with(0);
        for _ in 0..4 {
            let got = with(len);
            if got == target {
                break;
            }
            len = len + target - got;
        }
        assert_eq!(footer_len(&p), target);
        if extra == 0 {
            import_file(&p).expect("a footer of exactly the limit is read");
        } else {
            let e = import_err(&p);
            assert!(
                e.contains("footer.parquet: Parquet footer (file metadata) of 16,777,217 bytes over the limit of 16 MiB"),
                "{e}"
            );
        }
    }
}

/// The footer length in the tail of a Parquet file.
fn footer_len(p: &Path) -> usize {
    let b = fs_err::read(p).unwrap();
    let t = &b[b.len() - 8..b.len() - 4];
    u32::from_le_bytes([t[0], t[1], t[2], t[3]]) as usize
}

#[test]
fn human_csv_cells_over_the_limit_are_refused_naming_row_and_column() {
    let inst = protospread_core::instrument_by_name("big_five").unwrap();
    let text = fs_err::read_to_string(repo().join("data/jobcannon/big_five.csv")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let rows: Vec<&str> = lines.take(3).collect();
    let d = tempfile::tempdir().unwrap();
    let write = |path: &Path, len: usize| {
        let mut w = std::io::BufWriter::new(fs_err::File::create(path).unwrap());
        writeln!(w, "{header}\n{}", rows[0]).unwrap();
        // The locale cell (third column, text) of the second row.
        let (a, rest) = rows[1].split_at(rows[1].find(',').unwrap() + 1);
        let (b, rest) = rest.split_at(rest.find(',').unwrap() + 1);
        let rest = &rest[rest.find(',').unwrap()..];
        write!(w, "{a}{b}").unwrap();
        fill(&mut w, b'l', len);
        writeln!(w, "{rest}\n{}", rows[2]).unwrap();
        w.flush().unwrap();
    };
    let import = |path: &Path| {
        protospread_fetch::import_human_csv_stream(
            path,
            fs_err::File::open(path).unwrap(),
            inst,
            |_| Ok::<(), std::convert::Infallible>(()),
        )
    };
    let ok = d.path().join("ok.csv");
    write(&ok, MAX_CELL_BYTES);
    assert_eq!(import(&ok).expect("a cell of the limit").rows, 3);
    let bad = d.path().join("bad.csv");
    write(&bad, MAX_CELL_BYTES + 1);
    let e = match import(&bad) {
        Err(protospread_fetch::HumanStreamError::Csv(e)) => e.to_string(),
        _ => panic!("imported"),
    };
    assert!(
        e.contains("bad.csv: row 2 (line 3), column 3 `locale`: cell over the limit of 16 MiB"),
        "{e}"
    );
}

/// A 256 MiB cell in a stored-answer CSV: `protospread fetch` stops with the limit's error,
/// having held far less than the cell (its peak resident memory, from /proc).
#[test]
fn a_256_mib_cell_is_refused_without_holding_it() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("big.csv");
    csv_with_reply(&p, 256 << 20);
    let mut h = Sha256::new();
    std::io::copy(&mut fs_err::File::open(&p).unwrap(), &mut h).unwrap();
    let sha = hex::encode(h.finalize());
    let text = fs_err::read_to_string(repo().join("pipeline.toml")).unwrap();
    let text = text.replace("\"data/", &format!("\"{}/data/", repo().display()));
    let cfg = d.path().join("p.toml");
    fs_err::write(
        &cfg,
        format!(
            "{text}\n[[inputs]]\nname = \"extra\"\nrole = \"answers\"\nlabel = \"simulated\"\npath = \"{}\"\nsha256 = \"{sha}\"\n",
            p.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_protospread"))
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(d.path().join("out"))
        .args(["--quiet", "fetch"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The high-water mark of its resident memory, read until it ends (the mark only grows,
    // so the last reading is the peak up to a few milliseconds before the exit).
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_kib = 0u64;
    let code = loop {
        if let Ok(s) = fs_err::read_to_string(&status_file) {
            if let Some(kib) = s
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            {
                peak_kib = kib;
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    let mut e = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut e).unwrap();
    assert_eq!(code, Some(1), "{e}");
    assert!(
        e.contains("big.csv: row 2 (line 3), column reply: cell over the limit of 16 MiB"),
        "{e}"
    );
    eprintln!("peak resident memory {peak_kib} KiB for a 256 MiB cell");
    assert!(
        peak_kib < 200 * 1024,
        "peak resident memory {peak_kib} KiB for a 256 MiB cell"
    );
}
