//! The output-mutation matrix (`commcheck::precision`): every plausible
//! wrong output of every value check is refused by that check's verifier on
//! the data its suite runs. Prints the matrix (`--nocapture`).

#[test]
fn every_value_check_rejects_every_plausible_wrong_output() {
    let matrix = commcheck::precision::mutation_matrix();
    println!("{matrix}");
    let accepted = matrix.accepted();
    assert!(
        accepted.is_empty(),
        "the value checks' data cannot tell {} wrong output(s) from the right one:\n{}",
        accepted.len(),
        accepted
            .iter()
            .map(|row| format!(
                "  {} {} {}: {} of {} cases rejected it",
                row.check, row.dtype, row.mutation, row.rejected, row.cases
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
