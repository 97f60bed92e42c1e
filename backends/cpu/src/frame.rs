//! What travels between the members of a group and the two ends of a
//! route, and its wire encoding between processes.
//!
//! A member's [`Contribution`] to a collective, a route's native [`Message`]
//! (P2P-3: headers and payloads of a bundle in one message), and the
//! [`Frame`]s that carry them, or a collective's abort or a group's fence, to
//! another process ([`crate::fabric`]). The encoding is little-endian
//! integers with length-prefixed strings and lists; every truncated or
//! malformed frame decodes to `None`, never a panic.

use std::sync::Arc;

use crate::tensor::{Element, Values};

/// What one member brings to a collective.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Contribution {
    /// The operation the member submitted; members of one collective must agree.
    pub(crate) operation: &'static str,
    /// Input values (row-major), shared with the input's storage.
    pub(crate) values: Values,
    /// Input shape.
    pub(crate) shape: Vec<i32>,
    /// Input element type; members of one collective must agree.
    pub(crate) element: Element,
    /// The member's admission ticket: tickets grow with every collective
    /// admitted on the group in this process, so within one collective they
    /// order its members by submission (0 for a member in another process).
    pub(crate) arrival: u64,
    /// Operation-specific scalars every member must agree on or exchange
    /// (a root, per-peer counts, a status).
    pub(crate) meta: Vec<usize>,
}

/// One value as it travels: header bytes, shape and payload.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Framed {
    pub(crate) header: Vec<u8>,
    pub(crate) shape: Vec<i32>,
    pub(crate) payload: Values,
}

/// One native message on a route.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Message {
    /// Headers and payloads of a whole bundle together (the correct framing).
    Bundle(Vec<Framed>),
    /// Headers alone (the P2P-3 defect sends these before the payloads).
    Headers(Vec<Vec<u8>>),
    /// Payloads alone, with shapes (the P2P-3 defect).
    Payloads(Vec<(Vec<i32>, Values)>),
}

/// Operation names a contribution may carry (frames carry the name).
const OPERATIONS: [&str; 7] = [
    "all_reduce_sum",
    "all_gather_even",
    "all_gather_uneven",
    "variable_all_to_all",
    "broadcast",
    "barrier",
    "agree_success",
];

/// What a frame is addressed to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Target {
    Group { world: u64, key: String },
    Route { world: u64, id: u64 },
}

/// What a frame says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Frame {
    /// `member`'s contribution to collective `seq`.
    Deposit {
        seq: u64,
        member: usize,
        contribution: Contribution,
    },
    /// `member` left collective `seq` without contributing.
    Abort {
        seq: u64,
        member: usize,
        reason: String,
    },
    /// Every later collective on the group fails.
    Fence { reason: String },
    /// One native message on a route.
    Route(Message),
}

// The wire format: little-endian integers, length-prefixed strings and
// lists. Only processes of one build talk to each other.

struct Writer(Vec<u8>);

