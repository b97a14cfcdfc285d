//! Regression gating where teams gate: labels on runs that survive run → export → merge-runs →
//! summary → history; `analyze history` naming the build where a change began on real sim
//! runs; `--junit` read by a real JUnit consumer (`junitparser`) and `--markdown` rendered by
//! a real CommonMark/GFM renderer (`markdown-it-py`), both from the readers' venv
//! (scripts/install-py-readers.sh).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::analyze::{sim_run, skipped};
use super::{cnsreplay, ok, s, stdout};

/// The readers' venv Python with junitparser and markdown-it-py; None (a note) when missing,
/// a failure with CNSREPLAY_REQUIRE_PY=1.
fn py_gate() -> Option<PathBuf> {
    let py = super::readers_python();
    let has = Command::new(&py)
        .args(["-c", "import junitparser, markdown_it"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        has || std::env::var_os("CNSREPLAY_REQUIRE_PY").is_none_or(|v| v != "1"),
        "CNSREPLAY_REQUIRE_PY=1 but {} lacks junitparser or markdown-it-py: run \
         scripts/install-py-readers.sh",
        py.display()
    );
    has.then_some(py)
}

/// junitparser's view of a JUnit file: the suite totals as written, and each case's result
/// kinds and messages.
const READ_JUNIT: &str = r#"
import json, sys
from junitparser import JUnitXml, Failure, Skipped, Error
xml = JUnitXml.fromfile(sys.argv[1])
cases = []
for suite in xml:
    for case in suite:
        cases.append({
            "class": case.classname,
            "name": case.name,
            "results": [type(r).__name__ for r in case.result],
            "messages": [r.message for r in case.result],
        })
declared = {"tests": xml.tests, "failures": xml.failures, "skipped": xml.skipped, "errors": xml.errors}
xml.update_statistics()
counted = {"tests": xml.tests, "failures": xml.failures, "skipped": xml.skipped, "errors": xml.errors}
print(json.dumps({"declared": declared, "counted": counted, "cases": cases}))
"#;

/// markdown-it-py (CommonMark with GFM tables) rendering a Markdown file: the tables' body
/// rows as cell texts, and the text before the first table.
const RENDER_MARKDOWN: &str = r#"
import json, sys
from html.parser import HTMLParser
from markdown_it import MarkdownIt
html = MarkdownIt("commonmark").enable("table").render(open(sys.argv[1], encoding="utf-8").read())
class P(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.rows, self.cell, self.in_body, self.strong = 0, [], None, False, []
        self.in_strong = False
    def handle_starttag(self, tag, attrs):
        if tag == "table": self.tables += 1
        if tag == "tbody": self.in_body = True
        if tag == "tr" and self.in_body: self.rows.append([])
        if tag in ("td",) and self.in_body: self.cell = ""
        if tag == "strong": self.in_strong = True; self.strong.append("")
    def handle_endtag(self, tag):
        if tag == "tbody": self.in_body = False
        if tag == "td" and self.cell is not None: self.rows[-1].append(self.cell.strip()); self.cell = None
        if tag == "strong": self.in_strong = False
    def handle_data(self, d):
        if self.cell is not None: self.cell += d
        if self.in_strong: self.strong[-1] += d
p = P(); p.feed(html)
print(json.dumps({"tables": p.tables, "rows": p.rows, "strong": p.strong}))
"#;

fn python_json(py: &Path, script: &str, arg: &Path) -> serde_json::Value {
    let o = Command::new(py)
        .args(["-c", script, s(arg)])
        .output()
        .expect("python");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("python json")
}

/// Fourteen builds of two sim runs each, attach 200 ms up to build 7 and 300 ms from build 8
/// (fewer builds on a side could not be significant: a permutation test over n builds with k
/// after the change has no p below 2 / C(n, k)): the history names build 8 (exit 1, the
/// latest segment a regression) in text, JSON (valid against its schema), JUnit, Markdown and
/// its HTML page; `compare` of build 7 against build 8 gives JUnit
/// that junitparser counts as the rows (failures = regressions, skipped = undecided) and
/// Markdown that markdown-it-py renders as one table with a row per testcase.
#[test]
fn history_names_the_build_where_attach_slowed_and_junit_and_markdown_are_read_by_real_tools() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    // 300 attaches at 1000/s (0.3 s).
    let t = super::attach_trace(d, 300, 1_000_000);
    let mut runs: Vec<Vec<PathBuf>> = Vec::new();
    for build in 1..=14u32 {
        let median = if build >= 8 { "300ms" } else { "200ms" };
        let mut these = Vec::new();
        for r in 0..2u32 {
            let out = d.join(format!("b{build}-{r}"));
            let seed = (build * 10 + r).to_string();
            let label = format!("build={build}");
            sim_run(
                &t,
                &out,
                &[
                    "--seed",
                    &seed,
                    "--sim-latency",
                    &format!("attach=lognormal:{median}:0.2"),
                    "--label",
                    &label,
                    "--label",
                    "team=storage",
                ],
            );
            these.push(out);
        }
        runs.push(these);
    }
    let all: Vec<&str> = runs.iter().flatten().map(|p| s(p)).collect();
    let mut args = vec!["analyze", "history", "--by", "build", "--order", "natural"];
    args.extend(&all);
    let o = cnsreplay(&args);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}\n{o:?}");
    assert!(
        text.contains("REGRESSION at 8") && text.contains("14 builds by build"),
        "{text}"
    );
    let mut json_args = args.clone();
    json_args.push("--json");
    let o = cnsreplay(&json_args);
    assert_eq!(o.status.code(), Some(1));
    super::assert_matches_schema(&o.stdout, "analyze-history");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json");
    let p50 = v["series"]
        .as_array()
        .expect("series")
        .iter()
        .find(|x| x["op"] == "attach" && x["metric"] == "p50")
        .expect("attach p50");
    assert_eq!(p50["latest"], "regression", "{p50:#}");
    let cps = p50["change_points"].as_array().expect("change points");
    assert_eq!(cps.len(), 1, "{p50:#}");
    assert_eq!(cps[0]["build"], "8");
    assert_eq!(cps[0]["previous"], "7");
    let change = cps[0]["change"].as_f64().expect("change");
    assert!((0.35..0.65).contains(&change), "+50 % expected: {change}");
    assert!(cps[0]["still_past"].as_bool().expect("still_past"));
    assert_eq!(p50["points"][0]["runs"], 2);
    // Time order gives the same builds here (run one after another).
    assert_eq!(
        v["builds"]
            .as_array()
            .expect("builds")
            .iter()
            .map(|b| b["build"].as_str().expect("build"))
            .collect::<Vec<_>>(),
        (1..=14).map(|b| b.to_string()).collect::<Vec<_>>()
    );

    // The page: a figure for the series with a change, the change point marked.
    let page = d.join("history.html");
    let mut hargs = args.clone();
    hargs.extend(["--html", s(&page)]);
    assert_eq!(cnsreplay(&hargs).status.code(), Some(1));
    let html = fs_err::read_to_string(&page).expect("page");
    assert!(
        html.contains("data-figure=\"history-attach-p50\"") && html.contains("since 8"),
        "{html}"
    );

    let Some(py) = py_gate() else {
        skipped("no Python with junitparser and markdown-it-py");
        return;
    };
    // History's JUnit and Markdown: the regressed series a failure, first in the table.
    let (hj, hm) = (d.join("history.xml"), d.join("history.md"));
    let mut gate_args = args.clone();
    gate_args.extend(["--junit", s(&hj), "--markdown", s(&hm)]);
    assert_eq!(cnsreplay(&gate_args).status.code(), Some(1));
    let j = python_json(&py, READ_JUNIT, &hj);
    assert_eq!(j["declared"], j["counted"], "{j:#}");
    let series = v["series"].as_array().expect("series").len() as u64;
    assert_eq!(j["counted"]["tests"], series, "{j:#}");
    let failed: Vec<&serde_json::Value> = j["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter(|c| {
            c["results"]
                .as_array()
                .is_some_and(|r| r.iter().any(|k| k == "Failure"))
        })
        .collect();
    assert!(
        failed.iter().any(|c| c["class"] == "history.attach"
            && c["name"] == "p50"
            && c["messages"][0]
                .as_str()
                .is_some_and(|m| m.contains("since 8"))),
        "{j:#}"
    );
    let m = python_json(&py, RENDER_MARKDOWN, &hm);
    assert_eq!(m["tables"], 1, "{m:#}");
    assert_eq!(
        m["rows"].as_array().expect("rows").len() as u64,
        series,
        "{m:#}"
    );
    assert!(
        m["rows"][0][0]
            .as_str()
            .is_some_and(|c| c.contains("regression")),
        "{m:#}"
    );
    assert!(
        m["strong"][0]
            .as_str()
            .is_some_and(|c| c.starts_with("REGRESSION")),
        "{m:#}"
    );

    // Compare build 7 with build 8: JUnit testcases = rows, failures = regressions, skipped =
    // inconclusive + insufficient; the Markdown one row per testcase, failures first.
    let (cj, cm) = (d.join("compare.xml"), d.join("compare.md"));
    let base: Vec<&str> = runs[6].iter().map(|p| s(p)).collect();
    let new: Vec<&str> = runs[7].iter().map(|p| s(p)).collect();
    let mut cargs = vec![
        "analyze",
        "compare",
        "--json",
        "--junit",
        s(&cj),
        "--markdown",
        s(&cm),
    ];
    cargs.extend(&base);
    cargs.push("--");
    cargs.extend(&new);
    let o = cnsreplay(&cargs);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).expect("compare json");
    assert_eq!(r["label_differences"][0], "build: 7 vs 8", "{r:#}");
    let rows = r["rows"].as_array().expect("rows").len() as u64;
    let n = |k: &str| r[k].as_u64().expect("count");
    let j = python_json(&py, READ_JUNIT, &cj);
    assert_eq!(j["declared"], j["counted"], "{j:#}");
    assert_eq!(j["counted"]["tests"], rows, "{j:#}");
    assert_eq!(j["counted"]["failures"], n("regressions"), "{j:#}");
    assert_eq!(
        j["counted"]["skipped"],
        n("inconclusive") + n("insufficient"),
        "{j:#}"
    );
    assert!(n("regressions") >= 1 && n("insufficient") >= 1, "{r:#}");
    let m = python_json(&py, RENDER_MARKDOWN, &cm);
    let md_rows = m["rows"].as_array().expect("rows");
    assert_eq!(md_rows.len() as u64, rows, "{m:#}");
    assert!(
        md_rows[0][0]
            .as_str()
            .is_some_and(|c| c.contains("regression")),
        "{m:#}"
    );
    assert_eq!(md_rows[0][1], "attach", "{m:#}");

    // `-` writes the document to stdout alone; both to stdout, or `-` beside --json, refused.
    let mut sargs = vec!["analyze", "compare", "--junit", "-"];
    sargs.extend(&base);
    sargs.push("--");
    sargs.extend(&new);
    let o = cnsreplay(&sargs);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).starts_with("<?xml"), "{}", stdout(&o));
    let mut both = vec!["analyze", "compare", "--junit", "-", "--markdown", "-"];
    both.extend(&base);
    both.push("--");
    both.extend(&new);
    assert_eq!(cnsreplay(&both).status.code(), Some(2));
    // A report never lands on an input.
    let mut onto = vec!["analyze", "compare", "--junit"];
    let victim = runs[6][0].join("summary.json");
    onto.push(s(&victim));
    onto.extend(&base);
    onto.push("--");
    onto.extend(&new);
    let o = cnsreplay(&onto);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        fs_err::read_to_string(&victim)
            .expect("summary")
            .starts_with('{'),
        "the run's summary was overwritten"
    );
}

