//! Generator specs as a user types them in place of a graph file: `rmat:SCALE:EDGE_FACTOR[:SEED][:relabel]`
//! and `sbm:N[:CLASSES[:DEGREE]]`. Parsed here, with every size checked, before anything is
//! generated: counts are integers (never a float cast with `as`, which turns `inf` or `1e300`
//! into `usize::MAX`), and the graph they describe must fit the 32-bit ids and nonzero counts
//! of [`crate::graph::Csr`].

use crate::error::{Error, Result};

/// The usage line every R-MAT spec error repeats.
pub const RMAT_USAGE: &str = "use rmat:SCALE:EDGE_FACTOR[:SEED][:relabel], e.g. rmat:18:16 or rmat:19:16:1:relabel";
/// The usage line every SBM spec error repeats.
pub const SBM_USAGE: &str = "use sbm:N[:CLASSES[:DEGREE]], e.g. sbm:100000 or sbm:100000:8:10";

/// Largest node count (32-bit ids, one id kept free as in the readers).
pub const MAX_NODES: u64 = (1 << 31) - 2;
/// Largest nonzero count a CSR holds (32-bit row pointers on the device and in cuSPARSE).
pub const MAX_NNZ: u64 = (1 << 31) - 1;

/// A parsed `rmat:` spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmatSpec {
    pub scale: u32,
    pub edge_factor: u32,
    pub seed: u64,
    pub relabel: bool,
}

/// A parsed `sbm:` spec.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SbmSpec {
    pub n: usize,
    pub classes: usize,
    pub avg_degree: f64,
}

/// `rest` of `spec` after `rmat:`.
pub fn parse_rmat(spec: &str, rest: &str) -> Result<RmatSpec> {
    let bad = |msg: String| Error::Unsupported(format!("'{}': {msg} ({RMAT_USAGE})", shown(spec)));
    let mut parts: Vec<&str> = rest.split(':').collect();
    let relabel = parts.last() == Some(&"relabel");
    if relabel {
        parts.pop();
    }
    if parts.len() < 2 || parts.len() > 3 {
        return Err(bad("expected 2 or 3 numbers".into()));
    }
    let scale: u32 = int(parts[0], "scale").map_err(&bad)?;
    if !(1..=26).contains(&scale) {
        return Err(bad(format!("scale {scale} is outside 1..=26")));
    }
    let edge_factor: u32 = int(parts[1], "edge factor").map_err(&bad)?;
    let edges = (1u64 << scale) * edge_factor as u64;
    if edge_factor == 0 || edges > MAX_NNZ {
        return Err(bad(format!("2^{scale} x {edge_factor} = {edges} edges; need 1 ..= 2^31 - 1")));
    }
    let seed = if parts.len() == 3 { int(parts[2], "seed").map_err(&bad)? } else { 1 };
    Ok(RmatSpec { scale, edge_factor, seed, relabel })
}

/// `rest` of `spec` after `sbm:`.
pub fn parse_sbm(spec: &str, rest: &str) -> Result<SbmSpec> {
    let bad = |msg: String| Error::Unsupported(format!("'{}': {msg} ({SBM_USAGE})", shown(spec)));
    let parts: Vec<&str> = rest.split(':').collect();
    if parts.is_empty() || parts.len() > 3 {
        return Err(bad("expected 1 to 3 numbers".into()));
    }
    let n: u64 = int(parts[0], "node count").map_err(&bad)?;
    let classes: u64 = match parts.get(1) {
        Some(p) => int(p, "class count").map_err(&bad)?,
        None => 8,
    };
    let avg_degree: f64 = match parts.get(2) {
        Some(p) => {
            p.parse().ok().filter(|d: &f64| d.is_finite()).ok_or_else(|| bad(format!("degree '{}' is not a finite number", shown(p))))?
        }
        None => 10.0,
    };
    if n == 0 || n > MAX_NODES {
        return Err(bad(format!("{n} nodes; need 1 ..= 2^31 - 2")));
    }
    if classes == 0 || classes > n {
        return Err(bad(format!("{classes} classes for {n} nodes; need 1 ..= N")));
    }
    if avg_degree < 0.0 || avg_degree * n as f64 > MAX_NNZ as f64 {
        return Err(bad(format!("mean degree {avg_degree} on {n} nodes; need 0 ..= (2^31 - 1) / N stored edges")));
    }
    Ok(SbmSpec { n: n as usize, classes: classes as usize, avg_degree })
}

/// A non-negative decimal integer of type `T`.
fn int<T: std::str::FromStr>(s: &str, what: &str) -> std::result::Result<T, String> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{what} '{}' is not a non-negative integer", shown(s)));
    }
    s.parse().map_err(|_| format!("{what} {} is too large", shown(s)))
}

/// A user string for a message: control characters escaped, shortened.
fn shown(s: &str) -> String {
    crate::graph::text::show(s.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn good_specs() {
        assert_eq!(parse_rmat("", "18:16").unwrap(), RmatSpec { scale: 18, edge_factor: 16, seed: 1, relabel: false });
        assert_eq!(parse_rmat("", "19:16:3:relabel").unwrap(), RmatSpec { scale: 19, edge_factor: 16, seed: 3, relabel: true });
        assert_eq!(parse_sbm("", "1000").unwrap(), SbmSpec { n: 1000, classes: 8, avg_degree: 10.0 });
        assert_eq!(parse_sbm("", "1000:4:2.5").unwrap().avg_degree, 2.5);
    }

    #[test]
    fn bad_specs_say_why() {
        for (rest, why) in [
            ("10:1000000000", "edges"),
            ("26:64", "edges"),
            ("10:0", "edges"),
            ("10:-1", "edge factor"),
            ("1e3:4", "scale"),
            ("27:1", "scale"),
            ("10", "2 or 3"),
        ] {
            let e = parse_rmat("rmat:x", rest).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("rmat:SCALE"), "{rest}: {e}");
        }
        for (rest, why) in [
            ("inf", "node count"),
            ("1e300", "node count"),
            ("1000:8:inf", "finite"),
            ("1000:8:nan", "finite"),
            ("1000:8:-1", "mean degree"),
            ("4000000000", "nodes"),
            ("1000:0", "classes"),
            ("1000:2000", "classes"),
            ("100000000:8:100", "mean degree"),
            ("0", "nodes"),
            ("1:2:3:4", "1 to 3"),
        ] {
            let e = parse_sbm("sbm:x", rest).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("sbm:N"), "{rest}: {e}");
        }
    }
}
