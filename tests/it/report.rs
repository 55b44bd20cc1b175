//! The binary's aggregate, report, bag and verify commands. Everything runs on copies in
//! temporary folders; the repository is never modified.

use protospread_testutils::copy_dir;
use protospread_testutils::output_text as text;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_protospread"))
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn run(args: &[&str]) -> Output {
    let o = bin().args(args).output().unwrap();
    o
}

/// A folder with a minimal configuration, a small data/ folder and the fixture's score-stage
/// output; aggregate and report run on it.
fn fixture_project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    fs_err::write(
        d.join("pipeline.toml"),
        "[study]\nname = \"fixture\"\n\n[report]\ntables = []\ntitle = \"Fixture report\"\n",
    )
    .unwrap();
    fs_err::create_dir_all(d.join("data")).unwrap();
    fs_err::write(
        d.join("data/scoring_key.csv"),
        "test,item,dimension,reverse,weight\n",
    )
    .unwrap();
    protospread_testutils::write(&d.join("out/score")).unwrap();
    // As the score stage leaves it: with its manifest, so protospread owns the folder.
    protospread_core::write_manifest(&d.join("out/score")).unwrap();
    dir
}

fn stage(d: &Path, out: &str, args: &[&str]) -> Output {
    let cfg = d.join("pipeline.toml");
    let out = d.join(out);
    let mut v = vec![
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    v.extend_from_slice(args);
    run(&v)
}

#[test]
fn aggregate_and_report_commands() {
    let p = fixture_project();
    let d = p.path();
    let o = stage(d, "out", &["aggregate", "--partitions", "1"]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout)
            .contains("source fx (fixture): 31 cells kept, 4 dropped"),
        "{}",
        text(&o)
    );
    let o = stage(d, "out", &["report"]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("| source | label | arm | criterion |"),
        "{stdout}"
    );
    assert!(stdout.contains("| fx | fixture | arm=api |"), "{stdout}");
    for f in [
        "cells.csv",
        "cells.md",
        "verdict.csv",
        "report.md",
        "report.html",
        "SHA256SUMS",
    ] {
        assert!(d.join("out/report").join(f).is_file(), "{f}");
    }
    // Same report bytes with many partitions.
    fs_err::create_dir_all(d.join("out6")).unwrap();
    copy_dir(&d.join("out/score"), &d.join("out6/score"));
    let o = stage(d, "out6", &["aggregate", "--partitions", "6"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = stage(d, "out6", &["--quiet", "report"]);
    assert!(o.status.success() && o.stdout.is_empty(), "{}", text(&o));
    assert_eq!(
        fs_err::read(d.join("out/report/SHA256SUMS")).unwrap(),
        fs_err::read(d.join("out6/report/SHA256SUMS")).unwrap()
    );
    // A missing score stage output is a clear error naming the file.
    fs_err::remove_file(d.join("out6/score/reply_rules.parquet")).unwrap();
    let o = stage(d, "out6", &["aggregate"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("reply_rules.parquet"),
        "{}",
        text(&o)
    );
}

/// The inference tables a researcher is handed in the report folder.
const INFERENCE_TABLES: [&str; 5] = [
    "cell_tests",
    "cell_tests_by_group",
    "headline_interval",
    "error_bars",
    "ranking",
];

/// The fixture project after `aggregate` and `report`: its folder and `out/report/`.
fn reported() -> (tempfile::TempDir, PathBuf) {
    let p = fixture_project();
    let d = p.path();
    for args in [
        &["aggregate", "--partitions", "1"][..],
        &["--quiet", "report"],
    ] {
        let o = stage(d, "out", args);
        assert!(o.status.success(), "{}", text(&o));
    }
    let report = d.join("out/report");
    (p, report)
}

/// File stems of the files in `dir` that end with `.ext`.
fn stems(dir: &Path, ext: &str) -> std::collections::BTreeSet<String> {
    fs_err::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|n| n.strip_suffix(&format!(".{ext}")).map(str::to_string))
        .collect()
}

#[test]
fn report_folder_holds_every_table_as_parquet_byte_identical_to_its_source() {
    let (p, report) = reported();
    let aggregate = p.path().join("out/aggregate");
    let sums = protospread_core::Manifest::read(&report.join("SHA256SUMS")).unwrap();
    // Every file of the folder, the copies included, is listed with its hash.
    assert_eq!(sums, protospread_core::Manifest::from_dir(&report).unwrap());
    for t in INFERENCE_TABLES {
        let f = format!("{t}.parquet");
        let copy = fs_err::read(report.join(&f)).unwrap();
        assert_eq!(copy, fs_err::read(aggregate.join(&f)).unwrap(), "{f}");
        assert!(sums.entries.contains_key(&f), "{f} not in SHA256SUMS");
        // The CSV beside it is the same table: its header and its rows, in order.
        let b = protospread_testutils::read_table(&report.join(&f));
        let csv = fs_err::read_to_string(report.join(format!("{t}.csv"))).unwrap();
        let names: Vec<String> = b
            .schema()
            .fields()
            .iter()
            .map(|c| c.name().clone())
            .collect();
        assert_eq!(csv.lines().next(), Some(names.join(",").as_str()), "{t}");
        assert!(b.num_rows() > 0, "{t} is empty in the fixture");
        let sources: Vec<String> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap().to_string())
            .collect();
        assert_eq!(sources, protospread_testutils::strs(&b, "source"), "{t}");
    }
    // Every table the report writes a CSV of, and no other, has its Parquet file.
    let csv = stems(&report, "csv");
    assert!(csv.len() > INFERENCE_TABLES.len(), "{csv:?}");
    assert_eq!(csv, stems(&report, "parquet"));
    for t in &csv {
        let f = format!("{t}.parquet");
        let from = if aggregate.join(&f).is_file() {
            aggregate.join(&f)
        } else {
            p.path().join("out/score").join(&f)
        };
        assert_eq!(
            fs_err::read(report.join(&f)).unwrap(),
            fs_err::read(&from).unwrap(),
            "{f}"
        );
    }
}

/// Every file of the flat folder `dir`: name -> bytes.
fn files_of(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    fs_err::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let n = e.file_name().to_string_lossy().into_owned();
            (n, fs_err::read(e.path()).unwrap())
        })
        .collect()
}

