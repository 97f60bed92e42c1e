//! Input format 1: how bytes decode into every target's input, and how an
//! input encodes back into bytes (for seeds, minimised regressions and
//! corpus migrations).
//!
//! Everything here is frozen: a change to what some bytes decode to is a new
//! format version (a new module beside this one, chosen by the first byte),
//! never an edit of this one. The regression files under `fuzz/regressions`
//! store the `Debug` form of their decoded input beside them, and the replay
//! test compares the two, so an accidental change fails `cargo test`.

use std::time::Duration;

use super::input::{
    BoundaryCase, DeadlineCase, Frame, Kinds, Parser, Program, Rejection, ReleaseAt, ReportInput,
    Role, VERSION,
};
use crate::model::{Header, Mode, Op, Sequence, Timeout, Work};

/// Most operations one sequence input decodes to.
pub(crate) const MAX_OPS: usize = 64;

/// Reads bytes front to back. Reading past the end yields `None`; the
/// structured inputs ([`BoundaryCase`], [`DeadlineCase`]) read missing
/// bytes as zero ([`Reader::or0`]), a sequence ends at the first operation
/// its bytes do not complete.
pub(crate) struct Reader<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Self { data, at: 0 }
    }

    pub(crate) fn byte(&mut self) -> Option<u8> {
        let byte = self.data.get(self.at).copied();
        if byte.is_some() {
            self.at += 1;
        }
        byte
    }

    /// The next byte, or zero past the end.
    pub(crate) fn or0(&mut self) -> u8 {
        self.byte().unwrap_or(0)
    }

    pub(crate) fn bytes<const N: usize>(&mut self) -> Option<[u8; N]> {
        let mut out = [0u8; N];
        for slot in &mut out {
            *slot = self.byte()?;
        }
        Some(out)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }

    fn rest(&self) -> &'a [u8] {
        &self.data[self.at.min(self.data.len())..]
    }
}

/// Checks the version byte.
pub(crate) fn version(reader: &mut Reader<'_>) -> Result<(), Rejection> {
    match reader.byte() {
        None => Err(Rejection::Empty),
        Some(VERSION) => Ok(()),
        Some(other) => Err(Rejection::Version(other)),
    }
}

// ---------------------------------------------------------------------------
// Shared pieces.

fn fault(byte: u8) -> bool {
    byte & 1 == 1
}

/// A deadline: a class byte, then the class's payload.
pub(crate) fn timeout(reader: &mut Reader<'_>) -> Option<Timeout> {
    Some(match reader.byte()? % 8 {
        0 => Timeout::Nanosecond,
        1 => Timeout::Short,
        2 => Timeout::Long,
        3 => Timeout::Unbounded,
        4 => Timeout::Exact(Duration::from_nanos(
            1 + u64::from(u16::from_le_bytes(reader.bytes()?)),
        )),
        5 => Timeout::Exact(Duration::from_micros(
            1 + u64::from(u16::from_le_bytes(reader.bytes()?)),
        )),
        6 => Timeout::Exact(Duration::from_millis(1 + u64::from(reader.byte()?))),
        _ => {
            let secs = u64::from_le_bytes(reader.bytes()?);
            let nanos = u32::from_le_bytes(reader.bytes()?) % 1_000_000_000;
            Timeout::Exact(Duration::new(secs, nanos).max(Duration::from_nanos(1)))
        }
    })
}

