//! `agents`: the live roster of agents seen in the journal and the leases.
