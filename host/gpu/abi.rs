//! The kernels' typed handles and argument structs: `kernels-gpu/src/abi/*.rs` `include!`d with
//! host macros (the device crate expands the same files into its entry points; see
//! `kernels-gpu/src/abi/mod.rs`). `abi::spmm::spmm_tc8_f16_nt4` is a `Kernel<Tc8SpmmArgs>`.

pub use crate::gpu::launch::{Kernel, Ptr, PtrMut};

macro_rules! kernel_args {
    ($($(#[$meta:meta])* pub struct $name:ident { $($(#[$fmeta:meta])* pub $field:ident : $ty:ty),* $(,)? })*) => {
        $(
            $(#[$meta])*
            #[repr(C)]
            #[derive(Clone, Copy, Debug)]
            pub struct $name { $($(#[$fmeta])* pub $field: $ty),* }
            // SAFETY: repr(C) of u32 / f32 / 64-bit addresses, the layout the device struct has.
            unsafe impl cudarc::driver::DeviceRepr for $name {}
        )*
    };
}

/// One `kernels!` per declaration file: it also lists the file's kernels in `ALL`.
macro_rules! kernels {
    ($($(#[$meta:meta])* $name:ident($args:ty) = $body:expr;)*) => {
        $(
            $(#[$meta])*
            #[allow(non_upper_case_globals)]
            pub const $name: Kernel<$args> = Kernel::new(stringify!($name));
        )*
        /// Every kernel of this file: its symbol and its argument struct's size and alignment.
        #[cfg(test)]
        pub const ALL: &[(&str, usize, usize)] = &[$((stringify!($name), size_of::<$args>(), align_of::<$args>())),*];
    };
}

pub mod attention {
    include!("../../kernels-gpu/src/abi/attention.rs");
}

pub mod gat_attention {
    include!("../../kernels-gpu/src/abi/gat_attention.rs");
}

pub mod row_split {
    include!("../../kernels-gpu/src/abi/row_split.rs");
}

pub mod dropout_gemm {
    include!("../../kernels-gpu/src/abi/dropout_gemm.rs");
}

pub mod hybrid {
    include!("../../kernels-gpu/src/abi/hybrid.rs");
}

pub mod format {
    include!("../../kernels-gpu/src/abi/format.rs");
}
pub mod nn {
    include!("../../kernels-gpu/src/abi/nn.rs");
}
pub mod sddmm {
    include!("../../kernels-gpu/src/abi/sddmm.rs");
}
pub mod selftest {
    include!("../../kernels-gpu/src/abi/selftest.rs");
}
pub mod perm {
    include!("../../kernels-gpu/src/abi/perm.rs");
}
pub mod sample {
    include!("../../kernels-gpu/src/abi/sample.rs");
}

pub mod probe {
    include!("../../kernels-gpu/src/abi/probe.rs");
}

pub mod spmm {
    include!("../../kernels-gpu/src/abi/spmm.rs");
}
pub mod values {
    include!("../../kernels-gpu/src/abi/values.rs");
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::gpu::module::KERNELS_PTX;

    /// Every entry point of the embedded PTX with its parameter lines.
    fn ptx_entries() -> BTreeMap<String, Vec<String>> {
        let mut entries = BTreeMap::new();
        let mut lines = KERNELS_PTX.lines();
        while let Some(line) = lines.next() {
            let Some(rest) = line.trim().strip_prefix(".visible .entry ") else { continue };
            let name = rest.trim_end_matches('(').to_string();
            let params = lines.by_ref().map(str::trim).take_while(|l| !l.starts_with(')')).map(String::from).collect();
            entries.insert(name, params);
        }
        entries
    }

    /// Each listed kernel is an entry point of the PTX taking one parameter of its argument
    /// struct's size and alignment, and every entry point is listed: host and device agree on
    /// every launch's symbol and argument bytes, checked without a GPU.
    #[test]
    fn listings_match_the_ptx_entry_points() {
        let listed: Vec<(&str, usize, usize)> = [
            super::attention::ALL,
            super::dropout_gemm::ALL,
            super::gat_attention::ALL,
            super::format::ALL,
            super::hybrid::ALL,
            super::nn::ALL,
            super::perm::ALL,
            super::probe::ALL,
            super::sample::ALL,
            super::sddmm::ALL,
            super::selftest::ALL,
            super::spmm::ALL,
            super::values::ALL,
        ]
        .concat();
        let entries = ptx_entries();
        assert!(entries.len() >= listed.len(), "no entry points parsed from the PTX");
        for &(name, size, align) in &listed {
            let params = entries.get(name).unwrap_or_else(|| panic!("{name} is listed but not in the PTX"));
            assert_eq!(params.len(), 1, "{name}: {params:?} (want one argument struct)");
            let want = format!(".param .align {align} .b8 {name}_param_0[{size}]");
            assert_eq!(params[0].trim_end_matches(','), want, "{name}: the PTX parameter disagrees with the host struct");
        }
        let unlisted: Vec<&String> = entries.keys().filter(|e| !listed.iter().any(|l| l.0 == e.as_str())).collect();
        assert!(unlisted.is_empty(), "PTX entry points without a Kernel handle in gpu::abi: {unlisted:?}");
    }

    /// The PTX declares no external function: a device `/` or `%` by a value the compiler cannot
    /// prove non-zero, an index out of bounds or an `unwrap` links a call into core's panic code,
    /// which no PTX module provides, and the driver then refuses the whole module (every GPU op
    /// fails to load). Checked without a GPU, so CI catches it.
    #[test]
    fn ptx_links_no_external_function() {
        let externs: Vec<&str> = KERNELS_PTX.lines().filter(|l| l.trim_start().starts_with(".extern .func")).collect();
        let callers: Vec<String> = {
            let mut entry = "";
            let mut out = Vec::new();
            for line in KERNELS_PTX.lines() {
                if let Some(rest) = line.trim().strip_prefix(".visible .entry ") {
                    entry = rest.trim_end_matches('(');
                } else if line.contains("call")
                    && externs.iter().any(|e| e.split_whitespace().last().is_some_and(|f| line.contains(f.trim_end_matches('('))))
                {
                    out.push(entry.to_string());
                }
            }
            out.dedup();
            out
        };
        assert!(
            externs.is_empty(),
            "the PTX declares external functions {externs:?}, called from {callers:?}: use translate::div_or_zero / rem_or_zero, get_unchecked or a guarded path in those kernels"
        );
    }
}
