//! `evidence list`: evidence across todos, filtered, and the best run of a metric.