#[test]
fn an_unreadable_source_table_fails_the_report_and_keeps_the_previous_folder() {
    let (p, report) = reported();
    let d = p.path();
    let before = files_of(&report);
    let ranking = d.join("out/aggregate/ranking.parquet");
    let good = fs_err::read(&ranking).unwrap();
    // Cut in half, the file can be copied but its rows cannot be read; removed, the
    // aggregate folder's SHA256SUMS still lists it.
    for removed in [false, true] {
        if removed {
            fs_err::remove_file(&ranking).unwrap();
        } else {
            fs_err::write(&ranking, &good[..good.len() / 2]).unwrap();
        }
        let o = stage(d, "out", &["report"]);
        assert!(!o.status.success(), "{}", text(&o));
        assert!(
            String::from_utf8_lossy(&o.stderr).contains(&ranking.display().to_string()),
            "{}",
            text(&o)
        );
        assert!(
            !removed || String::from_utf8_lossy(&o.stderr).contains("but missing"),
            "{}",
            text(&o)
        );
        assert_eq!(files_of(&report), before, "removed: {removed}");
    }
    // No staged twin of the folder (`.report.PID.tmp`) is left beside it.
    let left: Vec<String> = fs_err::read_dir(d.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n.ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
}

#[test]
fn bag_is_deterministic_and_validates_with_the_reference_validator() {
    let p = fixture_project();
    let d = p.path();
    assert!(stage(d, "out", &["aggregate"]).status.success());
    assert!(stage(d, "out", &["report"]).status.success());
    let bag = d.join("bag");
    let o = stage(
        d,
        "out",
        &["bag", bag.to_str().unwrap(), "--date", "2025-01-02"],
    );
    assert!(o.status.success(), "{}", text(&o));
    for f in [
        "bagit.txt",
        "bag-info.txt",
        "manifest-sha256.txt",
        "manifest-sha512.txt",
        "tagmanifest-sha256.txt",
        "data/provenance.json",
        "data/config/pipeline.toml",
        "data/inputs/data/scoring_key.csv",
        "data/outputs/report/report.html",
    ] {
        assert!(bag.join(f).is_file(), "{f} missing from the bag");
    }
    let info = fs_err::read_to_string(bag.join("bag-info.txt")).unwrap();
    assert!(
        info.contains("Bagging-Date: 2025-01-02\n") && info.contains("Payload-Oxum: "),
        "{info}"
    );
    assert!(!fs_err::read_to_string(bag.join("manifest-sha256.txt"))
        .unwrap()
        .contains("cache/"));
    let prov = fs_err::read_to_string(bag.join("data/provenance.json")).unwrap();
    assert!(
        prov.contains("cargo_lock_sha256") && prov.contains("\"version\""),
        "{prov}"
    );
    // Same inputs and date: same bytes.
    let bag2 = d.join("bag2");
    assert!(stage(
        d,
        "out",
        &["bag", bag2.to_str().unwrap(), "--date", "2025-01-02"]
    )
    .status
    .success());
    for f in [
        "bag-info.txt",
        "manifest-sha256.txt",
        "manifest-sha512.txt",
        "tagmanifest-sha256.txt",
        "tagmanifest-sha512.txt",
    ] {
        assert_eq!(
            fs_err::read(bag.join(f)).unwrap(),
            fs_err::read(bag2.join(f)).unwrap(),
            "{f}"
        );
    }
    // An existing destination is refused.
    let o = stage(d, "out", &["bag", bag.to_str().unwrap()]);
    assert!(
        !o.status.success() && String::from_utf8_lossy(&o.stderr).contains("already exists"),
        "{}",
        text(&o)
    );

    let o = Command::new(repo().join("scripts/check-bag.sh"))
        .arg(&bag)
        .output()
        .unwrap();
    // No silent pass: without python3 the reference validator cannot run, and that fails.
    assert!(
        o.status.code() != Some(77),
        "python3 is needed to validate the bag with bagit.py: install python3, then run scripts/setup-test-tools.sh\n{}",
        text(&o)
    );
    assert!(o.status.success(), "check-bag.sh failed:\n{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("corrupted copy rejected") && out.contains("check-bag: OK"),
        "{out}"
    );
}

/// A copy of the repository's configuration and data in a temporary folder.
fn repo_copy() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fs_err::copy(
        repo().join("pipeline.toml"),
        dir.path().join("pipeline.toml"),
    )
    .unwrap();
    copy_dir(&repo().join("data"), &dir.path().join("data"));
    dir
}

