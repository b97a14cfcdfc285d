//! The grants pre-flight asks for against the files of `deploy/rbac/` (no cluster).

/// Every request pre-flight asks for is granted by the piece of `deploy/rbac/` it names: the
/// piece's Role or ClusterRole is read from its file and one of its rules must cover the
/// request's group, resource and verb — for a run in an existing namespace and in its own.
#[test]
fn each_request_preflight_asks_for_is_granted_by_the_piece_it_names() {
    let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    let mut wrong = Vec::new();
    for own in [false, true] {
        for g in provider_kube::grants(own) {
            let kind = if g.piece.namespaced() {
                "Role"
            } else {
                "ClusterRole"
            };
            let name = g.piece.role();
            let p = root.join(g.piece.path());
            let file = if p.is_dir() { p.join("rbac.yaml") } else { p };
            let text = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{} (named by {g:?}): {e}", file.display()));
            let doc = text
                .split("\n---\n")
                .map(|d| serde_saphyr::from_str::<serde_json::Value>(d).unwrap())
                .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("no {kind} {name} in {}", file.display()));
            let has = |v: &serde_json::Value, x: &str| {
                v.as_array()
                    .is_some_and(|a| a.iter().any(|e| e.as_str() == Some(x)))
            };
            let covered = doc["rules"].as_array().into_iter().flatten().any(|r| {
                has(&r["apiGroups"], g.group)
                    && has(&r["resources"], &g.resource)
                    && has(&r["verbs"], g.verb)
            });
            if !covered {
                wrong.push(format!(
                    "{} {}{} is not granted by {kind} {name} ({})",
                    g.verb,
                    g.resource,
                    if g.group.is_empty() {
                        String::new()
                    } else {
                        format!(".{}", g.group)
                    },
                    file.display()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
