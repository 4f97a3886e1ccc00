//! NumPy `.npy` arrays (format versions 1-3): the little-endian numeric, bool and fixed-width
//! unicode dtypes that `.npz` node data uses. Own parser rather than a crate: the format is a
//! short text header plus raw bytes, and we want sizes checked against the data actually
//! present before anything large is allocated.

use std::io::Read;

/// Element data of an array, in the file's storage order.
#[derive(Clone, Debug, PartialEq)]
pub enum NpyData {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    U8(Vec<u8>),
    Bool(Vec<bool>),
    Str(Vec<String>),
}

/// One array: shape and data (always converted to C order, row-major).
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    pub shape: Vec<usize>,
    pub data: NpyData,
}

impl NpyArray {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Elements actually held (equal to `len()` for every array `read_npy` returns).
    pub fn data_len(&self) -> usize {
        match &self.data {
            NpyData::F32(v) => v.len(),
            NpyData::F64(v) => v.len(),
            NpyData::I64(v) => v.len(),
            NpyData::I32(v) => v.len(),
            NpyData::U8(v) => v.len(),
            NpyData::Bool(v) => v.len(),
            NpyData::Str(v) => v.len(),
        }
    }
    pub fn dtype_name(&self) -> &'static str {
        match self.data {
            NpyData::F32(_) => "float32",
            NpyData::F64(_) => "float64",
            NpyData::I64(_) => "int64",
            NpyData::I32(_) => "int32",
            NpyData::U8(_) => "uint8",
            NpyData::Bool(_) => "bool",
            NpyData::Str(_) => "str",
        }
    }
    /// As f32 (from float32 or float64).
    pub fn to_f32(&self) -> Option<Vec<f32>> {
        match &self.data {
            NpyData::F32(v) => Some(v.clone()),
            NpyData::F64(v) => Some(v.iter().map(|&x| x as f32).collect()),
            _ => None,
        }
    }
    /// As i64 (from any integer type).
    pub fn to_i64(&self) -> Option<Vec<i64>> {
        match &self.data {
            NpyData::I64(v) => Some(v.clone()),
            NpyData::I32(v) => Some(v.iter().map(|&x| x as i64).collect()),
            NpyData::U8(v) => Some(v.iter().map(|&x| x as i64).collect()),
            _ => None,
        }
    }
    /// As bool (from bool, or 0/1 uint8).
    pub fn to_bool(&self) -> Option<Vec<bool>> {
        match &self.data {
            NpyData::Bool(v) => Some(v.clone()),
            NpyData::U8(v) if v.iter().all(|&x| x <= 1) => Some(v.iter().map(|&x| x == 1).collect()),
            _ => None,
        }
    }
}

#[derive(Clone, Copy)]
enum Kind {
    F32,
    F64,
    I64,
    I32,
    U8,
    Bool,
    /// Fixed-width UTF-32 string of this many characters.
    Str(usize),
}

impl Kind {
    fn item_size(self) -> usize {
        match self {
            Kind::F32 | Kind::I32 => 4,
            Kind::F64 | Kind::I64 => 8,
            Kind::U8 | Kind::Bool => 1,
            Kind::Str(n) => 4 * n,
        }
    }
}