fn verify(d: &Path, extra: &[&str]) -> Output {
    let cfg = d.join("pipeline.toml");
    let ck = d.join("checksums");
    let out = d.join("out");
    let mut v = vec![
        "--config",
        cfg.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "verify",
        "--checksums",
        ck.to_str().unwrap(),
    ];
    v.extend_from_slice(extra);
    // A failed verify keeps its regenerated folder for inspection (docs/report.md): keep it
    // in the test's own folder, not in the machine's /tmp.
    let tmp = d.join("tmp");
    fs_err::create_dir_all(&tmp).unwrap();
    bin().args(&v).env("TMPDIR", &tmp).output().unwrap()
}

fn flip_byte(p: &Path, at: usize) -> Vec<u8> {
    let orig = fs_err::read(p).unwrap();
    let mut b = orig.clone();
    let i = at.min(b.len() - 1);
    b[i] = if b[i] == b'1' { b'2' } else { b'1' };
    fs_err::write(p, &b).unwrap();
    orig
}

#[test]
fn verify_passes_then_names_each_change() {
    let p = repo_copy();
    let d = p.path();
    let o = verify(d, &["--update"]);
    assert!(o.status.success(), "{}", text(&o));
    let o = verify(d, &[]);
    assert!(o.status.success(), "{}", text(&o));
    let line = String::from_utf8_lossy(&o.stdout);
    assert!(
        line.starts_with("verify: OK,") && line.lines().count() == 1,
        "{line}"
    );

    // One byte of one input.
    let human = d.join("data/jobcannon/dark_triad.csv");
    let orig = flip_byte(&human, 200);
    let o = verify(d, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("input data/jobcannon/dark_triad.csv"),
        "{}",
        text(&o)
    );
    fs_err::write(&human, orig).unwrap();

    // One byte of the key.
    let key = d.join("data/scoring_key.csv");
    let orig = flip_byte(&key, 60);
    let o = verify(d, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("input data/scoring_key.csv"),
        "{}",
        text(&o)
    );
    fs_err::write(&key, orig).unwrap();

    // One committed expected hash (of a table): named, with the first differing row/column.
    let outputs = d.join("checksums/outputs.sha256");
    let text0 = fs_err::read_to_string(&outputs).unwrap();
    let line = text0
        .lines()
        .find(|l| l.ends_with("  report/cells.csv"))
        .expect("cells.csv listed")
        .to_string();
    let flipped = format!(
        "{}{}",
        if line.starts_with('0') { '1' } else { '0' },
        &line[1..]
    );
    fs_err::write(&outputs, text0.replace(&line, &flipped)).unwrap();
    let o = verify(d, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("output report/cells.csv"), "{err}");
    assert!(
        err.contains("checksums tables/cells.csv"),
        "the committed copy no longer matches the edited hash: {err}"
    );
    fs_err::write(&outputs, &text0).unwrap();

    // A committed table copy edited: the row and column are named.
    let copy = d.join("checksums/tables/range.csv");
    let t = fs_err::read_to_string(&copy).unwrap();
    let mut lines: Vec<String> = t.lines().map(str::to_string).collect();
    let mut cells: Vec<String> = lines[1].split(',').map(str::to_string).collect();
    cells[3] = "999999".into();
    lines[1] = cells.join(",");
    fs_err::write(&copy, lines.join("\n") + "\n").unwrap();
    let new_hash = protospread_core::sha256_file(&copy).unwrap();
    let l = text0
        .lines()
        .find(|l| l.ends_with("  report/range.csv"))
        .unwrap();
    fs_err::write(
        &outputs,
        text0.replace(l, &format!("{new_hash}  report/range.csv")),
    )
    .unwrap();
    let o = verify(d, &[]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains("output report/range.csv") && err.contains("line 2 (row 1), column 4"),
        "{err}"
    );

    // An extra expected file that is not regenerated.
    fs_err::write(
        &outputs,
        format!("{text0}{}  report/ghost.csv\n", "0".repeat(64)),
    )
    .unwrap();
    let o = verify(d, &[]);
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("output report/ghost.csv: expected but not regenerated"),
        "{}",
        text(&o)
    );
}

