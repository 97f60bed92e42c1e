//! CAN mutants (being written).

crate::mutants! {}
