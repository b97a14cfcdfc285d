//! The local cluster's `kubectl` as its admin: the one wrapper the tests run it through.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// `kubectl` (a binary) with a kubeconfig.
#[derive(Clone, Debug)]
pub struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    /// `bin` run with `--kubeconfig=<kubeconfig>`.
    pub fn new(bin: impl Into<PathBuf>, kubeconfig: impl Into<PathBuf>) -> Self {
        Self {
            bin: bin.into(),
            kubeconfig: kubeconfig.into(),
        }
    }

    /// The kubeconfig it runs with.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A `kubectl --kubeconfig=…` command to add arguments to (for what the other methods do
    /// not cover: a child to wait for, a timeout).
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg(format!("--kubeconfig={}", self.kubeconfig.display()));
        c
    }

    /// `kubectl ARGS` (with `stdin` on its standard input when given) to its end.
    pub fn output(&self, args: &[&str], stdin: Option<&str>) -> Output {
        let mut child = self
            .command()
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.bin.display()));
        let mut input = child.stdin.take().expect("kubectl's stdin");
        if let Some(s) = stdin {
            input
                .write_all(s.as_bytes())
                .expect("write kubectl's stdin");
        }
        drop(input);
        child.wait_with_output().expect("wait for kubectl")
    }

    /// `kubectl ARGS`: its stdout, or `Err("kubectl ARGS: <stderr>")` when it fails.
    pub fn run(&self, args: &[&str], stdin: Option<&str>) -> Result<String, String> {
        let out = self.output(args, stdin);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "kubectl {}: {}{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    }

    /// `kubectl ARGS`'s stdout; panics with its output when it fails.
    pub fn ok(&self, args: &[&str]) -> String {
        self.run(args, None).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `kubectl ARGS` with `input` on its stdin; its stdout, panicking when it fails.
    pub fn ok_stdin(&self, args: &[&str], input: &str) -> String {
        self.run(args, Some(input))
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// `kubectl create ARGS`: an object that is already there is fine (tests of one run, and
    /// test processes beside each other, make the same shared objects).
    pub fn create(&self, args: &[&str]) {
        let mut all = vec!["create"];
        all.extend_from_slice(args);
        let out = self.output(&all, None);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() || err.contains("already exists"),
            "kubectl create {args:?}: {err}"
        );
    }
}