/// The repository's pipeline.toml with every `data/` path made absolute and the recorded
/// input's entry extended by `recorded_extra`, written into `dir`.
fn embedded_config(dir: &Path, recorded_extra: &str) -> PathBuf {
    let text = fs_err::read_to_string(repo().join("pipeline.toml")).unwrap();
    let text = text.replace("\"data/", &format!("\"{}/data/", repo().display()));
    let entry = "name = \"recorded_smollm2\"\n";
    assert!(
        text.contains(entry),
        "pipeline.toml has no recorded_smollm2 input"
    );
    let p = dir.join("pipeline.toml");
    fs_err::write(&p, text.replace(entry, &format!("{entry}{recorded_extra}"))).unwrap();
    p
}

/// `run` with `flags` on the embedded data, the recorded input given `recorded_extra`
/// ([`embedded_config`] in `dir`), into `dir/out`: the output folder and the run.
fn run_embedded(dir: &Path, recorded_extra: &str, flags: &[&str]) -> (PathBuf, Output) {
    let cfg = embedded_config(dir, recorded_extra);
    let out = dir.join("out");
    let o = bin()
        .args(flags)
        .arg("--config")
        .arg(&cfg)
        .arg("--out")
        .arg(&out)
        .arg("run")
        .output()
        .unwrap();
    (out, o)
}

