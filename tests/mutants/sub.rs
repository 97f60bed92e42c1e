//! SUB mutants (being written).

crate::mutants! {}
