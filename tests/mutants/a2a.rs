//! A2A mutants (being written).

crate::mutants! {}