/// `run` on the embedded data prints the recorded source's verdict over its own arm (its single
/// arm, `local`), and the simulated one over the global headline arm; an input `headline_arm`
/// the source does not have stops the run, naming the input and the arm.
#[test]
fn run_gives_the_recorded_source_a_verdict_over_its_own_arm() {
    let d = tempfile::tempdir().unwrap();
    let (_, o) = run_embedded(d.path(), "", &[]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("| recorded_smollm2 | recorded | local | verdict |")
            && stdout.contains("| recorded_smollm2 | recorded | local | unreadable_replies_few |")
            && stdout.contains("| simulated_answers | simulated | api | verdict |"),
        "{stdout}"
    );
    assert!(!stdout.contains("0 of 0 arm="), "{stdout}");

    let bad = tempfile::tempdir().unwrap();
    let (_, o) = run_embedded(bad.path(), "headline_arm = \"api\"\n", &[]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(
            "input \"recorded_smollm2\": headline_arm \"api\" is not an arm of this source (its arms: local)"
        ),
        "{}",
        text(&o)
    );
}

/// The texts of the SVG figures in `html` that do not lie inside their figure's width and
/// height, each estimated at a fixed 0.6 em per character (class `t`: bold 13px, class `a`:
/// 11px; the figures' fonts), after its anchor and a `rotate(-90 ...)` transform.
fn texts_outside_their_figure(html: &str) -> Vec<String> {
    fn attr<'a>(attrs: &'a str, name: &str) -> Option<&'a str> {
        let key = format!(" {name}=\"");
        let at = attrs.find(&key)? + key.len();
        Some(&attrs[at..at + attrs[at..].find('"')?])
    }
    let num = |attrs: &str, name: &str| -> f64 {
        attr(attrs, name)
            .unwrap_or_else(|| panic!("no {name} in {attrs}"))
            .parse()
            .unwrap()
    };
    let mut bad = Vec::new();
    for svg in html.split("<svg ").skip(1) {
        let svg = &svg[..svg.find("</svg>").expect("closed svg")];
        let open = format!(" {}", &svg[..svg.find('>').unwrap()]);
        let (w, h) = (num(&open, "width"), num(&open, "height"));
        assert!(
            open.contains(&format!("viewBox=\"0 0 {w} {h}\"")),
            "viewBox is not the size: {open}"
        );
        for t in svg.split("<text ").skip(1) {
            let (attrs, rest) = t.split_once('>').unwrap();
            let attrs = format!(" {attrs}");
            let text = rest[..rest.find("</text>").unwrap()]
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&amp;", "&");
            let em = if attr(&attrs, "class") == Some("t") {
                13.0
            } else {
                11.0
            };
            let len = text.chars().count() as f64 * 0.6 * em;
            let (x, y) = (num(&attrs, "x"), num(&attrs, "y"));
            let (lo, hi) = match attr(&attrs, "text-anchor") {
                Some("middle") => (-len / 2.0, len / 2.0),
                Some("end") => (-len, 0.0),
                _ => (0.0, len),
            };
            let inside = match attr(&attrs, "transform") {
                // Turned a quarter counter-clockwise about its own anchor: it runs upwards.
                Some(tr) => {
                    assert!(tr.starts_with("rotate(-90 "), "{tr}");
                    y - hi >= 0.0 && y - lo <= h && x - em >= 0.0 && x <= w
                }
                None => x + lo >= 0.0 && x + hi <= w && y - em >= 0.0 && y <= h,
            };
            if !inside {
                bad.push(format!("`{text}` at ({x}, {y}) in a {w} x {h} figure"));
            }
        }
    }
    bad
}

