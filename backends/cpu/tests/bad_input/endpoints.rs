//! Groups and routes opened with disagreeing declarations: a member that
//! declares another size, a rank that is not a route's endpoint, two ranks
//! that declare a route's endpoints differently.

use commcheck_cpu::{CpuBackend, CpuDevice};
use eredu_runtime::backend::SumReductionBackend;
use eredu_runtime::CommunicationRouteId;

use crate::common::*;
use crate::{names, refused};

#[test]
fn join_group_refuses_a_member_that_declares_another_size() {
    let device = CpuDevice::new();
    let first = device.join_group("tp", 2, 0).unwrap();
    let error = refused(device.join_group("tp", 3, 1));
    names(
        &error,
        &[
            "join_group",
            "group \"tp\" of 2 members",
            "a member that declares 3 members",
        ],
    );
    let error = refused(device.join_group("tp", 2, 2));
    names(&error, &["a member index below 2", "member 2"]);
    let error = refused(device.join_group("tp", 2, 0));
    names(&error, &["member 0 to join once", "a second join"]);
    let error = refused(device.join_group("empty", 0, 0));
    names(&error, &["at least one member", "a group of 0 members"]);
    // The correctly sized member can still join and the group works.
    let second = device.join_group("tp", 2, 1).unwrap();
    assert_eq!((first.size(), second.size(), second.member()), (2, 2, 1));
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = [first, second]
            .into_iter()
            .enumerate()
            .map(|(rank, group)| {
                let device = device.clone();
                scope.spawn(move || {
                    let executor = device.executor();
                    let input = ranked(&device, rank, &[1]);
                    read(&settle(
                        CpuBackend::all_reduce_sum(input, &group, &executor).unwrap(),
                    ))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    assert_eq!(results, vec![vec![1000.0]; 2]);
}

#[test]
fn a_rank_that_is_not_an_endpoint_cannot_open_the_route() {
    let device = CpuDevice::new();
    let id = CommunicationRouteId::new(5);
    let error = refused(device.route(id, 0, 1, 2));
    names(
        &error,
        &[
            "route",
            "rank 0 (source) or 1 (destination) of route 5",
            "got rank 2",
        ],
    );
    let error = refused(device.route(id, 3, 3, 3));
    names(
        &error,
        &[
            "distinct source and destination ranks",
            "source 3 and destination 3",
        ],
    );
}

#[test]
fn disagreeing_route_endpoints_are_refused() {
    let device = CpuDevice::new();
    let id = CommunicationRouteId::new(11);
    let source = device.route(id, 0, 1, 0).unwrap();
    let error = refused(device.route(id, 1, 0, 1));
    names(
        &error,
        &[
            "route 11 from rank 0 to rank 1",
            "a rank declaring it from 1 to 0",
        ],
    );
    let error = refused(device.route(id, 0, 2, 2));
    names(&error, &["route 11 from rank 0 to rank 1", "from 0 to 2"]);
    // The agreeing endpoint still opens.
    assert!(!device.route(id, 0, 1, 1).unwrap().is_source());
    drop(source);
}
