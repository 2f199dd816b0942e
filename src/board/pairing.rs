//! Pairing a phone, the board's I/O: the loop runs the device flows for the pair dialog's
//! steps and hands back what came of them.

use std::path::Path;

use crate::board::app::{PairAsk, PairNews};
use crate::flows::device;
use crate::flows::owner::Owner;
use crate::kernel::{Error, Ts};
use crate::store::Store;

/// Runs one step of pairing in the pairing directory `dir` (`None`: unknown), as `owner`.
pub fn run(
    store: &dyn Store,
    owner: &mut Owner,
    dir: Option<&Path>,
    ask: PairAsk,
    now: Ts,
) -> PairNews {
    let Some(dir) = dir else {
        let e = Error::usage("cannot tell where the pairing files go: set HOME or XDG_STATE_HOME");
        return match ask {
            PairAsk::Start => PairNews::Started(Err(e)),
            PairAsk::Poll(_) => PairNews::Polled(Err(e)),
            PairAsk::Answer(..) => PairNews::Answered(Err(e)),
        };
    };
    match ask {
        PairAsk::Start => PairNews::Started(device::pair_start(store, dir, None, None, now)),
        PairAsk::Poll(s) => PairNews::Polled(device::pair_poll(dir, &s, now)),
        PairAsk::Answer(s, yes) => {
            if yes && !owner.verified {
                *owner = Owner::detect(store);
            }
            let r = device::pair_answer(store, &owner.actor, dir, &s, yes, now);
            PairNews::Answered(r)
        }
    }
}
