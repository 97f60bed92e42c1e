//! The planners on the host, with no GPU: every copy table is run by a host
//! model of `commcheck_copy_segments` over fake device memory, for every
//! element type, and compared with the collective's definition.

use super::all_to_all::all_to_all_plan;
use super::broadcast::broadcast_plan;
use super::gather::{even_by_arrival, even_plan, even_swapped, uneven_plan};
use super::plan::around;
use super::sum::{sum_plan, sum_share_repeating};
use crate::element::Element;
use crate::ffi::share;
use crate::group::{Contribution, Planner};
use std::collections::HashMap;

/// Fake device memory: region `i` starts at `(i + 1) << 32`.
#[derive(Default)]
struct Memory {
    regions: HashMap<u64, Vec<u8>>,
}

impl Memory {
    fn region(&mut self, bytes: Vec<u8>) -> u64 {
        let base = (self.regions.len() as u64 + 1) << 32;
        self.regions.insert(base, bytes);
        base
    }

    fn half(&mut self, address: u64) -> &mut [u8] {
        let (base, offset) = (address >> 32 << 32, (address & 0xffff_ffff) as usize);
        let region = self.regions.get_mut(&base).expect("an address in a region");
        &mut region[offset..offset + 2]
    }

    /// The host model of `commcheck_copy_segments` (in halves).
    fn run(&mut self, table: &[u8]) {
        let words: Vec<u64> = table
            .chunks_exact(8)
            .map(|w| u64::from_le_bytes(w.try_into().unwrap()))
            .collect();
        for s in words[1..].chunks_exact(6).take(words[0] as usize) {
            let (source, destination, rows, row_len, from, to) =
                (s[0], s[1], s[2], s[3], s[4], s[5]);
            for row in 0..rows {
                for column in 0..row_len {
                    let value = self.half(source + 2 * (row * from + column)).to_vec();
                    self.half(destination + 2 * (row * to + column))
                        .copy_from_slice(&value);
                }
            }
        }
    }
}

/// Member `member`'s input: distinct bytes per (member, byte).
fn input_bytes(member: usize, len: usize, element: Element) -> Vec<u8> {
    (0..len * element.size())
        .map(|i| (member * 97 + i * 7 + 1) as u8)
        .collect()
}

/// Runs `planner` for members with `shapes` and `meta`, outputs of
/// `output_shapes`; each member's output bytes.
fn run(
    planner: Planner,
    element: Element,
    shapes: &[Vec<i32>],
    output_shapes: &[Vec<i32>],
    meta: &[Vec<usize>],
    arrival: &[usize],
) -> Vec<Vec<u8>> {
    let mut memory = Memory::default();
    let count = |shape: &[i32]| shape.iter().product::<i32>() as usize;
    let all: Vec<Contribution> = (0..shapes.len())
        .map(|member| {
            let input = memory.region(input_bytes(member, count(&shapes[member]), element));
            let output = memory.region(vec![0; count(&output_shapes[member]) * element.size()]);
            Contribution {
                input: Some((input, shapes[member].clone())),
                output: Some((output, output_shapes[member].clone())),
                meta: meta[member].clone(),
                element,
                arrival: arrival[member],
                ..Contribution::default()
            }
        })
        .collect();
    let plans = planner("test", &all);
    for plan in &plans {
        memory.run(plan.as_ref().expect("a plan"));
    }
    all.iter()
        .map(|c| memory.regions[&c.output.as_ref().unwrap().0].clone())
        .collect()
}

/// The even gather of `shapes` along `axis`, by definition.
fn gathered(shape: &[i32], members: usize, axis: usize, element: Element) -> Vec<u8> {
    let (outer, extent, rest) = around(shape, axis);
    let block = (extent * rest) as usize * element.size();
    let len = shape.iter().product::<i32>() as usize;
    let inputs: Vec<Vec<u8>> = (0..members).map(|m| input_bytes(m, len, element)).collect();
    let mut out = Vec::new();
    for row in 0..outer as usize {
        for input in &inputs {
            out.extend_from_slice(&input[row * block..(row + 1) * block]);
        }
    }
    out
}

fn even(
    planner: Planner,
    element: Element,
    axis: usize,
    arrival: &[usize],
) -> (Vec<Vec<u8>>, Vec<u8>) {
    let shape = vec![2, 3, 5];
    let n = arrival.len();
    let mut out = shape.clone();
    out[axis] *= n as i32;
    let got = run(
        planner,
        element,
        &vec![shape.clone(); n],
        &vec![out; n],
        &vec![vec![axis]; n],
        arrival,
    );
    (got, gathered(&shape, n, axis, element))
}

#[test]
fn even_gathers_every_axis_and_element() {
    for element in Element::ALL {
        for axis in 0..3 {
            let (got, want) = even(even_plan, element, axis, &[0, 1, 2]);
            assert!(got.iter().all(|g| *g == want), "{element} axis {axis}");
        }
    }
}

