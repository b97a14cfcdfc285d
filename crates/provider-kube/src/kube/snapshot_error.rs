//! Which VolumeSnapshot errors the snapshot controllers retry by themselves (a snapshot and a
//! group snapshot both wait through them).

/// Why a VolumeSnapshot's `status.error` is one the snapshot controllers retry by themselves,
/// or `None` when it is final. Two sources write that field:
/// - the snapshotter sidecar, with the CSI driver's gRPC status (`rpc error: code = …`): the
///   codes csi-lib-utils' `IsFinalError` calls not final (the operation may still be in
///   progress; the sidecar retries it) are `Canceled`, `DeadlineExceeded`, `Unavailable`,
///   `ResourceExhausted`, `Aborted` (a driver's "operation pending for volume", e.g. a
///   CreateSnapshot that met the kubelet's NodeStage of the same volume); any other code is
///   final;
/// - the snapshot controller itself (external-snapshotter's `snapshot_controller.go`), for
///   steps it retries: a status update that failed (an API conflict), a content its cache
///   does not have yet, a binding to redo.
///
/// Anything else is final.
pub(crate) fn retried_snapshot_error(msg: &str) -> Option<&'static str> {
    if let Some((i, m)) = msg.match_indices("code = ").next() {
        let code = &msg[i + m.len()..];
        return [
            "Canceled",
            "DeadlineExceeded",
            "Unavailable",
            "ResourceExhausted",
            "Aborted",
        ]
        .into_iter()
        .find(|c| code.starts_with(c));
    }
    [
        ("Snapshot status update failed", "status update failed"),
        ("VolumeSnapshotContent is missing", "content not yet seen"),
        (
            "Snapshot failed to bind VolumeSnapshotContent",
            "binding retried",
        ),
        ("the object has been modified", "API conflict"),
    ]
    .into_iter()
    .find_map(|(needle, why)| msg.contains(needle).then_some(why))
}

#[cfg(test)]
mod tests {
    use super::retried_snapshot_error;

    #[test]
    fn retried_errors_are_the_ones_the_snapshot_controllers_retry() {
        let aborted = "Failed to check and update snapshot content: failed to take snapshot of \
                       the volume vol-3: \"rpc error: code = Aborted desc = an operation on \
                       \\\"vol-3\\\" is already in progress\"";
        assert_eq!(retried_snapshot_error(aborted), Some("Aborted"));
        assert_eq!(
            retried_snapshot_error("rpc error: code = Unavailable desc = injected"),
            Some("Unavailable")
        );
        assert_eq!(
            retried_snapshot_error("rpc error: code = Internal desc = injected failure"),
            None
        );
        // A code named only in the description is not the error's code.
        assert_eq!(
            retried_snapshot_error("rpc error: code = InvalidArgument desc = not Aborted"),
            None
        );
        assert_eq!(
            retried_snapshot_error(
                "Snapshot status update failed, Operation cannot be fulfilled on \
                 volumesnapshots.snapshot.storage.k8s.io \"s\": the object has been modified"
            ),
            Some("status update failed")
        );
        assert_eq!(
            retried_snapshot_error("VolumeSnapshotContent is missing"),
            Some("content not yet seen")
        );
        assert_eq!(
            retried_snapshot_error(
                "Failed to create snapshot content with error snapshot class \"x\" not found"
            ),
            None
        );
    }
}
