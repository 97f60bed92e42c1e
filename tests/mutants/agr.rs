//! AGR mutants.

crate::mutants! {
    agr_1_agreement_local => AgreementLocal,
    agr_2_agreement_blocks => AgreementBlocks,
}