#[test]
fn gather_defects_differ_only_where_they_should() {
    for element in Element::ALL {
        for axis in 0..3 {
            let (got, want) = even(even_swapped, element, axis, &[0, 1, 2]);
            assert_eq!(
                got.iter().all(|g| *g == want),
                axis != 1,
                "{element} axis {axis}"
            );
        }
        let (got, want) = even(even_by_arrival, element, 1, &[0, 1, 2]);
        assert!(
            got.iter().all(|g| *g == want),
            "{element}: arrival in member order"
        );
        let (got, want) = even(even_by_arrival, element, 1, &[2, 0, 1]);
        assert!(
            got.iter().all(|g| *g != want),
            "{element}: arrival out of order"
        );
    }
}

#[test]
fn uneven_gather_all_to_all_and_broadcast_move_every_element_type() {
    for element in Element::ALL {
        // Uneven gather along the middle axis, counts 1, 3, 2.
        let counts = [1usize, 3, 2];
        let shapes: Vec<Vec<i32>> = counts.iter().map(|&c| vec![2, c as i32, 3]).collect();
        let meta = vec![std::iter::once(1).chain(counts).collect::<Vec<_>>(); 3];
        let got = run(
            uneven_plan,
            element,
            &shapes,
            &vec![vec![2, 6, 3]; 3],
            &meta,
            &[0, 1, 2],
        );
        let size = element.size();
        let mut want = Vec::new();
        for row in 0..2 {
            for (m, &c) in counts.iter().enumerate() {
                let input = input_bytes(m, 2 * c * 3, element);
                let block = c * 3 * size;
                want.extend_from_slice(&input[row * block..(row + 1) * block]);
            }
        }
        assert!(got.iter().all(|g| *g == want), "uneven {element}");

        // All-to-all along axis 0 of [extent, 3]: member p sends
        // sends[p][q] rows to q.
        let sends = [[1usize, 2], [3, 1]];
        let shapes: Vec<Vec<i32>> = sends
            .iter()
            .map(|s| vec![(s[0] + s[1]) as i32, 3])
            .collect();
        let outputs: Vec<Vec<i32>> = (0..2)
            .map(|q| vec![(sends[0][q] + sends[1][q]) as i32, 3])
            .collect();
        let meta: Vec<Vec<usize>> = (0..2)
            .map(|p| vec![0, sends[p][0], sends[p][1], sends[0][p], sends[1][p]])
            .collect();
        let got = run(all_to_all_plan, element, &shapes, &outputs, &meta, &[0, 1]);
        for q in 0..2 {
            let mut want = Vec::new();
            for p in 0..2 {
                let input = input_bytes(p, (sends[p][0] + sends[p][1]) * 3, element);
                let before: usize = sends[p][..q].iter().sum();
                want.extend_from_slice(
                    &input[before * 3 * size..(before + sends[p][q]) * 3 * size],
                );
            }
            assert_eq!(got[q], want, "all-to-all {element} to {q}");
        }

        // Broadcast of an odd length from the middle member.
        let got = run(
            broadcast_plan,
            element,
            &vec![vec![7]; 3],
            &vec![vec![7]; 3],
            &vec![vec![1]; 3],
            &[0, 1, 2],
        );
        assert!(
            got.iter().all(|g| *g == input_bytes(1, 7, element)),
            "broadcast {element}"
        );
    }
}

#[test]
fn members_of_different_element_types_all_fail() {
    let mut all = vec![Contribution::default(); 2];
    all[1].element = Element::Bf16;
    for c in &mut all {
        c.input = Some((1 << 32, vec![4]));
        c.output = Some((2 << 32, vec![4]));
        c.meta = vec![0];
    }
    for planner in [sum_plan as Planner, even_plan, broadcast_plan] {
        let plans = planner("test", &all);
        assert!(plans
            .iter()
            .all(|p| matches!(p, Err(e) if e.to_string().contains("bf16"))));
    }
}

#[test]
fn the_share_defect_leaves_the_first_share_right() {
    let mut all = vec![Contribution::default(); 2];
    for (m, c) in all.iter_mut().enumerate() {
        c.input = Some(((m as u64 + 1) << 32, vec![600]));
        c.output = Some(((m as u64 + 3) << 32, vec![600]));
    }
    let right = sum_plan("test", &all);
    let wrong = sum_share_repeating("test", &all);
    assert_eq!(right[0].as_ref().unwrap(), wrong[0].as_ref().unwrap());
    assert_ne!(right[1].as_ref().unwrap(), wrong[1].as_ref().unwrap());
    // Member 1's share begins past the first 256 elements only when the
    // message is longer than one share.
    assert_eq!(share(256, 2, 1), (256, 256));
    assert_eq!(share(600, 2, 1), (512, 600));
}
