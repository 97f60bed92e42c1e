//! EXC mutants (being written).

crate::mutants! {}
