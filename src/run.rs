//! `dlc-egg run` (being written).