impl Writer {
    fn u8(&mut self, value: u8) {
        self.0.push(value);
    }
    fn u64(&mut self, value: u64) {
        self.0.extend_from_slice(&value.to_le_bytes());
    }
    fn usize(&mut self, value: usize) {
        self.u64(value as u64);
    }
    fn bytes(&mut self, value: &[u8]) {
        self.usize(value.len());
        self.0.extend_from_slice(value);
    }
    fn str(&mut self, value: &str) {
        self.bytes(value.as_bytes());
    }
    fn f32s(&mut self, values: &[f32]) {
        self.usize(values.len());
        for value in values {
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }
    fn i32s(&mut self, values: &[i32]) {
        self.usize(values.len());
        for value in values {
            self.0.extend_from_slice(&value.to_le_bytes());
        }
    }
    fn usizes(&mut self, values: &[usize]) {
        self.usize(values.len());
        for value in values {
            self.usize(*value);
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn usize(&mut self) -> Option<usize> {
        usize::try_from(self.u64()?).ok()
    }
    /// A count of items of `width` bytes, refused when the frame is shorter.
    fn count(&mut self, width: usize) -> Option<usize> {
        let n = self.usize()?;
        (n.checked_mul(width)? <= self.0.len()).then_some(n)
    }
    fn bytes(&mut self) -> Option<Vec<u8>> {
        let n = self.count(1)?;
        self.take(n).map(<[u8]>::to_vec)
    }
    fn str(&mut self) -> Option<String> {
        String::from_utf8(self.bytes()?).ok()
    }
    fn f32s(&mut self) -> Option<Vec<f32>> {
        let n = self.count(4)?;
        (0..n)
            .map(|_| Some(f32::from_le_bytes(self.take(4)?.try_into().ok()?)))
            .collect()
    }
    fn i32s(&mut self) -> Option<Vec<i32>> {
        let n = self.count(4)?;
        (0..n)
            .map(|_| Some(i32::from_le_bytes(self.take(4)?.try_into().ok()?)))
            .collect()
    }
    fn usizes(&mut self) -> Option<Vec<usize>> {
        let n = self.count(8)?;
        (0..n).map(|_| self.usize()).collect()
    }
}

/// The bytes of `frame`, addressed to `target`.
pub(crate) fn encode(target: &Target, frame: &Frame) -> Vec<u8> {
    let mut w = Writer(Vec::new());
    match target {
        Target::Group { world, key } => {
            w.u8(0);
            w.u64(*world);
            w.str(key);
        }
        Target::Route { world, id } => {
            w.u8(1);
            w.u64(*world);
            w.u64(*id);
        }
    }
    match frame {
        Frame::Deposit {
            seq,
            member,
            contribution,
        } => {
            w.u8(0);
            w.u64(*seq);
            w.usize(*member);
            w.str(contribution.operation);
            w.f32s(&contribution.values);
            w.i32s(&contribution.shape);
            w.u8(match contribution.element {
                Element::F32 => 0,
                Element::F16 => 1,
                Element::Bf16 => 2,
            });
            w.usizes(&contribution.meta);
        }
        Frame::Abort {
            seq,
            member,
            reason,
        } => {
            w.u8(1);
            w.u64(*seq);
            w.usize(*member);
            w.str(reason);
        }
        Frame::Fence { reason } => {
            w.u8(2);
            w.str(reason);
        }
        Frame::Route(Message::Bundle(values)) => {
            w.u8(3);
            w.usize(values.len());
            for value in values {
                w.bytes(&value.header);
                w.i32s(&value.shape);
                w.f32s(&value.payload);
            }
        }
        Frame::Route(Message::Headers(headers)) => {
            w.u8(4);
            w.usize(headers.len());
            for header in headers {
                w.bytes(header);
            }
        }
        Frame::Route(Message::Payloads(payloads)) => {
            w.u8(5);
            w.usize(payloads.len());
            for (shape, payload) in payloads {
                w.i32s(shape);
                w.f32s(payload);
            }
        }
    }
    w.0
}

/// The target and frame `bytes` encode; `None` for anything malformed.
pub(crate) fn decode(bytes: &[u8]) -> Option<(Target, Frame)> {
    let mut r = Reader(bytes);
    let target = match r.u8()? {
        0 => Target::Group {
            world: r.u64()?,
            key: r.str()?,
        },
        1 => Target::Route {
            world: r.u64()?,
            id: r.u64()?,
        },
        _ => return None,
    };
    let frame = match r.u8()? {
        0 => {
            let (seq, member) = (r.u64()?, r.usize()?);
            let name = r.str()?;
            let operation = OPERATIONS.iter().find(|known| **known == name)?;
            Frame::Deposit {
                seq,
                member,
                contribution: Contribution {
                    operation,
                    values: Arc::new(r.f32s()?),
                    shape: r.i32s()?,
                    element: match r.u8()? {
                        0 => Element::F32,
                        1 => Element::F16,
                        2 => Element::Bf16,
                        _ => return None,
                    },
                    meta: r.usizes()?,
                    arrival: 0,
                },
            }
        }
        1 => Frame::Abort {
            seq: r.u64()?,
            member: r.usize()?,
            reason: r.str()?,
        },
        2 => Frame::Fence { reason: r.str()? },
        3 => {
            let n = r.count(1)?;
            let values = (0..n)
                .map(|_| {
                    Some(Framed {
                        header: r.bytes()?,
                        shape: r.i32s()?,
                        payload: Arc::new(r.f32s()?),
                    })
                })
                .collect::<Option<_>>()?;
            Frame::Route(Message::Bundle(values))
        }
        4 => {
            let n = r.count(1)?;
            Frame::Route(Message::Headers(
                (0..n).map(|_| r.bytes()).collect::<Option<_>>()?,
            ))
        }
        5 => {
            let n = r.count(1)?;
            Frame::Route(Message::Payloads(
                (0..n)
                    .map(|_| Some((r.i32s()?, Arc::new(r.f32s()?))))
                    .collect::<Option<_>>()?,
            ))
        }
        _ => return None,
    };
    r.0.is_empty().then_some((target, frame))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_frame_decodes_to_itself() {
        let frames = [
            Frame::Deposit {
                seq: 7,
                member: 1,
                contribution: Contribution {
                    operation: "all_gather_uneven",
                    values: Arc::new(vec![1.5, -2.0]),
                    shape: vec![2],
                    element: Element::Bf16,
                    meta: vec![3, 0],
                    arrival: 0,
                },
            },
            Frame::Abort {
                seq: 2,
                member: 0,
                reason: "cancelled".into(),
            },
            Frame::Fence {
                reason: "a deadline".into(),
            },
            Frame::Route(Message::Bundle(vec![Framed {
                header: vec![1, 2],
                shape: vec![1, 2],
                payload: Arc::new(vec![3.0, 4.0]),
            }])),
            Frame::Route(Message::Headers(vec![vec![9], vec![]])),
            Frame::Route(Message::Payloads(vec![(vec![1], Arc::new(vec![5.0]))])),
        ];
        for frame in frames {
            let target = Target::Group {
                world: 3,
                key: "world".into(),
            };
            let bytes = encode(&target, &frame);
            assert_eq!(decode(&bytes), Some((target, frame.clone())));
            // Every truncation is refused, never a panic.
            for cut in 0..bytes.len() {
                assert_eq!(decode(&bytes[..cut]), None, "{frame:?} cut at {cut}");
            }
        }
    }
}
