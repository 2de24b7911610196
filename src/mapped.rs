//! Files read as shared bytes without copying them (issue 23, optimize speed): a model file and
//! its weights (435 MB for a BERT-base export) are memory-mapped, so `optimize`, which reads the
//! graph and the dtype and shape of every weight but never the weights' values, does not read
//! the weights at all; `run` touches each page when it first decodes a weight.
//!
//! A mapping is only taken of a regular file; anything else (a FIFO, `/dev/stdin`) is read
//! into memory as before, within the same byte budget. The mapping is read-only and private:
//! like onnxruntime and the safetensors format's own readers, it assumes the file is not
//! truncated by another process while the program runs (the one thing a mapping cannot guard
//! against: the pages would no longer exist).

use std::fmt;
use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

/// The bytes of a file: a shared, read-only memory map, or (for what cannot be mapped: an empty
/// file, a stream) an owned buffer. Cheap to clone (shared).
#[derive(Clone)]
pub struct SharedBytes(Arc<Backing>);

enum Backing {
    Map(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl SharedBytes {
    /// Bytes held in memory.
    pub fn owned(bytes: Vec<u8>) -> SharedBytes {
        SharedBytes(Arc::new(Backing::Owned(bytes)))
    }

    /// A read-only map of the regular file `file` of `len` bytes (`len` from its metadata; an
    /// empty file is an empty buffer: an empty mapping is an error on some systems).
    pub fn map(file: &std::fs::File, len: u64) -> std::io::Result<SharedBytes> {
        if len == 0 {
            return Ok(SharedBytes::owned(Vec::new()));
        }
        // SAFETY: the map is read-only and private; its bytes are only read. A file truncated
        // by another process while mapped is the documented assumption of this module.
        let map = unsafe { memmap2::MmapOptions::new().map(file)? };
        Ok(SharedBytes(Arc::new(Backing::Map(map))))
    }
}

impl Deref for SharedBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self.0.as_ref() {
            Backing::Map(m) => m,
            Backing::Owned(v) => v,
        }
    }
}

impl AsRef<[u8]> for SharedBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl fmt::Debug for SharedBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.0.as_ref() {
            Backing::Map(_) => "mapped",
            Backing::Owned(_) => "owned",
        };
        write!(f, "SharedBytes({} bytes, {kind})", self.len())
    }
}

/// The bytes of the regular file `path`, mapped (see the module docs); errors are plain text for
/// the caller's diagnostic. A device, FIFO or directory is refused, so a graph naming `/dev/zero`
/// as a side file cannot make the loader read forever.
pub fn map_regular_file(path: &Path) -> Result<SharedBytes, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("it is not a regular file".into());
    }
    SharedBytes::map(&file, meta.len()).map_err(|e| format!("cannot map it into memory: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_mapped_file_reads_as_its_bytes() {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(b"hello mapped world").unwrap();
        f.flush().unwrap();
        let b = map_regular_file(f.path()).unwrap();
        assert_eq!(&*b, b"hello mapped world");
        assert!(format!("{b:?}").contains("mapped"));
        let c = b.clone();
        assert_eq!(c.as_ref(), b.as_ref());
    }

    #[test]
    fn an_empty_file_is_an_empty_buffer() {
        let f = tempfile::NamedTempFile::new().unwrap();
        assert!(map_regular_file(f.path()).unwrap().is_empty());
    }

    #[test]
    fn a_directory_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = map_regular_file(d.path()).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
    }
}
