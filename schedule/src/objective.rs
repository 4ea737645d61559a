//! The two objectives the search minimizes (each breaks the other's ties).

/// Which objective a chain minimizes (the other one breaks ties).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Objective {
    /// GPU union of all requests.
    Gpu,
    /// Cache byte-ns.
    Cache,
}