/// On the embedded data the page opens on the headline (above the first figure) and no text
/// of a figure is cut by its edge (the sweep figure's long title, the recorded models' figures).
#[test]
fn embedded_report_opens_on_the_headline_and_every_figure_text_fits() {
    let d = tempfile::tempdir().unwrap();
    let (out, o) = run_embedded(d.path(), "", &["--quiet"]);
    assert!(o.status.success(), "{}", text(&o));
    let html = fs_err::read_to_string(out.join("report/report.html")).unwrap();
    let bad = texts_outside_their_figure(&html);
    assert!(
        bad.is_empty(),
        "texts cut by their figure's edge:\n{}",
        bad.join("\n")
    );
    let headline = html.find("<h2>Headline</h2>").expect("a headline");
    assert!(headline < html.find("<svg").unwrap());
    assert!(
        html.contains("<p class=\"h\">simulated_answers (simulated): arm=api: protocol spread exceeds sampling noise: use the protocol spread as the error bar. Share of cells with protocol SD &gt; sampling SD: 0.877470 (222 of 253 compared cells, threshold 0.800000). Median ratio protocol SD / sampling SD: 2.949576 (threshold 2.000000). Interval: 95% cluster-bootstrap interval over "),
        "{}",
        &html[headline..headline + 2000]
    );
    // The interval's numbers are the headline_interval table's, and the test counts those of
    // cell_tests_by_group, read from the stage's own Parquet files.
    let read = |name: &str| {
        let f = fs_err::File::open(out.join(format!("aggregate/{name}.parquet"))).unwrap();
        let r = parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(
            f.into_parts().0,
        )
        .unwrap()
        .build()
        .unwrap();
        let batches: Vec<_> = r.map(Result::unwrap).collect();
        arrow::compute::concat_batches(&batches[0].schema(), &batches).unwrap()
    };
    let text_of = |b: &arrow::record_batch::RecordBatch, col: &str, i: usize| {
        let a = b.column_by_name(col).unwrap();
        if a.is_null(i) {
            return String::new();
        }
        arrow::util::display::array_value_to_string(a, i).unwrap()
    };
    let f6 = |b: &arrow::record_batch::RecordBatch, col: &str, i: usize| {
        let a = b.column_by_name(col).unwrap();
        use arrow::array::AsArray;
        format!(
            "{:.6}",
            a.as_primitive::<arrow::datatypes::Float64Type>().value(i)
        )
    };
    let hi = read("headline_interval");
    let sim = (0..hi.num_rows())
        .find(|&i| text_of(&hi, "source", i) == "simulated_answers")
        .expect("an interval for the simulated source");
    let expected = format!(
        "Interval: 95% cluster-bootstrap interval over {} models ({} replicates): share {} to {}, median ratio {} to {}; share expected if setups and samples were exchangeable: {}.",
        text_of(&hi, "models", sim),
        text_of(&hi, "replicates", sim),
        f6(&hi, "share_low", sim),
        f6(&hi, "share_high", sim),
        f6(&hi, "median_ratio_low", sim),
        f6(&hi, "median_ratio_high", sim),
        f6(&hi, "null_expected_share", sim),
    );
    let tg = read("cell_tests_by_group");
    let g = (0..tg.num_rows())
        .find(|&i| {
            text_of(&tg, "source", i) == "simulated_answers"
                && text_of(&tg, "group", i) == "arm=api"
        })
        .expect("tests of the headline arm");
    let tests = format!(
        "Exact permutation tests: {} of {} tested cells with p &lt;= 0.05, {} after Benjamini-Hochberg at q = 0.05.</p>",
        text_of(&tg, "p_le_0_05", g),
        text_of(&tg, "cells", g),
        text_of(&tg, "bh_rejected", g),
    );
    assert!(
        html.contains(&format!("{expected} {tests}")),
        "{expected} {tests}\n{}",
        &html[headline..headline + 2000]
    );
    // The error-bar figures: one per scale, with its title and axis labels.
    assert!(html.contains("<h2>Error bars per model and scale</h2>"));
    assert!(html.contains(
        "class=\"t\">simulated_answers (simulated): big_five E, mean z per model</text>"
    ));
    assert!(html.contains(">z, human SDs (dot: mean over the protocol setups)</text></svg>"));
    assert!(html.contains(">whiskers: lowest and highest setup</text>"));
    assert!(html.contains("<h2>Ranking robustness</h2>"));
    assert!(
        html.matches("<svg").count() >= 5,
        "scatter, range, sweep and recorded figures"
    );
    // Every table of the embedded study is small enough to be shown whole.
    assert!(!html.contains("rows in all"));
    let md = fs_err::read_to_string(out.join("report/report.md")).unwrap();
    assert!(md.contains(
        "## Headline\n\nrecorded_qwen_coder_0_5b (recorded): no kept arm=local cells: no verdict."
    ));
}