pub(crate) fn encode_timeout(timeout: Timeout, out: &mut Vec<u8>) {
    let exact = match timeout {
        Timeout::Nanosecond => return out.push(0),
        Timeout::Short => return out.push(1),
        Timeout::Long => return out.push(2),
        Timeout::Unbounded => return out.push(3),
        Timeout::Exact(_) => timeout.duration(),
    };
    let nanos = exact.as_nanos();
    if (1..=65_536).contains(&nanos) {
        out.push(4);
        out.extend_from_slice(&((nanos - 1) as u16).to_le_bytes());
    } else if nanos % 1_000 == 0 && (1..=65_536).contains(&(nanos / 1_000)) {
        out.push(5);
        out.extend_from_slice(&((nanos / 1_000 - 1) as u16).to_le_bytes());
    } else if nanos % 1_000_000 == 0 && (1..=256).contains(&(nanos / 1_000_000)) {
        out.push(6);
        out.push((nanos / 1_000_000 - 1) as u8);
    } else {
        out.push(7);
        out.extend_from_slice(&exact.as_secs().to_le_bytes());
        out.extend_from_slice(&exact.subsec_nanos().to_le_bytes());
    }
}

pub(crate) fn mode(byte: u8) -> Mode {
    if byte & 1 == 0 {
        Mode::NativeCancel
    } else {
        Mode::Quarantine
    }
}

pub(crate) fn mode_byte(mode: Mode) -> u8 {
    match mode {
        Mode::NativeCancel => 0,
        Mode::Quarantine => 1,
    }
}

// ---------------------------------------------------------------------------
// `sequence`.

/// `[1] [mask: u32 LE] [flags] (selector, arguments)*`; see [`super`].
pub(crate) fn program(data: &[u8]) -> Result<Program, Rejection> {
    let mut reader = Reader::new(data);
    version(&mut reader)?;
    let mask = u32::from_le_bytes(reader.bytes().ok_or(Rejection::Truncated("kind mask"))?);
    let enabled = Kinds::within(mask, Kinds::ALL_V1);
    let flags = reader.byte().ok_or(Rejection::Truncated("flags"))?;
    let ops = ops(&mut reader, &enabled.list(), MAX_OPS, op);
    Ok(Program {
        format: VERSION,
        ranks: 2,
        enabled,
        settle: flags & 1 == 1,
        ops: Sequence(ops),
    })
}

pub(crate) fn submit(work: Work, reader: &mut Reader<'_>) -> Option<Op> {
    let lane = reader.byte()?;
    let fault = fault(reader.byte()?);
    Some(Op::Submit { work, lane, fault })
}