/// Read one `.npy` array. Errors are plain messages; the caller adds file and array name.
pub fn read_npy(mut r: impl Read) -> Result<NpyArray, String> {
    let mut pre = [0u8; 8];
    r.read_exact(&mut pre).map_err(|e| format!("cannot read the .npy preamble: {e}"))?;
    if &pre[..6] != b"\x93NUMPY" {
        return Err("not a .npy array (bad magic)".into());
    }
    let header_len = match pre[6] {
        1 => {
            let mut b = [0u8; 2];
            r.read_exact(&mut b).map_err(|e| format!("truncated header: {e}"))?;
            u16::from_le_bytes(b) as usize
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            r.read_exact(&mut b).map_err(|e| format!("truncated header: {e}"))?;
            u32::from_le_bytes(b) as usize
        }
        v => return Err(format!(".npy format version {v} is not supported")),
    };
    if header_len > 1 << 20 {
        return Err(format!("header of {header_len} bytes is implausibly large"));
    }
    let mut header = vec![0u8; header_len];
    r.read_exact(&mut header).map_err(|e| format!("truncated header: {e}"))?;
    let header = String::from_utf8(header).map_err(|_| "header is not text".to_string())?;
    let descr = dict_value(&header, "descr").ok_or("header lacks 'descr'")?;
    let fortran = dict_value(&header, "fortran_order").ok_or("header lacks 'fortran_order'")?;
    let shape = dict_value(&header, "shape").ok_or("header lacks 'shape'")?;
    let descr = descr.trim_matches(|c| c == '\'' || c == '"');
    let kind = match descr {
        "<f4" => Kind::F32,
        "<f8" => Kind::F64,
        "<i8" => Kind::I64,
        "<i4" => Kind::I32,
        "|u1" | "<u1" => Kind::U8,
        "|b1" => Kind::Bool,
        d if d.starts_with("<U") => match d[2..].parse::<usize>() {
            Ok(w) if (1..=1 << 16).contains(&w) => Kind::Str(w),
            _ => return Err(format!("bad or too wide string dtype '{d}'")),
        },
        d => return Err(format!("dtype '{d}' is not supported (little-endian f4, f8, i8, i4, u1, b1, U)")),
    };
    let fortran = match fortran {
        "True" => true,
        "False" => false,
        f => return Err(format!("fortran_order '{f}' is not True/False")),
    };
    let shape = parse_shape(shape)?;
    let count = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("shape overflows")?;
    let bytes = count.checked_mul(kind.item_size()).ok_or("shape overflows")?;
    // Read what is really there (growing with the data), never `bytes` up front.
    let mut raw = Vec::with_capacity(bytes.min(1 << 24));
    r.take(bytes as u64).read_to_end(&mut raw).map_err(|e| format!("read failed (corrupt archive?): {e}"))?;
    if raw.len() != bytes {
        return Err(format!("truncated: shape {shape:?} needs {bytes} bytes of data, found {}", raw.len()));
    }
    let data = decode(kind, &raw)?;
    let mut arr = NpyArray { shape, data };
    if arr.data_len() != count {
        return Err(format!("{} elements decoded for shape {:?}", arr.data_len(), arr.shape));
    }
    if fortran && arr.shape.len() > 1 {
        to_c_order(&mut arr);
    }
    Ok(arr)
}

/// The text of `'key': value` in a Python dict literal (value up to the next top-level comma).
fn dict_value<'a>(header: &'a str, key: &str) -> Option<&'a str> {
    let pat_a = format!("'{key}':");
    let pat_b = format!("\"{key}\":");
    let at = header.find(&pat_a).map(|i| i + pat_a.len()).or_else(|| header.find(&pat_b).map(|i| i + pat_b.len()))?;
    let rest = header[at..].trim_start();
    let end = if rest.starts_with('(') { rest.find(')')? + 1 } else { rest.find([',', '}'])? };
    Some(rest[..end].trim())
}

fn parse_shape(s: &str) -> Result<Vec<usize>, String> {
    let inner = s.strip_prefix('(').and_then(|t| t.strip_suffix(')')).ok_or(format!("bad shape '{s}'"))?;
    inner
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(|t| t.trim_end_matches('L').parse::<usize>().map_err(|_| format!("bad shape '{s}'")))
        .collect()
}

fn decode(kind: Kind, raw: &[u8]) -> Result<NpyData, String> {
    fn le<const N: usize, T>(raw: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
        raw.chunks_exact(N).map(|c| f(c.try_into().expect("chunk of N bytes"))).collect()
    }
    Ok(match kind {
        Kind::F32 => NpyData::F32(le(raw, f32::from_le_bytes)),
        Kind::F64 => NpyData::F64(le(raw, f64::from_le_bytes)),
        Kind::I64 => NpyData::I64(le(raw, i64::from_le_bytes)),
        Kind::I32 => NpyData::I32(le(raw, i32::from_le_bytes)),
        Kind::U8 => NpyData::U8(raw.to_vec()),
        Kind::Bool => {
            if let Some(b) = raw.iter().find(|&&b| b > 1) {
                return Err(format!("bool array holds byte {b}"));
            }
            NpyData::Bool(raw.iter().map(|&b| b == 1).collect())
        }
        Kind::Str(n) => {
            let mut out = Vec::new();
            if n > 0 {
                for item in raw.chunks_exact(4 * n) {
                    let s: String = le(item, u32::from_le_bytes)
                        .into_iter()
                        .take_while(|&c| c != 0)
                        .map(|c| char::from_u32(c).ok_or(format!("invalid character U+{c:X}")))
                        .collect::<Result<_, _>>()?;
                    out.push(s);
                }
            }
            NpyData::Str(out)
        }
    })
}

