//! SUM mutants (being written).

crate::mutants! {}