/// A run's labels survive run → export → merge-runs → summary → history: the parts of a split
/// trace run with `--label`, merged (a part of another build is refused), exported (a
/// `label.KEY` column on every record), summarized (text, JSON, and the values table), and a
/// history over that table and two run directories lists the merged run's build.
#[test]
fn labels_survive_run_export_merge_summary_and_history() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    let model = d.join("m.yaml");
    fs_err::write(
        &model,
        "duration: 3s\ncluster: {hosts: 2, containers_per_host: 4, tenants: [{name: red, share: 1}, {name: green, share: 1}]}\n\
         lifetime: {exponential: {mean: 1s}}\nvolumes: {size: 64Mi}\n",
    )
    .expect("model");
    let whole = d.join("t.cnsbin");
    ok(&cnsreplay(&[
        "-q",
        "synth",
        s(&model),
        "--seed",
        "5",
        "-o",
        s(&whole),
    ]));
    let parts = d.join("parts");
    ok(&cnsreplay(&["trace", "split", s(&whole), "-o", s(&parts)]));
    let labels = ["--label", "build=7", "--label", "commit=3f2a9c1"];
    for n in ["red", "green"] {
        sim_run(
            &parts.join(format!("{n}.cnsbin")),
            &d.join(format!("run-{n}")),
            &labels,
        );
    }
    // Another build's part does not belong with these.
    sim_run(
        &parts.join("green.cnsbin"),
        &d.join("run-green-8"),
        &["--label", "build=8", "--label", "commit=3f2a9c1"],
    );
    let o = cnsreplay(&[
        "merge-runs",
        "-o",
        s(&d.join("mixed")),
        s(&d.join("run-red")),
        s(&d.join("run-green-8")),
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("label build") && err.contains("run-red") && err.contains("run-green-8"),
        "{err}"
    );
    let merged = d.join("merged");
    ok(&cnsreplay(&[
        "merge-runs",
        "-o",
        s(&merged),
        s(&d.join("run-red")),
        s(&d.join("run-green")),
    ]));
    let m: serde_json::Value = serde_json::from_str(
        &fs_err::read_to_string(merged.join("manifest.json")).expect("manifest"),
    )
    .expect("manifest json");
    assert_eq!(
        m["labels"],
        serde_json::json!({"build": "7", "commit": "3f2a9c1"}),
        "{m:#}"
    );
    // Labels are not options: runs of two builds do not differ in them.
    assert!(m["options"].get("labels").is_none(), "{m:#}");

    let csv = d.join("events.csv");
    ok(&cnsreplay(&[
        "analyze",
        "export",
        s(&merged),
        "--csv",
        s(&csv),
    ]));
    let text = fs_err::read_to_string(&csv).expect("csv");
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().expect("header").split(',').collect();
    let (b, c) = (
        header
            .iter()
            .position(|h| *h == "label.build")
            .expect("label.build column"),
        header
            .iter()
            .position(|h| *h == "label.commit")
            .expect("label.commit column"),
    );
    let mut records = 0;
    for l in lines {
        let f: Vec<&str> = l.split(',').collect();
        assert_eq!((f[b], f[c]), ("7", "3f2a9c1"), "{l}");
        records += 1;
    }
    assert!(records > 0);

    let o = cnsreplay(&["analyze", "summary", s(&merged)]);
    ok(&o);
    assert!(
        stdout(&o).contains("labels: build=7, commit=3f2a9c1"),
        "{}",
        stdout(&o)
    );
    let values = d.join("values.csv");
    let o = cnsreplay(&[
        "analyze",
        "summary",
        "--json",
        s(&merged),
        "--csv",
        s(&values),
    ]);
    ok(&o);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("summary json");
    assert_eq!(v["runs"][0]["labels"]["build"], "7", "{v:#}");
    let table = fs_err::read_to_string(&values).expect("values");
    assert!(
        table
            .lines()
            .next()
            .is_some_and(|h| h.ends_with(",events,tool,imprecise,label.build,label.commit")),
        "{table}"
    );
    // The mean has no tool bound (its cell is empty; the bounds: run::sim_run_…).
    assert!(
        table
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
            .filter(|f| f[5] == "mean")
            .all(|f| f[8].is_empty()),
        "{table}"
    );

    // Two more builds of the whole trace, as directories; the merged run from the table.
    for build in [5, 6] {
        sim_run(
            &whole,
            &d.join(format!("whole-{build}")),
            &[
                "--label",
                &format!("build={build}"),
                "--seed",
                &build.to_string(),
            ],
        );
    }
    let o = cnsreplay(&[
        "analyze",
        "history",
        "--json",
        "--by",
        "build",
        "--order",
        "natural",
        s(&d.join("whole-5")),
        s(&values),
        s(&d.join("whole-6")),
    ]);
    // Three builds: too few for a change on either side (exit 3), but every build is there.
    assert_eq!(
        o.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let h: serde_json::Value = serde_json::from_slice(&o.stdout).expect("history json");
    let builds: Vec<&str> = h["builds"]
        .as_array()
        .expect("builds")
        .iter()
        .map(|b| b["build"].as_str().expect("build"))
        .collect();
    assert_eq!(builds, ["5", "6", "7"], "{h:#}");
    assert!(
        h["builds"][2]["runs"][0]
            .as_str()
            .is_some_and(|r| r.contains("values.csv")),
        "{h:#}"
    );
    // A run without the label is named, not skipped.
    sim_run(&whole, &d.join("unlabelled"), &[]);
    let o = cnsreplay(&[
        "analyze",
        "history",
        "--by",
        "build",
        s(&d.join("whole-5")),
        s(&d.join("unlabelled")),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("unlabelled") && err.contains("no label \"build\""),
        "{err}"
    );
    // A bad label is refused before the run starts.
    let o = cnsreplay(&[
        "run",
        s(&whole),
        "--provider",
        "sim",
        "-o",
        s(&d.join("bad")),
        "--label",
        "build",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("KEY=VALUE"));
    assert!(!d.join("bad/manifest.json").exists());
}

/// The ```yaml blocks of a Markdown page, in order.
fn yaml_blocks(md: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<String> = None;
    for line in md.lines() {
        match &mut cur {
            None if line.trim_start() == "```yaml" => cur = Some(String::new()),
            Some(b) if line.trim_start() == "```" => {
                out.push(std::mem::take(b));
                cur = None;
            }
            Some(b) => {
                b.push_str(line);
                b.push('\n');
            }
            None => {}
        }
    }
    out
}

/// Runs one build of a recipe's scripts in `work` (bash, `-e -o pipefail` as both CIs do),
/// with the binary under test on PATH; panics naming the script that failed, with its output.
fn run_recipe(recipe: &str, scripts: &[String], work: &Path, build: &str) {
    fs_err::create_dir_all(work).expect("mkdir");
    let bin = Path::new(env!("CARGO_BIN_EXE_cnsreplay"))
        .parent()
        .expect("bin dir")
        .to_owned();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for script in scripts {
        let o = Command::new("bash")
            .args(["-e", "-o", "pipefail", "-c", script])
            .current_dir(work)
            .env("PATH", &path)
            .env("BUILD", build)
            .env("COMMIT", format!("c0ffee{build}"))
            .env("GITHUB_STEP_SUMMARY", work.join("step-summary.md"))
            // The harness's settings for every run (a shorter floor probe; thresholds a
            // loaded CI machine keeps), through the environment the recipe does not name.
            .env("CNSREPLAY_FLOOR_PROBE", "100ms")
            .env("CNSREPLAY_VALIDITY", &super::LENIENT["--validity=".len()..])
            .output()
            .expect("bash");
        assert!(
            o.status.success(),
            "{recipe}, build {build}: the script failed ({:?}):\n{script}\nstdout:\n{}\nstderr:\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// docs/ci.md's GitHub Actions and GitLab CI recipes: valid YAML of the shape each CI reads,
/// and their scripts run as the CI would on the sim, a first build with no baseline and a
/// second with the first's runs and values as the downloaded artifacts (only the install
/// and the download, which need the network, are left to the test).
#[test]
fn ci_recipes_run_on_the_sim() {
    let doc = fs_err::read_to_string(super::workspace().join("docs/ci.md")).expect("docs/ci.md");
    let blocks = yaml_blocks(&doc);
    assert_eq!(
        blocks.len(),
        2,
        "docs/ci.md: a GitHub Actions and a GitLab CI block"
    );
    let gh: serde_json::Value = serde_saphyr::from_str(&blocks[0]).expect("GitHub Actions YAML");
    let gl: serde_json::Value = serde_saphyr::from_str(&blocks[1]).expect("GitLab CI YAML");
    // GitHub: a job with a runner and steps, each a `run` or a `uses`.
    let job = &gh["jobs"]["sim-gate"];
    assert!(
        gh.get("on").is_some() && job["runs-on"].is_string(),
        "{gh:#}"
    );
    let steps = job["steps"].as_array().expect("steps");
    let mut gh_scripts = Vec::new();
    for st in steps {
        match (st.get("run"), st.get("uses")) {
            (Some(run), None) => {
                if st["name"] != "Install cnsreplay" {
                    gh_scripts.push(run.as_str().expect("run is text").to_owned());
                }
            }
            (None, Some(u)) => assert!(u.as_str().is_some_and(|u| u.contains('@')), "{st}"),
            _ => panic!("a step is a run or a uses: {st}"),
        }
    }
    assert_eq!(gh_scripts.len(), 3, "{gh:#}");
    // The cluster job: parsed, its steps of the same shape, replaying with the kube provider.
    let kube = gh["jobs"]["kube-gate"]["steps"]
        .as_array()
        .expect("kube-gate steps");
    assert!(
        kube.iter()
            .all(|st| st.get("run").is_some() != st.get("uses").is_some()),
        "{gh:#}"
    );
    assert!(
        kube.iter().any(|st| st["run"]
            .as_str()
            .is_some_and(|r| r.contains("--provider kube") && r.contains("--label build="))),
        "{gh:#}"
    );
    // GitLab: a job with a script and JUnit reports.
    let gj = &gl["storage-gate"];
    let gl_script: Vec<String> = gj["script"]
        .as_array()
        .expect("script")
        .iter()
        .map(|l| l.as_str().expect("script line").to_owned())
        .collect();
    let junit: Vec<&str> = gj["artifacts"]["reports"]["junit"]
        .as_array()
        .expect("artifacts.reports.junit")
        .iter()
        .map(|v| v.as_str().expect("path"))
        .collect();
    assert_eq!(junit, ["junit-compare.xml", "junit-history.xml"]);
    // GitLab runs the script lines in one shell.
    let gl_scripts = vec![gl_script.join("\n")];

    let dir = tempfile::tempdir().expect("tempdir");
    for (recipe, scripts) in [("github", &gh_scripts), ("gitlab", &gl_scripts)] {
        let first = dir.path().join(recipe).join("build-1");
        run_recipe(recipe, scripts, &first, "1");
        assert!(
            !first.join("junit-compare.xml").exists(),
            "no baseline, no compare"
        );
        let second = dir.path().join(recipe).join("build-2");
        fs_err::create_dir_all(second.join("previous")).expect("mkdir");
        for d in ["runs", "values"] {
            let st = Command::new("cp")
                .args(["-r", s(&first.join(d)), s(&second.join("previous"))])
                .status()
                .expect("cp");
            assert!(st.success());
        }
        run_recipe(recipe, scripts, &second, "2");
        for f in [
            "junit-compare.xml",
            "junit-history.xml",
            "compare.md",
            "history.md",
        ] {
            let text = fs_err::read_to_string(second.join(f))
                .unwrap_or_else(|e| panic!("{recipe}: {f}: {e}"));
            assert!(text.contains("attach"), "{recipe}: {f}:\n{text}");
        }
        let history = fs_err::read_to_string(second.join("junit-history.xml")).expect("history");
        // Two builds: too few for a change point, every series skipped with why.
        assert!(
            history.contains("<skipped message=\"too few builds"),
            "{history}"
        );
        let values = fs_err::read_to_string(second.join("values/2.csv")).expect("values");
        assert!(
            values.contains(",2,c0ffee2") || values.contains("2,c0ffee2"),
            "{values}"
        );
        if recipe == "github" {
            let summary = fs_err::read_to_string(second.join("step-summary.md")).expect("summary");
            assert!(
                summary.contains("### cnsreplay analyze compare")
                    && summary.contains("### cnsreplay analyze history"),
                "{summary}"
            );
        }
    }
}
