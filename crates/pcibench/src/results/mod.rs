//! Results kept for later: the saved-run file (`saved`, versioned), the configuration that
//! identifies a row across runs (`config`), and comparing two saved runs (`compare`, leading with
//! `context_diff`). Rendering them (CSV, SVG plots, the comparison's table) is `report`'s.

pub mod compare;
pub mod config;
pub mod context_diff;
pub mod sanity;
pub mod saved;
pub mod stream;
