//! Building and running the host program: a temporary directory, the compiler flags, the binary
//! cache keyed by the sources and flags, and a run under a timeout.

use super::{io_err, HostError, HostOptions, Program, CACHE_VERSION, OPT_LEVEL};
use crate::codegen::EMU_HEADER;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A directory removed when dropped.
pub(super) struct TempDir(pub(super) PathBuf);

impl TempDir {
    pub(super) fn new() -> Result<TempDir, HostError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let p = base.join(format!("dlc-host-{}-{n}-{nanos}", std::process::id()));
            match std::fs::create_dir(&p) {
                Ok(()) => return Ok(TempDir(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(io_err(&base)(e)),
            }
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn default_cache_dir() -> PathBuf {
    if let Some(t) = std::env::var_os("CARGO_TARGET_DIR") {
        return PathBuf::from(t).join("dlc-host-cache");
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    if target.is_dir() {
        return target.join("dlc-host-cache");
    }
    std::env::temp_dir().join("dlc-host-cache")
}

/// FNV-1a, 64 bits, over length-prefixed parts (a cache key, not a security measure).
fn cache_key(parts: &[&str]) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in (p.len() as u64).to_le_bytes().iter().chain(p.as_bytes()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{h:016x}")
}

fn flags(opts: &HostOptions) -> Vec<&'static str> {
    // -fno-weak lets the emulation keep every non-template __shared__ variable in one section
    // (poisoned before each block); one translation unit, so nothing else changes.
    let mut f = vec!["-std=c++17", OPT_LEVEL, "-fno-strict-aliasing", "-fno-weak"];
    if opts.sanitize {
        f.extend([
            "-fsanitize=address,undefined",
            "-fno-sanitize-recover=undefined",
        ]);
        f.extend(["-fno-omit-frame-pointer", "-g1"]);
    }
    f
}

/// Compiles `dir/main.cpp` into `out`.
fn compile(dir: &Path, out: &Path, opts: &HostOptions) -> Result<(), HostError> {
    let result = Command::new(&opts.compiler)
        .args(flags(opts))
        .arg("-o")
        .arg(out)
        .arg("main.cpp")
        .current_dir(dir)
        .output();
    let output = match result {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(HostError::CompilerMissing {
                compiler: opts.compiler.clone(),
            })
        }
        Err(e) => return Err(io_err(Path::new(&opts.compiler))(e)),
    };
    if output.status.success() {
        return Ok(());
    }
    let mut log = String::from_utf8_lossy(&output.stderr).into_owned();
    log.push_str(&String::from_utf8_lossy(&output.stdout));
    Err(HostError::Compile { log })
}

/// The compiled program for `dir`'s sources: from the cache, or built (and cached when possible).
pub(super) fn binary(
    dir: &Path,
    prog: &Program,
    source: &str,
    opts: &HostOptions,
) -> Result<PathBuf, HostError> {
    let f = flags(opts);
    let key = cache_key(&[
        CACHE_VERSION,
        EMU_HEADER,
        source,
        &prog.main_cpp,
        &f.join(" "),
    ]);
    let cache = opts.cache_dir.clone().unwrap_or_else(default_cache_dir);
    let cached = cache.join(format!("{key}.bin"));
    if cached.is_file() {
        return Ok(cached);
    }
    if std::fs::create_dir_all(&cache).is_err() {
        let local = dir.join("prog");
        compile(dir, &local, opts)?;
        return Ok(local);
    }
    // Built under a private name and renamed, so concurrent runs never see a partial binary.
    let tmp = cache.join(format!(
        "{key}.tmp-{}-{}",
        std::process::id(),
        dir_suffix(dir)
    ));
    let built = compile(dir, &tmp, opts);
    if let Err(e) = built {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, &cached).map_err(io_err(&cached))?;
    Ok(cached)
}

fn dir_suffix(dir: &Path) -> String {
    dir.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Runs `exe dir`, killing it after `timeout`; returns (success, status text, stderr).
pub(super) fn run(
    exe: &Path,
    dir: &Path,
    opts: &HostOptions,
) -> Result<(bool, String, String), HostError> {
    let mut child = Command::new(exe)
        .arg(dir)
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=0")
        .env("UBSAN_OPTIONS", "print_stacktrace=1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io_err(exe))?;
    let mut pipe = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(p) = pipe.as_mut() {
            let _ = p.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    });
    let start = Instant::now();
    let mut nap = Duration::from_millis(1);
    let status = loop {
        if let Some(s) = child.try_wait().map_err(io_err(exe))? {
            break s;
        }
        if start.elapsed() > opts.timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(HostError::Timeout {
                secs: opts.timeout.as_secs(),
            });
        }
        std::thread::sleep(nap);
        nap = (nap * 2).min(Duration::from_millis(20));
    };
    let stderr = reader.join().unwrap_or_default();
    Ok((status.success(), status.to_string(), stderr))
}