/// Fortran (column-major) data to row-major, for any rank.
fn to_c_order(arr: &mut NpyArray) {
    let shape = arr.shape.clone();
    let n = arr.len();
    // Index in Fortran order of the element at C-order position `i`.
    let f_index = |mut i: usize| {
        let mut fi = 0;
        let mut stride = 1;
        let mut strides = vec![0; shape.len()];
        for (d, s) in strides.iter_mut().enumerate() {
            *s = stride;
            stride *= shape[d];
        }
        for d in (0..shape.len()).rev() {
            fi += (i % shape[d]) * strides[d];
            i /= shape[d];
        }
        fi
    };
    fn permute<T: Clone>(v: &[T], n: usize, f: impl Fn(usize) -> usize) -> Vec<T> {
        (0..n).map(|i| v[f(i)].clone()).collect()
    }
    arr.data = match &arr.data {
        NpyData::F32(v) => NpyData::F32(permute(v, n, f_index)),
        NpyData::F64(v) => NpyData::F64(permute(v, n, f_index)),
        NpyData::I64(v) => NpyData::I64(permute(v, n, f_index)),
        NpyData::I32(v) => NpyData::I32(permute(v, n, f_index)),
        NpyData::U8(v) => NpyData::U8(permute(v, n, f_index)),
        NpyData::Bool(v) => NpyData::Bool(permute(v, n, f_index)),
        NpyData::Str(v) => NpyData::Str(permute(v, n, f_index)),
    };
}

/// Serialise an array as `.npy` version 1.0 (used by tests and by tools that write node data).
pub fn write_npy(arr: &NpyArray) -> Vec<u8> {
    let (descr, body): (String, Vec<u8>) = match &arr.data {
        NpyData::F32(v) => ("<f4".into(), v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        NpyData::F64(v) => ("<f8".into(), v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        NpyData::I64(v) => ("<i8".into(), v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        NpyData::I32(v) => ("<i4".into(), v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        NpyData::U8(v) => ("|u1".into(), v.clone()),
        NpyData::Bool(v) => ("|b1".into(), v.iter().map(|&b| b as u8).collect()),
        NpyData::Str(v) => {
            let w = v.iter().map(|s| s.chars().count()).max().unwrap_or(0).max(1);
            let mut body = Vec::new();
            for s in v {
                let mut chars: Vec<u32> = s.chars().map(|c| c as u32).collect();
                chars.resize(w, 0);
                body.extend(chars.iter().flat_map(|c| c.to_le_bytes()));
            }
            (format!("<U{w}"), body)
        }
    };
    let shape = match arr.shape.len() {
        1 => format!("({},)", arr.shape[0]),
        _ => format!("({})", arr.shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad so the data starts 64-byte aligned, as numpy does.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_every_dtype() {
        let arrays = [
            NpyArray { shape: vec![2, 3], data: NpyData::F32(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) },
            NpyArray { shape: vec![2], data: NpyData::F64(vec![1.5, -2.0]) },
            NpyArray { shape: vec![3], data: NpyData::I64(vec![1, -2, 3]) },
            NpyArray { shape: vec![1], data: NpyData::I32(vec![7]) },
            NpyArray { shape: vec![2], data: NpyData::Bool(vec![true, false]) },
            NpyArray { shape: vec![2], data: NpyData::Str(vec!["ab".into(), "c".into()]) },
            NpyArray { shape: vec![0], data: NpyData::U8(vec![]) },
        ];
        for a in arrays {
            assert_eq!(read_npy(&write_npy(&a)[..]).unwrap(), a);
        }
    }

    #[test]
    fn fortran_order_is_transposed() {
        let mut bytes = write_npy(&NpyArray { shape: vec![2, 3], data: NpyData::I32(vec![1, 4, 2, 5, 3, 6]) });
        let at = bytes.windows(5).position(|w| w == b"False").unwrap();
        bytes.splice(at..at + 5, *b"True ");
        let a = read_npy(&bytes[..]).unwrap();
        assert_eq!(a.data, NpyData::I32(vec![1, 2, 3, 4, 5, 6]));
    }

    #[test]
    fn bad_inputs_are_errors() {
        let good = write_npy(&NpyArray { shape: vec![4], data: NpyData::F32(vec![1.0; 4]) });
        assert!(read_npy(&good[..good.len() - 1]).unwrap_err().contains("truncated"));
        assert!(read_npy(&good[..5]).is_err());
        let huge = write_npy(&NpyArray { shape: vec![1 << 40], data: NpyData::F32(vec![1.0; 4]) });
        assert!(read_npy(&huge[..]).unwrap_err().contains("truncated"));
        let mut be = good.clone();
        let at = be.windows(3).position(|w| w == b"<f4").unwrap();
        be[at] = b'>';
        assert!(read_npy(&be[..]).unwrap_err().contains("not supported"));
        // Found by cargo fuzz: a zero-width string dtype with a nonzero shape (0 bytes of data
        // for 2 elements) reached the Fortran-order transposition with no elements to move.
        let mut u0 = write_npy(&NpyArray { shape: vec![1, 2], data: NpyData::Str(vec!["a".into(), "b".into()]) });
        let at = u0.windows(3).position(|w| w == b"<U1").unwrap();
        u0[at + 2] = b'0';
        let at = u0.windows(5).position(|w| w == b"False").unwrap();
        u0.splice(at..at + 5, *b"True ");
        assert!(read_npy(&u0[..]).unwrap_err().contains("string dtype"));
    }
}
