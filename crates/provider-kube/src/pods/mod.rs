//! One pod's life, for every pod the run makes (workload, `io_phase`, I/O stream, pull check,
//! fetch): why it will not start ([`verdict`], pure), waiting on it ([`wait`]), starting,
//! stopping and guarding a workload pod ([`lifecycle`]), room on a node ([`room`]), the
//! WaitForFirstConsumer node pick ([`wffc`]), following its log ([`logs`]), and one iogen
//! pod run to its end ([`iogen`]).

pub(crate) mod iogen;
pub(crate) mod lifecycle;
pub(crate) mod logs;
pub(crate) mod room;
pub(crate) mod verdict;
pub(crate) mod wait;
pub(crate) mod wffc;
