//! Laying out a target file: a size beyond the free space fails before anything is written,
//! a failure or a stop undoes what iogen laid out, and a new file without `--size` gets the
//! documented default.
#![allow(clippy::print_stderr)] // skip notices and measured numbers are for the person running the tests

use std::path::Path;
use std::process::{Command, Output};
use std::time::Instant;

use iogen::{EngineChoice, Error, PhaseSpec, Stop, run_phase};

use crate::{opts, target};

fn iogen(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_iogen"))
        .args(args)
        .output()
        .expect("run iogen")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// (size, free for unprivileged writers) of the file system holding `p`, bytes.
fn statvfs(p: &Path) -> (u64, u64) {
    let st = rustix::fs::statvfs(p).expect("statvfs");
    (st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect()
}

/// Runs `iogen run --size SIZE` on `target`, which must fail naming `--size` and the missing
/// room.
fn run_too_big(target: &Path, size: u64) -> String {
    let t0 = Instant::now();
    let o = iogen(&[
        "run",
        "--target",
        s(target),
        "--size",
        &size.to_string(),
        "--runtime",
        "1s",
    ]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    eprintln!("iogen failed after {:?}: {err}", t0.elapsed());
    // No room: the command could not run (exit 2), not a problem of an input.
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no room to lay out") && err.contains("--size"),
        "the error must say there is no room and name --size: {err}"
    );
    err
}

#[test]
fn size_above_the_free_space_fails_at_once_and_leaves_nothing() {
    let (d, p) = target();
    let (size, free) = statvfs(d.path());
    // Larger than the whole file system, so larger than its free space whatever others write.
    run_too_big(&p, size + (1 << 30));
    assert!(
        entries(d.path()).is_empty(),
        "nothing may be left: {:?}",
        entries(d.path())
    );
    // The same for an existing file: it keeps its length and bytes.
    let old: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    std::fs::write(&p, &old).expect("write");
    run_too_big(&p, size + (1 << 30));
    assert_eq!(
        std::fs::read(&p).expect("read"),
        old,
        "the file must be as it was"
    );
    eprintln!("file system: {size} B, {free} B free");
}

/// A tmpfs of 16 MiB, mounted for the test (needs root; others skip it, the test above covers
/// the check on any file system). Unmounted on drop.
struct Tmpfs(tempfile::TempDir);

impl Tmpfs {
    fn mount(size: &str) -> Option<Self> {
        let d = tempfile::tempdir().expect("tempdir");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(d.path())
            .output()
            .is_ok_and(|o| o.status.success());
        ok.then_some(Self(d))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn on_a_small_file_system_only_what_fits_is_laid_out() {
    let Some(fs) = Tmpfs::mount("16m") else {
        eprintln!("skipped: cannot mount a tmpfs (not root?)");
        return;
    };
    let dir = fs.0.path();
    let p = dir.join("scratch.dat");
    let before = statvfs(dir).1;
    run_too_big(&p, 64 << 20);
    assert!(entries(dir).is_empty(), "{:?}", entries(dir));
    assert_eq!(
        statvfs(dir).1,
        before,
        "not a byte of the tmpfs may stay used"
    );
    // What fits is laid out (fallocate, then data) and the run goes ahead.
    let o = iogen(&[
        "run",
        "--target",
        s(&p),
        "--size",
        "8m",
        "--ios",
        "100",
        "--json",
        "-",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::metadata(&p).expect("laid out").len(), 8 << 20);
    // No --size on a new file: the 1 GiB default does not fit here, and the error says so.
    let q = dir.join("new.dat");
    let o = iogen(&["run", "--target", s(&q), "--ios", "100"]);
    let err = String::from_utf8_lossy(&o.stderr);
    // No room: the command could not run (exit 2), not a problem of an input.
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("default size") && err.contains("--size"),
        "{err}"
    );
    assert!(!q.exists(), "the refused new file must not stay");
}

#[test]
fn readme_example_works_on_a_new_file_with_the_default_size() {
    let (d, p) = target();
    if statvfs(d.path()).1 < 4 << 30 {
        eprintln!("skipped: less than 4 GiB free for a 1 GiB default layout");
        return;
    }
    // The README's example, with a shorter runtime.
    let o = iogen(&[
        "run",
        "--target",
        s(&p),
        "--rw",
        "randread",
        "--bs",
        "4k",
        "--iodepth",
        "32",
        "--runtime",
        "1s",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("1 GiB") && err.contains("--size"), "{err}");
    assert_eq!(
        std::fs::metadata(&p).expect("laid out").len(),
        iogen::DEFAULT_NEW_FILE_SIZE
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("read"));
}

#[test]
fn a_stop_while_laying_out_undoes_the_layout() {
    let (_d, p) = target();
    let stop = Stop::new();
    stop.request();
    let spec = PhaseSpec {
        region: Some(64 << 20),
        ios: Some(10),
        ..PhaseSpec::default()
    };
    let o = opts(EngineChoice::Auto);
    match run_phase(&spec, &p, &o, &stop) {
        Err(Error::Interrupted { .. }) => {}
        other => panic!("expected Interrupted, got {other:?}"),
    }
    assert!(!p.exists(), "a new file must be removed");
    // An existing shorter file is truncated back to its length, bytes intact.
    let old = vec![7u8; 1 << 20];
    std::fs::write(&p, &old).expect("write");
    match run_phase(&spec, &p, &o, &stop) {
        Err(Error::Interrupted { .. }) => {}
        other => panic!("expected Interrupted, got {other:?}"),
    }
    assert_eq!(std::fs::read(&p).expect("read"), old);
}

#[test]
fn a_failed_phase_removes_the_file_it_created() {
    let (d, p) = target();
    // The verify state does not fit the phase: the phase fails after the layout.
    let state = d.path().join("gen.map");
    std::fs::write(&state, b"not a generation map").expect("write");
    let spec = PhaseSpec {
        region: Some(4 << 20),
        ios: Some(10),
        verify: true,
        verify_state: Some(state),
        ..PhaseSpec::default()
    };
    match run_phase(&spec, &p, &opts(EngineChoice::Auto), &Stop::new()) {
        Err(Error::VerifyState { .. }) => {}
        other => panic!("expected VerifyState, got {other:?}"),
    }
    assert!(
        !p.exists(),
        "the file the failed phase created must be removed"
    );
}