/// Operation kind `kind` (one of format 1's) and its arguments.
/// The operations after a sequence's header, in either format: a selector
/// byte (the kind is `kinds[selector % kinds.len()]`) and the kind's
/// arguments (`op`), until `max` operations or the first operation the bytes
/// do not complete.
pub(crate) fn ops(
    reader: &mut Reader<'_>,
    kinds: &[usize],
    max: usize,
    op: fn(usize, &mut Reader<'_>) -> Option<Op>,
) -> Vec<Op> {
    let mut ops = Vec::new();
    while ops.len() < max && !reader.is_empty() {
        let Some(selector) = reader.byte() else { break };
        let kind = kinds[usize::from(selector) % kinds.len()];
        match op(kind, reader) {
            Some(op) => ops.push(op),
            None => break,
        }
    }
    ops
}

pub(crate) fn op(kind: usize, r: &mut Reader<'_>) -> Option<Op> {
    Some(match kind {
        0 => submit(Work::LocalDependencies, r)?,
        1 => submit(Work::Submit, r)?,
        2 => {
            let index = r.byte()?;
            submit(Work::Operation(index), r)?
        }
        3 => {
            let [a, b, width] = r.bytes()?;
            submit(
                Work::UnevenGather {
                    counts: [a, b],
                    width,
                }
                .normalized(),
                r,
            )?
        }
        4 => {
            let [a, b, c, d, width] = r.bytes()?;
            submit(
                Work::AllToAll {
                    sends: [[a, b], [c, d]],
                    width,
                }
                .normalized(),
                r,
            )?
        }
        5 => {
            let root = r.byte()?;
            submit(Work::Broadcast { root }.normalized(), r)?
        }
        6 => {
            let votes = r.byte()?;
            submit(
                Work::Agree {
                    votes: [votes & 1 == 1, votes & 2 == 2],
                },
                r,
            )?
        }
        7 => {
            let [values, header] = r.bytes()?;
            let header = Header::ALL[usize::from(header) % Header::ALL.len()];
            submit(Work::SendReceive { values, header }.normalized(), r)?
        }
        8 => Op::Release { sub: r.byte()? },
        9 => {
            let [sub, delay] = r.bytes()?;
            Op::LateRelease { sub, delay }
        }
        10 => Op::IsComplete { sub: r.byte()? },
        11 => Op::Wait { sub: r.byte()? },
        12 => {
            let sub = r.byte()?;
            let timeout = timeout(r)?;
            let mode = mode(r.byte()?);
            Op::WaitBounded { sub, timeout, mode }
        }
        13 => Op::DropOutputs { sub: r.byte()? },
        14 => Op::DropCompletion { sub: r.byte()? },
        15 => Op::Fork {
            count: r.byte()? % 3,
        },
        16 => {
            let [sub, lane] = r.bytes()?;
            Op::OrderAfter { sub, lane }
        }
        _ => Op::Retain { sub: r.byte()? },
    })
}

// ---------------------------------------------------------------------------
// `deadlines`.

/// `[1] [work] [operation] [mode] [release] [delay] [flags] [timeout...]`,
/// missing bytes read as zero.
pub(crate) fn deadline(data: &[u8]) -> Result<DeadlineCase, Rejection> {
    let mut r = Reader::new(data);
    version(&mut r)?;
    let work = match r.or0() % 2 {
        0 => Work::Operation(r.or0()),
        _ => {
            r.or0();
            Work::LocalDependencies
        }
    };
    let mode = mode(r.or0());
    let release = match r.or0() % 3 {
        0 => ReleaseAt::Before,
        1 => ReleaseAt::During,
        _ => ReleaseAt::After,
    };
    let delay = r.or0();
    let flags = r.or0();
    let mut timeout = timeout(&mut r).unwrap_or(Timeout::Nanosecond);
    if release == ReleaseAt::After && !timeout.bounded() {
        // Nothing releases the work before this wait ends: keep it short.
        timeout = Timeout::Exact(Timeout::BLOCKED_LIMIT);
    }
    Ok(DeadlineCase {
        work,
        timeout,
        mode,
        release,
        delay,
        fault: flags & 1 == 1,
        poll_first: flags & 2 == 2,
        drop_outputs_first: flags & 4 == 4,
    })
}

pub(crate) fn encode_deadline(case: &DeadlineCase) -> Vec<u8> {
    let (work, operation) = match case.work {
        Work::Operation(index) => (0, index),
        _ => (1, 0),
    };
    let release = match case.release {
        ReleaseAt::Before => 0,
        ReleaseAt::During => 1,
        ReleaseAt::After => 2,
    };
    let flags = u8::from(case.fault)
        | (u8::from(case.poll_first) << 1)
        | (u8::from(case.drop_outputs_first) << 2);
    let mut out = vec![
        VERSION,
        work,
        operation,
        mode_byte(case.mode),
        release,
        case.delay,
        flags,
    ];
    encode_timeout(case.timeout, &mut out);
    out
}

// ---------------------------------------------------------------------------
// `boundary`.

/// Characters of names (schemas, roles); the space makes blank names.
const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz.- ";

/// Payload values: most bytes are small exact numbers, the last 16 are
/// special values (NaN payloads, infinities, signed zero, subnormals, ...).
pub(crate) fn payload_value(byte: u8) -> f32 {
    const SPECIAL: [u32; 16] = [
        0x7fc0_0000, // NaN
        0xffc0_0001, // negative NaN with a payload
        0x7f80_0001, // signalling NaN
        0x7f80_0000, // +inf
        0xff80_0000, // -inf
        0x8000_0000, // -0.0
        0x0000_0001, // smallest subnormal
        0x807f_ffff, // largest negative subnormal
        0x7f7f_ffff, // f32::MAX
        0xff7f_ffff, // f32::MIN
        0x0080_0000, // f32::MIN_POSITIVE
        0x3f80_0001, // 1 + ulp
        0x4b80_0000, // 2^24
        0x4b80_0001, // 2^24 + 2
        0xbf80_0000, // -1.0
        0x3eaa_aaab, // 1/3
    ];
    match byte {
        240.. => f32::from_bits(SPECIAL[usize::from(byte - 240)]),
        small => (f32::from(small) - 120.0) / 4.0,
    }
}

fn name(r: &mut Reader<'_>) -> String {
    let len = usize::from(r.or0() % 8);
    (0..len)
        .map(|_| char::from(ALPHABET[usize::from(r.or0()) % ALPHABET.len()]))
        .collect()
}

fn shape(r: &mut Reader<'_>) -> Vec<usize> {
    let rank = 1 + usize::from(r.or0() % 3);
    (0..rank).map(|_| usize::from(r.or0() % 5)).collect()
}

/// `[1] [flags] [route] sender-frame mutations*`, missing bytes read as
/// zero. A frame is `[header route] schema [roles]` and each role
/// `name [dtype] shape values`; the receiver's frame is the sender's with
/// the mutations applied (`[count] ([kind] [argument])*`).
pub(crate) fn boundary(data: &[u8]) -> Result<BoundaryCase, Rejection> {
    let mut r = Reader::new(data);
    version(&mut r)?;
    let flags = r.or0();
    let route = u64::from(r.or0() % 16);
    let header_route = u64::from(r.or0() % 16);
    let schema = name(&mut r);
    let roles = 1 + usize::from(r.or0() % 3);
    let roles: Vec<Role> = (0..roles)
        .map(|_| {
            let name = name(&mut r);
            let dtype = r.or0() % 14;
            let declared = shape(&mut r);
            let tensor: Vec<usize> = declared.iter().map(|&d| d.max(1)).collect();
            let elements = tensor.iter().product::<usize>();
            let values = (0..elements).map(|_| payload_value(r.or0())).collect();
            Role {
                name,
                dtype,
                declared,
                tensor,
                values,
            }
        })
        .collect();
    let sender = Frame {
        route: header_route,
        schema,
        roles,
    };
    let mut receiver = sender.clone();
    let mutations = r.or0() % 5;
    for _ in 0..mutations {
        let (kind, arg) = (r.or0() % 8, r.or0());
        mutate(&mut receiver, kind, arg);
    }
    Ok(BoundaryCase {
        route,
        sender_first: flags & 1 == 1,
        sender,
        receiver,
    })
}

/// One mutation of the receiver's frame.
fn mutate(frame: &mut Frame, kind: u8, arg: u8) {
    let count = frame.roles.len();
    let role = usize::from(arg) % count.max(1);
    match kind {
        0 => frame.route = u64::from(arg % 16),
        1 => frame
            .schema
            .push(char::from(ALPHABET[usize::from(arg) % ALPHABET.len()])),
        2 => frame.roles[role].name.push(char::from(b'a' + arg % 26)),
        3 => frame.roles[role].dtype = arg % 14,
        4 => {
            let declared = &mut frame.roles[role].declared;
            let axis = usize::from(arg / 3) % declared.len();
            declared[axis] = usize::from(arg % 5);
        }
        5 => {
            let tensor = &mut frame.roles[role].tensor;
            let axis = usize::from(arg / 3) % tensor.len();
            tensor[axis] = 1 + usize::from(arg % 4);
            let elements = tensor.iter().product();
            frame.roles[role].values = vec![0.0; elements];
        }
        6 if count > 1 => {
            frame.roles.remove(role);
        }
        6 => {
            let mut extra = frame.roles[0].clone();
            extra.name.push('x');
            frame.roles.push(extra);
        }
        _ if count > 1 => frame.roles.swap(role, (role + 1) % count),
        _ => {}
    }
}

fn encode_name(name: &str, out: &mut Vec<u8>) {
    let bytes: Vec<u8> = name
        .bytes()
        .filter_map(|b| ALPHABET.iter().position(|&a| a == b))
        .map(|i| i as u8)
        .take(7)
        .collect();
    out.push(bytes.len() as u8);
    out.extend(bytes);
}

fn encode_shape(shape: &[usize], out: &mut Vec<u8>) {
    let shape = &shape[..shape.len().clamp(1, 3)];
    out.push((shape.len() - 1) as u8);
    out.extend(shape.iter().map(|&d| (d % 5) as u8));
}

fn value_byte(value: f32) -> u8 {
    (0..=255u8)
        .find(|&b| payload_value(b).to_bits() == value.to_bits())
        .unwrap_or(120)
}

/// A sender frame and no mutation (the receiver's frame equals the
/// sender's); other receivers are reached by appending mutations.
pub(crate) fn encode_boundary(case: &BoundaryCase) -> Vec<u8> {
    let mut out = vec![
        VERSION,
        u8::from(case.sender_first),
        (case.route % 16) as u8,
        (case.sender.route % 16) as u8,
    ];
    encode_name(&case.sender.schema, &mut out);
    let roles = &case.sender.roles[..case.sender.roles.len().clamp(1, 3)];
    out.push((roles.len() - 1) as u8);
    for role in roles {
        encode_name(&role.name, &mut out);
        out.push(role.dtype % 14);
        encode_shape(&role.declared, &mut out);
        let elements: usize = role
            .declared
            .iter()
            .take(3)
            .map(|&d| (d % 5).max(1))
            .product();
        out.extend((0..elements).map(|i| role.values.get(i).map_or(120, |&v| value_byte(v))));
    }
    out.push(0);
    out
}

// ---------------------------------------------------------------------------
// `report`.

/// `[1] [parser] text` (the text is UTF-8, invalid sequences replaced);
/// `diff` reads `[first length: u16 LE]` before its two texts.
pub(crate) fn report(data: &[u8]) -> Result<ReportInput, Rejection> {
    let mut r = Reader::new(data);
    version(&mut r)?;
    let parser = match r.or0() % 3 {
        0 => Parser::Verify,
        1 => Parser::Diff,
        _ => Parser::Expectations,
    };
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    let texts = match parser {
        Parser::Diff => {
            let first = usize::from(u16::from_le_bytes([r.or0(), r.or0()]));
            let rest = r.rest();
            let split = first.min(rest.len());
            vec![text(&rest[..split]), text(&rest[split..])]
        }
        Parser::Verify | Parser::Expectations => vec![text(r.rest())],
    };
    Ok(ReportInput { parser, texts })
}

pub(crate) fn encode_report(input: &ReportInput) -> Vec<u8> {
    let parser = match input.parser {
        Parser::Verify => 0,
        Parser::Diff => 1,
        Parser::Expectations => 2,
    };
    let mut out = vec![VERSION, parser];
    match input.parser {
        Parser::Diff => {
            let first = input.texts.first().map_or("", String::as_str);
            let second = input.texts.get(1).map_or("", String::as_str);
            let len = first.len().min(usize::from(u16::MAX));
            out.extend_from_slice(&(len as u16).to_le_bytes());
            out.extend_from_slice(&first.as_bytes()[..len]);
            out.extend_from_slice(second.as_bytes());
        }
        Parser::Verify | Parser::Expectations => {
            out.extend(input.texts.iter().flat_map(|t| t.bytes()));
        }
    }
    out
}

impl DeadlineCase {
    /// The input's bytes in the current format.
    pub fn encode(&self) -> Vec<u8> {
        encode_deadline(self)
    }
}

impl BoundaryCase {
    /// The input's bytes in the current format: the sender's frame, and the
    /// receiver's when it equals it (mutations are not re-encoded).
    pub fn encode(&self) -> Vec<u8> {
        encode_boundary(self)
    }
}

impl ReportInput {
    /// The input's bytes in the current format.
    pub fn encode(&self) -> Vec<u8> {
        encode_report(self)
    }
}
