//! Launch constants and index arithmetic shared with the device crate: the very same source
//! files, `include!`d, so host launchers and kernels cannot disagree.

pub mod config {
    include!("../kernels-gpu/src/config.rs");
}
pub mod partition {
    include!("../kernels-gpu/src/partition.rs");
}
pub mod layout {
    include!("../kernels-gpu/src/layout.rs");
}
pub mod index {
    include!("../kernels-gpu/src/index.rs");
}
pub mod rng {
    include!("../kernels-gpu/src/rng.rs");
}
pub mod translate {
    include!("../kernels-gpu/src/translate.rs");
}
