//! One exchange with an upstream, whatever the protocols on either side:
//! what follows each attempt (`decide`).

pub(super) mod decide;