/// The fixture's models copied `copies` times (model names suffixed), as a score-stage output
/// in `score`: a study of many thousands of models and cells.
fn write_many_models(score: &Path, copies: usize) {
    let (s, a) = protospread_testutils::rows();
    let many = |k: usize, m: &str| format!("{m}-{k:04}");
    let s: Vec<_> = (0..copies)
        .flat_map(|k| {
            s.iter().cloned().map(move |mut r| {
                r.model = many(k, &r.model);
                r
            })
        })
        .collect();
    let a: Vec<_> = (0..copies)
        .flat_map(|k| {
            a.iter().cloned().map(move |mut r| {
                r.model = many(k, &r.model);
                r
            })
        })
        .collect();
    protospread_testutils::write_rows(score, &s, &a).unwrap();
}

/// A study of 3,200 models (16,000 cells): report.html and report.md stay small (the large
/// tables as excerpts with the line naming their size and files, the figures binned), every
/// CSV holds every row, and no figure text is cut.
#[test]
fn report_of_many_models_stays_small() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path();
    write_many_models(&out.join("score"), 400);
    protospread_aggregate::run(
        &out.join("score"),
        &out.join("aggregate"),
        &Default::default(),
    )
    .unwrap();
    let section = protospread_core::ReportSection {
        tables: vec![],
        ..Default::default()
    };
    let s = protospread_report::run(out, &section).unwrap();
    let report = out.join("report");
    let size = |f: &str| fs_err::metadata(report.join(f)).unwrap().len();
    let cells = s.tables.iter().find(|t| t.name == "cells").unwrap();
    assert_eq!(cells.rows, 400 * 8 * 5, "every cell of every model");
    let csv = fs_err::read_to_string(report.join("cells.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        cells.rows + 1,
        "the CSV holds every row"
    );
    assert!(!cells.is_whole() && cells.head.rows.len() == protospread_report::FULL_ROWS);
    let html = fs_err::read_to_string(report.join("report.html")).unwrap();
    assert!(
        html.contains(&format!(
            "<p class=\"d\">{} rows in all, see <a href=\"cells.csv\">cells.csv</a> (Parquet: <a href=\"cells.parquet\">cells.parquet</a>); shown: the 25 rows with the highest and the 25 with the lowest ratio.</p>",
            cells.rows
        )),
        "{}",
        &html[html.find("id=\"cells\"").unwrap()..][..3000]
    );
    assert!(html.contains("rows in all, see <a href=\"requests.csv\">requests.csv</a>"));
    assert!(
        html.contains("counted per test"),
        "the range figure is binned"
    );
    assert!(html.contains("binned: darker squares hold more cells"));
    // Each error-bar figure shows the ends of its scale's thousands of models and says so.
    let ends = "00 models in all; shown: the 20 with the highest and the 20 with the lowest mean (error_bars.csv)";
    let figures = html.matches(ends).count();
    assert!(
        figures >= 5,
        "one figure per scale of each source: {figures}"
    );
    assert_eq!(
        html.matches(" models not shown ...</text>").count(),
        figures
    );
    let bad = texts_outside_their_figure(&html);
    assert!(
        bad.is_empty(),
        "texts cut by their figure's edge:\n{}",
        bad.join("\n")
    );
    // Bounds that do not depend on the number of models: the page, the document and each
    // table's Markdown.
    eprintln!(
        "report.html {} bytes, report.md {} bytes, cells.md {} bytes, cells.csv {} bytes",
        size("report.html"),
        size("report.md"),
        size("cells.md"),
        size("cells.csv")
    );
    assert!(size("report.html") < 1_000_000, "{}", size("report.html"));
    assert!(size("report.md") < 500_000, "{}", size("report.md"));
    for t in &s.tables {
        assert!(size(&format!("{}.md", t.name)) < 1_000_000, "{}", t.name);
    }
    let md = fs_err::read_to_string(report.join("cells.md")).unwrap();
    // The linked copy is the table's file, so the folder alone holds every row.
    assert_eq!(
        fs_err::read(report.join("cells.parquet")).unwrap(),
        fs_err::read(out.join("aggregate/cells.parquet")).unwrap()
    );
    assert!(md.starts_with(&format!(
        "{} rows in all, see [cells.csv](cells.csv) (Parquet: [cells.parquet](cells.parquet)); shown: the 25 rows with the highest and the 25 with the lowest ratio.\n\nHighest ratio:\n\n| source |",
        cells.rows
    )));
}
