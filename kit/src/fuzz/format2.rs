//! Input format 2 of the `sequence` target: how bytes decode into a
//! [`Program`], and how a program encodes back into bytes (seeds, minimised
//! regressions, the corpus migrated from format 1).
//!
//! `[2] [ranks] [mask: u32 LE] [flags] (selector arguments)*`: the world
//! has `2 + ranks % 3` ranks; the mask and the selector work as in format 1
//! over [`Kinds::NAMES`], whose first 18 kinds keep format 1's argument
//! bytes, and six more follow: `DropLane` (`lane`), `EmptyLocal`
//! (`lane`), `SubmitLazy` (`lane`), `Refused` (`api lane`, api bit 0:
//! `submit_local_dependencies`), `DropQueued` (`lane`) and `OrderedPair`
//! (`lane`). Flags bit 0 settles. At most [`MAX_OPS`]
//! operations.
//!
//! Frozen like format 1: a change to what some bytes decode to is format 3.

use super::format::{self, encode_timeout, mode_byte, Reader};
use super::input::{Kinds, Program, Rejection, SEQUENCE_VERSION, V1_KINDS};
use crate::model::{Header, Op, Sequence, Work};

/// Most operations one format-2 input decodes to (format 1: 64).
pub(crate) const MAX_OPS: usize = 128;

/// `[2] [ranks] [mask: u32 LE] [flags] (selector, arguments)*`; see the
/// module docs. The version byte has been read.
pub(crate) fn program(mut reader: Reader<'_>) -> Result<Program, Rejection> {
    let ranks = 2 + usize::from(reader.byte().ok_or(Rejection::Truncated("world size"))? % 3);
    let mask = u32::from_le_bytes(reader.bytes().ok_or(Rejection::Truncated("kind mask"))?);
    let enabled = Kinds::from_mask(mask);
    let flags = reader.byte().ok_or(Rejection::Truncated("flags"))?;
    let ops = format::ops(&mut reader, &enabled.list(), MAX_OPS, op);
    Ok(Program {
        format: SEQUENCE_VERSION,
        ranks,
        enabled,
        settle: flags & 1 == 1,
        ops: Sequence(ops),
    })
}

/// Operation kind `kind` and its arguments: format 1's kinds as format 1
/// reads them, then the four of format 2.
fn op(kind: usize, r: &mut Reader<'_>) -> Option<Op> {
    Some(match kind {
        k if k < V1_KINDS => format::op(k, r)?,
        18 => Op::DropLane { lane: r.byte()? },
        19 => Op::EmptyLocal { lane: r.byte()? },
        20 => Op::SubmitLazy { lane: r.byte()? },
        22 => Op::DropQueued { lane: r.byte()? },
        23 => Op::OrderedPair { lane: r.byte()? },
        _ => {
            let [api, lane] = r.bytes()?;
            Op::Refused {
                local: api & 1 == 1,
                lane,
            }
        }
    })
}

/// The kind number of `op` and its argument bytes.
fn op_bytes(op: Op) -> (usize, Vec<u8>) {
    let submit = |kind: usize, mut args: Vec<u8>, lane: u8, fault: bool| {
        args.extend([lane, u8::from(fault)]);
        (kind, args)
    };
    match op {
        Op::Submit { work, lane, fault } => match work.normalized() {
            Work::LocalDependencies => submit(0, vec![], lane, fault),
            Work::Submit => submit(1, vec![], lane, fault),
            Work::Operation(index) => submit(2, vec![index], lane, fault),
            Work::UnevenGather { counts, width } => {
                submit(3, vec![counts[0], counts[1], width], lane, fault)
            }
            Work::AllToAll { sends, width } => submit(
                4,
                vec![sends[0][0], sends[0][1], sends[1][0], sends[1][1], width],
                lane,
                fault,
            ),
            Work::Broadcast { root } => submit(5, vec![root], lane, fault),
            Work::Agree { votes } => submit(
                6,
                vec![u8::from(votes[0]) | (u8::from(votes[1]) << 1)],
                lane,
                fault,
            ),
            Work::SendReceive { values, header } => {
                let header = Header::ALL.iter().position(|h| *h == header).unwrap_or(0);
                submit(7, vec![values, header as u8], lane, fault)
            }
        },
        Op::Release { sub } => (8, vec![sub]),
        Op::LateRelease { sub, delay } => (9, vec![sub, delay]),
        Op::IsComplete { sub } => (10, vec![sub]),
        Op::Wait { sub } => (11, vec![sub]),
        Op::WaitBounded { sub, timeout, mode } => {
            let mut args = vec![sub];
            encode_timeout(timeout, &mut args);
            args.push(mode_byte(mode));
            (12, args)
        }
        Op::DropOutputs { sub } => (13, vec![sub]),
        Op::DropCompletion { sub } => (14, vec![sub]),
        Op::Fork { count } => (15, vec![count % 3]),
        Op::OrderAfter { sub, lane } => (16, vec![sub, lane]),
        Op::Retain { sub } => (17, vec![sub]),
        Op::DropLane { lane } => (18, vec![lane]),
        Op::EmptyLocal { lane } => (19, vec![lane]),
        Op::SubmitLazy { lane } => (20, vec![lane]),
        Op::Refused { local, lane } => (21, vec![u8::from(local), lane]),
        Op::DropQueued { lane } => (22, vec![lane]),
        Op::OrderedPair { lane } => (23, vec![lane]),
    }
}

/// `program` as format-2 bytes (whatever format it was decoded from: a
/// format-1 program keeps its operations, kinds and settling, in a world of
/// its `ranks`). Operations whose kind `enabled` excludes are left out (they
/// would decode as another kind).
pub(crate) fn encode_program(program: &Program) -> Vec<u8> {
    let ranks = (program.ranks.clamp(2, 4) - 2) as u8;
    let mut out = vec![SEQUENCE_VERSION, ranks];
    out.extend_from_slice(&program.enabled.mask().to_le_bytes());
    out.push(u8::from(program.settle));
    let kinds = program.enabled.list();
    for &op in program.ops.iter().take(MAX_OPS) {
        let (kind, args) = op_bytes(op);
        if let Some(selector) = kinds.iter().position(|&k| k == kind) {
            out.push(selector as u8);
            out.extend(args);
        }
    }
    out
}

impl Program {
    /// The input's bytes in the newest format ([`FORMAT`](super::FORMAT)).
    pub fn encode(&self) -> Vec<u8> {
        encode_program(self)
    }
}
