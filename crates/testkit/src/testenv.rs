//! The local test cluster of `testenv/` (testenv/README.md): `CNSREPLAY_TESTENV` names the
//! `testenv.env` that `testenv/up.sh` wrote; unset or `0` (scripts/test.sh's "no cluster"),
//! there is none, and a test that needs it skips — or fails when
//! `CNSREPLAY_REQUIRE_TESTENV=1` ([`crate::skip`]). A test's cluster holds its turn on the
//! real node ([`NodeTurn`]) as long as the test keeps it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use std::sync::Arc;

use crate::{Kubectl, NodeTurn};

/// The variables of a running cluster's `testenv.env`, and the turn on its real node that
/// this value (and its clones) hold, if any.
#[derive(Clone, Debug)]
pub struct TestEnv {
    vars: HashMap<String, String>,
    turn: Option<Arc<NodeTurn>>,
}

/// The cluster that `CNSREPLAY_TESTENV` names, holding a shared turn on its real node (when
/// it has one) for as long as the test keeps it: a pod of any test may land there, and a test
/// that stops the node's kubelet must not run meanwhile. `None` after the skip line when
/// there is no cluster (a failure when `CNSREPLAY_REQUIRE_TESTENV=1`). A test calls it once:
/// a second turn taken while the first is held waits behind a test that wants the node alone,
/// which waits for the first.
pub fn testenv() -> Option<TestEnv> {
    found_with_turn(false)
}

/// [`testenv`] holding the real node alone: for a test that changes what every other test
/// relies on (stops the node's kubelet, or removes an API the cluster serves, as the group
/// snapshot CRDs: deleting a CRD deletes every object of it, other tests' included). It
/// waits until no other turn is held, in any test process.
pub fn testenv_alone() -> Option<TestEnv> {
    found_with_turn(true)
}

/// The cluster after the skip rule, holding a turn shared or `alone`.
fn found_with_turn(alone: bool) -> Option<TestEnv> {
    crate::skip::unless_missing(
        TestEnv::from_env(),
        "TESTENV",
        "no local cluster (set CNSREPLAY_TESTENV)",
    )
    .map(|e| e.with_turn(alone))
}

impl TestEnv {
    /// The cluster that `CNSREPLAY_TESTENV` names, `None` when it is unset or `0` (no skip
    /// line: for a caller that says why it skips itself); panics when the file is unreadable.
    pub fn from_env() -> Option<Self> {
        let path = std::env::var_os("CNSREPLAY_TESTENV").filter(|p| p != "0")?;
        Some(Self::read(Path::new(&path)))
    }

    /// The `export NAME=value` lines of the file at `path` (quotes around a value removed; a
    /// later line wins, as when the shell sources it).
    pub fn read(path: &Path) -> Self {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Self::parse(&text)
    }

    /// [`TestEnv::read`] of a text.
    pub fn parse(text: &str) -> Self {
        let vars = text
            .lines()
            .filter_map(|l| l.trim().strip_prefix("export "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
            .collect();
        Self { vars, turn: None }
    }

    /// This cluster holding a turn on its real node: shared, or the node `alone`; unchanged
    /// when it has no real node. The lock files live in its state dir (`TESTENV_DIR`).
    pub fn with_turn(mut self, alone: bool) -> Self {
        if self.real_node().is_some() {
            let dir = Path::new(self.get("TESTENV_DIR"));
            assert!(
                dir.is_dir(),
                "TESTENV_DIR {:?} (from CNSREPLAY_TESTENV) is not a folder",
                self.get("TESTENV_DIR")
            );
            let turn = if alone {
                NodeTurn::alone(dir)
            } else {
                NodeTurn::shared(dir)
            };
            self.turn = Some(Arc::new(turn));
        }
        self
    }

    /// Every variable.
    pub fn vars(&self) -> &HashMap<String, String> {
        &self.vars
    }

    /// A variable, `""` when the file does not set it.
    pub fn get(&self, name: &str) -> &str {
        self.vars.get(name).map_or("", String::as_str)
    }

    /// The admin's kubeconfig (`KUBECONFIG`).
    pub fn kubeconfig(&self) -> PathBuf {
        PathBuf::from(self.get("KUBECONFIG"))
    }

    /// The folder of the cluster's binaries (`TESTENV_BIN`: kubectl, …).
    pub fn bin_dir(&self) -> PathBuf {
        PathBuf::from(self.get("TESTENV_BIN"))
    }

    /// The cluster's `kubectl` as the admin.
    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(self.bin_dir().join("kubectl"), self.kubeconfig())
    }

    /// The real kubelet node's name (`TESTENV_REAL_NODE`), when the cluster has one.
    pub fn real_node(&self) -> Option<&str> {
        Some(self.get("TESTENV_REAL_NODE")).filter(|n| !n.is_empty())
    }

    /// A kubeconfig at `path` (0600: it holds a credential, [`crate::write_secret`]) for the
    /// service account `ns/sa`: the admin's cluster and a token of the account valid for an
    /// hour, without the admin's client certificate.
    pub fn account_kubeconfig(&self, ns: &str, sa: &str, path: &Path) -> PathBuf {
        let k = self.kubectl();
        let token = k.ok(&["create", "token", sa, "-n", ns, "--duration=1h"]);
        let mut kc: serde_json::Value =
            serde_json::from_str(&k.ok(&["config", "view", "--raw", "--minify", "-o", "json"]))
                .expect("kubeconfig json");
        for u in kc["users"].as_array_mut().expect("users") {
            u["user"] = serde_json::json!({ "token": token.trim() });
        }
        crate::write_secret(path, &serde_json::to_vec(&kc).expect("json"));
        path.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_lines_are_read_quotes_removed_and_the_last_wins() {
        let env = TestEnv::parse(
            "# testenv\nexport KUBECONFIG=/s/kubeconfig\nexport TESTENV_BIN=/b\n\
             export TESTENV_CSI_METRICS=\"http://a http://b \"\nexport TESTENV_REAL_NODE=\n\
             export TESTENV_REAL_NODE=node-1\nPATH=/x\n",
        );
        assert_eq!(env.kubeconfig(), PathBuf::from("/s/kubeconfig"));
        assert_eq!(env.get("TESTENV_CSI_METRICS"), "http://a http://b ");
        assert_eq!(env.real_node(), Some("node-1"));
        assert_eq!(env.get("PATH"), "");
        assert_eq!(env.get("NOPE"), "");
        let k = env.kubectl();
        assert_eq!(k.kubeconfig(), Path::new("/s/kubeconfig"));
        assert_eq!(k.command().get_program(), "/b/kubectl");
    }
}
