//! Trace synthesis: generates churn traces from container-lifetime distributions, arrival
//! processes and target operation rates, and fits lifetime distributions to observed data.
//!
//! This crate is not written yet; its issue in the tracker describes what it will hold.
